"""``numaplane admit``: dry-run admissions on one node."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from numaplane.cli import main

POD = """apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers:
    - name: main
      resources: {requests: {cpu: "60", memory: 1Gi}, limits: {cpu: "60", memory: 1Gi}}
"""


def test_admit_reports_allocations_and_typed_rejections(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD + "---\n" + POD.replace("name: db", "name: db2").replace('"60"', '"8"'))
    config = tmp_path / "node.yaml"
    config.write_text("topologyManager: {policy: single-numa-node}\ncpuManager: {reservedCPUCount: 2}\n")
    result = CliRunner().invoke(main, ["admit", "--config", str(config), str(pod), "-o", "json"])
    assert result.exit_code == 1, result.output  # a pod was rejected
    assert CliRunner().invoke(main, ["admit", "--exit-zero", "--config", str(config), str(pod)]).exit_code == 0
    doc = json.loads(result.stdout)
    first, second = doc["admissions"]
    assert first["admitted"] is False and first["reason"] == "TopologyAffinityError"
    assert second["admitted"] is True
    cpus = second["containers"][0]["allocations"]
    assert any("cpus" in a for a in cpus)


def test_admit_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("metadata: {name: x}\nspec: {containers: [{name: c, resources: {requests: {cpu: many}}}]}\n")
    result = CliRunner().invoke(main, ["admit", str(bad)])
    assert result.exit_code != 0 and "bad.yaml" in result.stderr and "cpu" in result.stderr
    config = tmp_path / "cfg.yaml"
    config.write_text("topologyManager: {policy: sometimes}\n")
    result = CliRunner().invoke(main, ["admit", "--config", str(config), str(bad)])
    assert result.exit_code != 0 and "sometimes" in result.stderr


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("simulate", "topology", "conformance", "admit", "exporter", "render"):
        assert name in result.stdout


def test_admit_refuses_a_negative_request_naming_file_document_and_field(tmp_path: Path) -> None:
    pod = tmp_path / "pods.yaml"
    pod.write_text(
        POD
        + "---\n"
        + POD.replace("name: db", "name: minus").replace("memory: 1Gi}, limits", 'memory: "-1Gi"}, limits')
    )
    result = CliRunner().invoke(main, ["admit", str(pod), "-o", "json"])
    assert result.exit_code != 0 and result.stdout == "" and "Traceback" not in result.stderr
    assert (
        f"{pod} (document 1): invalid pod at spec.containers[0].resources.requests.memory: quantity '-1Gi'"
        in result.stderr
    )

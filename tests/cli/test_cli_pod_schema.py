"""Issue 26 finding 4: a pod spec with a field the Pod schema does not declare (``containers[0].resource``,
``resouces``) is refused, naming the path, by every command that reads pod manifests — not read as a
BestEffort pod. Strict by default (as ``kubectl --validate=strict``); ``--validate warn|ignore`` relaxes it.
Each test runs the real ``numaplane`` entry point in a subprocess."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import numaplane

from numaplane.sim.snapshot import SnapshotWriter

_LIMITS = {"limits": {"cpu": "2", "memory": "1Gi"}}


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typo"}, "spec": {"containers": [container]}}


_TYPOS = [
    pytest.param({"name": "c", "resource": _LIMITS}, "spec.containers[0].resource: unknown field", id="resource"),
    pytest.param({"name": "c", "resouces": _LIMITS}, "spec.containers[0].resouces: unknown field", id="resouces"),
    pytest.param(
        {"name": "c", "resources": {"limit": _LIMITS["limits"]}},
        "spec.containers[0].resources.limit: unknown field",
        id="limit",
    ),
    pytest.param(
        {"name": "c", "resources": _LIMITS, "ports": [{"containerPort": "http"}]},
        "spec.containers[0].ports[0].containerPort: expected an integer, got a string",
        id="wrong-type",
    ),
]


def _write(tmp_path: Path, name: str, doc: object) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("container", "message"), _TYPOS)
def test_admit_refuses_an_unknown_field_in_a_pod(tmp_path: Path, container: dict[str, Any], message: str) -> None:
    pod = _write(tmp_path, "pod.yaml", _pod(container))
    run = numaplane("admit", str(pod), "-o", "json")
    assert run.code == 2, run.stdout
    assert f"{pod} (document 0): invalid pod at {message}" in run.error_line


def test_admit_validate_ignore_reads_the_pod_as_before(tmp_path: Path) -> None:
    pod = _write(tmp_path, "pod.yaml", _pod({"name": "c", "resource": _LIMITS}))
    run = numaplane("admit", str(pod), "-o", "json", "--validate", "ignore")
    assert run.code == 0, run.stderr
    assert run.stderr == ""
    assert yaml.safe_load(run.stdout)["admissions"][0]["admitted"] is True


def test_admit_validate_warn_prints_the_problem_and_goes_on(tmp_path: Path) -> None:
    pod = _write(tmp_path, "pod.yaml", _pod({"name": "c", "resource": _LIMITS}))
    run = numaplane("admit", str(pod), "-o", "json", "--validate", "warn")
    assert run.code == 0, run.stderr
    assert run.stderr.strip() == (
        f"warning: {pod} (document 0): invalid pod at spec.containers[0].resource: unknown field "
        "(ignored: --validate=warn)"
    )


def test_admit_accepts_a_correct_guaranteed_pod(tmp_path: Path) -> None:
    pod = _write(tmp_path, "pod.yaml", _pod({"name": "c", "image": "busybox", "resources": _LIMITS}))
    run = numaplane("admit", str(pod), "-o", "json")
    assert run.code == 0, run.stderr
    admission = yaml.safe_load(run.stdout)["admissions"][0]
    assert admission["admitted"] is True


def test_explain_refuses_an_unknown_field_in_the_pod(tmp_path: Path) -> None:
    pod = _write(tmp_path, "pod.yaml", _pod({"name": "c", "resouces": _LIMITS}))
    nrts = tmp_path / "nrts"
    nrts.mkdir()
    run = numaplane("explain", "--pod", str(pod), "--nrt", str(nrts))
    assert run.code == 2, run.stdout
    assert f"--pod {pod}: invalid pod at spec.containers[0].resouces: unknown field" in run.error_line


def test_simulate_workload_refuses_an_unknown_field_in_a_spec(tmp_path: Path) -> None:
    workload = _write(
        tmp_path,
        "w.yaml",
        {
            "kind": "Workload",
            "pods": [{"name": "gu", "count": 3, "spec": {"containers": [{"name": "c", "resource": _LIMITS}]}}],
        },
    )
    run = numaplane("simulate", "--workload", str(workload), "--topology", "intel-xeon-gold6330-2s2n-112t-pci=1", "-q")
    assert run.code == 2, run.stdout
    assert f"{workload}: pods[0].spec.containers[0].resource: unknown field" in run.error_line


def _snapshot(tmp_path: Path) -> Path:
    out = io.StringIO()
    writer = SnapshotWriter(out, {"source": "test"})
    writer.section("nodes")
    writer.add({"name": "n1", "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}})
    writer.close()
    path = tmp_path / "snap.yaml"
    path.write_text(out.getvalue())
    return path


def test_simulate_from_add_workload_refuses_an_unknown_field(tmp_path: Path) -> None:
    workload = _write(
        tmp_path,
        "w.yaml",
        {"kind": "Workload", "pods": [{"name": "gu", "spec": {"containers": [{"name": "c", "resouces": _LIMITS}]}}]},
    )
    run = numaplane("simulate", "--from", str(_snapshot(tmp_path)), "--add-workload", str(workload))
    assert run.code == 2, run.stdout
    assert "pods[0].spec.containers[0].resouces: unknown field" in run.error_line


def test_simulate_from_scenario_workload_refuses_an_unknown_field(tmp_path: Path) -> None:
    scenario = _write(
        tmp_path,
        "s.yaml",
        {
            "kind": "WhatIfScenario",
            "workload": {
                "kind": "Workload",
                "pods": [{"name": "gu", "spec": {"containers": [{"name": "c", "resource": _LIMITS}]}}],
            },
        },
    )
    run = numaplane("simulate", "--from", str(_snapshot(tmp_path)), "--scenario", str(scenario))
    assert run.code == 2, run.stdout
    assert "pods[0].spec.containers[0].resource: unknown field" in run.error_line

"""Dry runs tell the truth about the input: the API server's defaulting (item 2), bad input refused
(item 6), the config validated in one pass (item 7), and the admit / explain conventions (item 9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_helpers import numaplane

from numaplane.resources.errors import PodSpecError
from numaplane.resources.manifest import apply_api_defaults, pod_from_manifest
from numaplane.sim.errors import WorkloadError
from numaplane.sim.workload import parse_workload

LIMITS_ONLY = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "lim"},
    "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]},
}


def _write(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


# -- item 2: one defaulting function, used by every entry that reads a Pod from a file ----------------


def test_requests_default_from_limits_per_resource() -> None:
    doc = {
        "spec": {
            "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "1"}}}],
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
            ],
        }
    }
    out = apply_api_defaults(doc)
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert out["spec"]["initContainers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert "requests" not in doc["spec"]["initContainers"][0]["resources"]  # the input is not changed
    assert pod_from_manifest(LIMITS_ONLY).qos_class == "Guaranteed"


def test_admit_gives_a_limits_only_pod_exclusive_cpus(tmp_path: Path) -> None:
    run = numaplane("admit", _write(tmp_path, "pod.yaml", LIMITS_ONLY), "-o", "json")
    assert run.code == 0, run.stderr
    (admission,) = json.loads(run.stdout)["admissions"]
    assert any("cpus" in a for a in admission["containers"][0]["allocations"])


def test_explain_calls_a_limits_only_pod_guaranteed(tmp_path: Path) -> None:
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n1"},
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [
                    {"name": r, "capacity": v, "allocatable": v, "available": v}
                    for r, v in (("cpu", "8"), ("memory", "8Gi"))
                ],
            }
        ],
    }
    run = numaplane(
        "explain",
        "--pod",
        _write(tmp_path, "pod.yaml", LIMITS_ONLY),
        "--nrt",
        _write(tmp_path, "n.yaml", nrt),
        "-o",
        "json",
    )
    assert run.code == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["qosClass"] == "Guaranteed" and doc["kind"] == "PodExplanation" and doc["apiVersion"]


def test_simulator_workloads_default_requests_from_limits() -> None:
    doc = {"kind": "Workload", "pods": [{"name": "w", "spec": LIMITS_ONLY["spec"]}]}
    (arrival,) = parse_workload(doc)
    assert arrival.pod.qos_class == "Guaranteed"


# -- item 6: bad input is refused, naming it ---------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ("", "empty"),
        ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, "expected a Pod, got 'Service'"),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}, "got 'Deployment'"),
        ({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}, "at least one container"),
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}}]
                },
            },
            "spec.containers[0].resources.requests.cpu",
        ),
    ],
)
def test_admit_refuses_what_the_api_server_would(tmp_path: Path, doc: object, words: str) -> None:
    run = numaplane("admit", _write(tmp_path, "in.yaml", doc))
    assert run.code == 2
    assert "in.yaml" in run.error_line and words in run.error_line


def test_pod_from_manifest_refuses_requests_above_limits() -> None:
    with pytest.raises(PodSpecError, match="less than or equal"):
        pod_from_manifest(
            {
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}
                    ]
                }
            }
        )


def test_misspelt_workload_field_is_an_error(tmp_path: Path) -> None:
    doc = {"kind": "Workload", "pods": [{"name": "w", "durration": 60, "spec": LIMITS_ONLY["spec"]}]}
    with pytest.raises(WorkloadError, match=r"pods\[0\]\.durration: unknown field"):
        parse_workload(doc)
    run = numaplane("simulate", "-q", "--workload", _write(tmp_path, "w.yaml", doc), "--nodes", "2")
    assert run.code == 2 and "durration" in run.error_line


def test_conformance_unknown_kind_is_refused(shared_dir: Path) -> None:
    run = numaplane("conformance", "--kind", "typo", str(shared_dir / "conformance/cpu-take.jsonl"))
    assert run.code == 2 and "typo" in run.error_line and "cpu-take" in run.error_line


# -- item 7: the config is validated in one pass, every problem with its path, in our words -----------


def test_config_lists_every_problem_with_its_path(tmp_path: Path) -> None:
    config = """
topologyManager:
  scop: pod
  options: {prefer-closest-numa-nodes: "yes", max-allowable-numa-nodes: "lots", bogus: "1"}
cpuManager:
  policy: statik
  options: {full-pcpus-only: "yes"}
memoryManager:
  reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}, extra: 1}]
devices:
  example.com/gpu: [{id: g0, numa: [0], colour: red}]
"""
    run = numaplane("admit", "--config", _write(tmp_path, "node.yaml", config), _write(tmp_path, "p.yaml", LIMITS_ONLY))
    assert run.code == 2
    line = run.error_line
    for path in (
        "topologyManager.scop: unknown field",
        "topologyManager.options.prefer-closest-numa-nodes",
        "topologyManager.options.max-allowable-numa-nodes",
        "topologyManager.options.bogus: unknown option",
        "cpuManager.policy",
        "cpuManager.options.full-pcpus-only",
        "memoryManager.reservedMemory[0].extra: unknown field",
        "devices.example.com/gpu[0].colour: unknown field",
    ):
        assert path in line, path
    assert "strconv" not in line and "(8 problems)" in line


# -- item 9: admit / explain exit non-zero on rejection (opt-out), camelCase JSON with apiVersion/kind --


def test_admit_exits_1_on_rejection_unless_exit_zero(tmp_path: Path) -> None:
    big = json.loads(json.dumps(LIMITS_ONLY).replace('"2"', '"500"'))
    pod = _write(tmp_path, "big.yaml", big)
    run = numaplane("admit", pod, "-o", "json")
    assert run.code == 1
    doc = json.loads(run.stdout)
    assert doc["apiVersion"] == "numaplane.io/v1" and doc["kind"] == "AdmissionReport"
    assert numaplane("admit", "--exit-zero", pod).code == 0


def test_admit_table_shows_memory_in_units_and_whole_cpu_lists(tmp_path: Path) -> None:
    config = "memoryManager: {policy: Static, reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}, {numaNode: 1, limits: {memory: 1Gi}}]}\ncpuManager: {reservedCPUCount: 2}\n"
    big = json.loads(json.dumps(LIMITS_ONLY).replace('"2"', '"40"').replace("1Gi", "8Gi"))
    run = numaplane("admit", "--config", _write(tmp_path, "c.yaml", config), _write(tmp_path, "p.yaml", big))
    assert run.code == 0, run.stderr
    assert "memory 8Gi on NUMA" in run.stdout
    assert "…" not in run.stdout


def test_explain_exits_1_when_the_pod_fits_nowhere(tmp_path: Path) -> None:
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n1"},
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [{"name": "cpu", "capacity": "1", "allocatable": "1", "available": "1"}],
            }
        ],
    }
    args = ("explain", "--pod", _write(tmp_path, "p.yaml", LIMITS_ONLY), "--nrt", _write(tmp_path, "n.yaml", nrt))
    assert numaplane(*args).code == 1
    assert numaplane(*args, "--exit-zero").code == 0


def test_conformance_json_is_camel_case_with_api_version_and_kind(shared_dir: Path) -> None:
    run = numaplane("conformance", str(shared_dir / "conformance/cpu-take.jsonl"), "-o", "json")
    doc = json.loads(run.stdout)
    assert run.code == 0 and doc["kind"] == "ConformanceReport" and doc["apiVersion"] == "numaplane.io/v1"
    assert "byKind" in doc and "by_kind" not in doc

"""Issue 24 item 1: ``numaplane explain`` judges a pod at its own ``numaplane.io/`` preferences (the same
allocation request the node admits it with) and says so per node; the real entry point, in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import numaplane

from numaplane.nrt.from_manager import NRTPublisher
from numaplane.policy.manager import ResourceManager
from numaplane.topology.model import synthetic

MACHINE = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=8, threads_per_core=2, memory_per_numa_bytes=64 << 30)


def _cluster(tmp_path: Path) -> tuple[Path, Path]:
    nrts, nodes = tmp_path / "nrt", tmp_path / "nodes"
    nrts.mkdir()
    nodes.mkdir()
    for name, policy in (("be", "best-effort"), ("snn", "single-numa-node")):
        config = {
            "topologyManager": {"policy": policy, "scope": "container"},
            "cpuManager": {"reservedCPUCount": 2},
            "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
        }
        nrt = NRTPublisher(ResourceManager(MACHINE, config), name).publish()
        (nrts / f"{name}.json").write_text(json.dumps(nrt.to_dict()))
        allocatable = {"cpu": "30", "memory": "120Gi", "pods": "110"}
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}
        (nodes / f"{name}.json").write_text(json.dumps(node))
    return nrts, nodes


def _pod(tmp_path: Path, annotations: dict[str, str]) -> Path:
    def ctr(name: str) -> dict[str, Any]:
        res = {"cpu": "10", "memory": "1Gi"}
        return {"name": name, "image": "busybox", "resources": {"requests": res, "limits": res}}

    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": annotations}}
    doc["spec"] = {"containers": [ctr("a"), ctr("b")]}
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(doc))
    return path


def test_explain_judges_a_pod_at_its_own_scope_and_policy_and_says_so(tmp_path: Path) -> None:
    nrts, nodes = _cluster(tmp_path)
    plain = numaplane(
        "explain", "--pod", str(_pod(tmp_path, {})), "--nrt", str(nrts), "--nodes", str(nodes), "-o", "json"
    )
    assert sorted(n["node"] for n in json.loads(plain.stdout)["nodes"] if n["fits"]) == ["be", "snn"]
    notes = {"numaplane.io/topology-scope": "pod", "numaplane.io/topology-policy": "single-numa-node"}
    run = numaplane(
        "explain", "--pod", str(_pod(tmp_path, notes)), "--nrt", str(nrts), "--nodes", str(nodes), "-o", "json"
    )
    assert run.code == 1, run.stderr  # 20 CPUs in one 16-CPU zone: no node, as both nodes would refuse it
    by_node = {n["node"]: n for n in json.loads(run.stdout)["nodes"]}
    assert by_node["be"]["reason"] == by_node["snn"]["reason"] == "cannot align pod"
    assert "judged at the pod's own numaplane.io/topology-policy single-numa-node" in by_node["be"]["notes"]
    assert "judged at the pod's own numaplane.io/topology-scope pod" in by_node["snn"]["notes"]
    table = numaplane("explain", "--pod", str(_pod(tmp_path, notes)), "--nrt", str(nrts), "--nodes", str(nodes))
    assert "numaplane.io/topology-scope=pod" in table.stdout

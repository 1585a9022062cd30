"""Cluster snapshots and what-if on them: paginated capture, the file format, rebuilding nodes from
NRTs, and scenarios (policy changes, pending pods, added workload) — on the fake API server and plain
values."""

from __future__ import annotations

import asyncio
import io
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import Invalid
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import CRD, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nrt.crd import crd_manifest
from numaplane.nrt.from_manager import node_nrt
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.sim.capture import capture
from numaplane.sim.errors import ScenarioError, SnapshotFormatError
from numaplane.sim.rebuild import check_model, model_node
from numaplane.sim.scenario import Scenario, parse_policy_flag, parse_scenario
from numaplane.sim.snapshot import Snapshot, SnapshotWriter, read_snapshot, reduce_nrt, reduce_pod
from numaplane.sim.whatif import load_cluster, run_whatif
from numaplane.sim.whatif_report import whatif_document
from numaplane.testing.fakeapi import FakeApiServer
from numaplane.topology.model import synthetic
from numaplane_harness.clustergen import generate_cluster, pending_pods

CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")


async def _fill(store: InMemoryKube, nodes: int, pods: int, pending: int) -> int:
    await store.create(CRD, crd_manifest())
    bound = 0
    for gen in generate_cluster(nodes, pods, seed=7):
        await store.create(NODE, gen.node)
        await store.create(NODE_RESOURCE_TOPOLOGY, gen.nrt)
        for pod in gen.pods:
            await store.create(POD, pod)
        bound += len(gen.pods)
    for pod in pending_pods(pending):
        await store.create(POD, pod)
    return bound


async def test_iter_list_streams_pages_through_the_fake_api_server(fake_apiserver: FakeApiServer) -> None:
    store = fake_apiserver.store
    for i in range(23):
        await store.create(POD, {"metadata": {"name": f"p{i:02d}"}, "spec": {"containers": [{"name": "c"}]}})
    page = store.list_page(POD, limit=10)
    assert [p["metadata"]["name"] for p in page.items] == [f"p{i:02d}" for i in range(10)]
    assert page.continue_token is not None
    port = fake_apiserver.port_client()
    try:
        names = [p["metadata"]["name"] async for p in port.iter_list(POD, page_size=4)]
    finally:
        await port.close()
    assert names == [f"p{i:02d}" for i in range(23)]
    with pytest.raises(Invalid):
        store.list_page(POD, limit=5, continue_token="not-a-token")


async def test_snapshot_file_round_trip_and_yaml_fallback(fake_apiserver: FakeApiServer, tmp_path: Path) -> None:
    bound = await _fill(fake_apiserver.store, 4, 8, 3)
    port: LightkubePort = fake_apiserver.port_client()
    out = io.StringIO()
    try:
        summary = await capture(port, SnapshotWriter(out, {"source": "test"}), page_size=3)
    finally:
        await port.close()
    assert summary == {"nodes": 4, "nodeResourceTopologies": 4, "pods": bound + 3, "boundPods": bound, "pendingPods": 3}
    fast = tmp_path / "fast.yaml"
    fast.write_text(out.getvalue())
    snap = read_snapshot(fast)
    doc = yaml.safe_load(out.getvalue())
    assert (snap.nodes, snap.nrts, snap.pods) == (doc["nodes"], doc["nodeResourceTopologies"], doc["pods"])
    edited = tmp_path / "edited.yaml"  # a hand-edited (block style) file goes through the YAML parser
    edited.write_text(yaml.safe_dump(doc))
    again = read_snapshot(edited)
    assert (again.nodes, again.nrts, again.pods, again.metadata) == (snap.nodes, snap.nrts, snap.pods, snap.metadata)


def test_bad_snapshot_header_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: v1\nkind: List\nnodes: []\n")
    with pytest.raises(SnapshotFormatError, match="apiVersion"):
        read_snapshot(path)
    with pytest.raises(SnapshotFormatError, match="cannot read"):
        read_snapshot(tmp_path / "missing.yaml")


def test_pod_reduction_keeps_placement_fields_only() -> None:
    pod = {
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"numaplane.io/cpu-strategy": "packed", "secret.example/token": "x"},
            "labels": {"app": "a"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True, "uid": "z"}],
        },
        "spec": {
            "nodeName": "n",
            "containers": [
                {"name": "c", "image": "i", "env": [{"name": "K", "value": "v"}], "resources": {"limits": {"cpu": "2"}}}
            ],
            "initContainers": [{"name": "s", "restartPolicy": "Always", "command": ["x"]}],
            "volumes": [{"name": "v", "secret": {"secretName": "s"}}],
            "nodeSelector": {"pool": "numa"},
        },
        "status": {"phase": "Running", "qosClass": "Guaranteed", "podIP": "10.0.0.1"},
    }
    assert reduce_pod(pod) == {
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"numaplane.io/cpu-strategy": "packed"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}],
        },
        "spec": {
            "nodeName": "n",
            "nodeSelector": {"pool": "numa"},
            "initContainers": [{"name": "s", "restartPolicy": "Always"}],
            "containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}],
        },
        "status": {"phase": "Running", "qosClass": "Guaranteed"},
    }


def _guaranteed(name: str, cpus: int, node: str = "", ts: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    req = {"cpu": str(cpus), "memory": "1Gi"}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": req, "limits": req}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": ts}, "spec": spec}


def _best_effort_node_snapshot() -> Snapshot:
    """One best-effort node (2 NUMA × 8 CPUs, 2 reserved) holding a pod that spans both zones."""
    topology = synthetic(sockets=2, cores_per_numa=8, threads_per_core=1)
    config = parse_config(
        {
            "topologyManager": {"policy": "best-effort"},
            "cpuManager": {"policy": "static", "reservedCPUCount": 2},
            "memoryManager": {"policy": "None"},
        }
    )
    manager = ResourceManager(topology, config)
    pods = [
        _guaranteed("wide", 10, "n1", "2026-01-01T00:00:01Z"),
        _guaranteed("small", 2, "n1", "2026-01-01T00:00:02Z"),
    ]
    for doc in pods:
        assert manager.admit(parse_pod(doc)).admitted
    node = {"name": "n1", "labels": {"pool": "be"}, "allocatable": {"cpu": "14", "memory": "100Gi", "pods": "110"}}
    nrt = reduce_nrt(node_nrt(manager, "n1").to_dict())
    bare = {"name": "n2", "labels": {}, "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    pending = _guaranteed("waiting", 4)
    orphan = _guaranteed("lost", 1, "gone")
    return Snapshot(nodes=[node, bare], nrts=[nrt], pods=[*map(reduce_pod, pods), reduce_pod(pending), orphan])


def test_rebuilt_node_matches_its_nrt_and_unknown_nodes_are_reported() -> None:
    cluster = load_cluster(_best_effort_node_snapshot())
    n1, n2 = cluster.nodes
    assert (n1.source, n2.source) == ("nrt", "capacity")
    assert check_model(n1) == []
    assert n1.config().topology_policy == "best-effort"
    assert [p.name for p in cluster.bound["n1"]] == ["wide", "small"]
    assert [p.name for p in cluster.unknown_node] == ["lost"]
    result = run_whatif(cluster, Scenario())
    assert result.nrt_mismatches == {}
    assert result.baseline["n1"].refused == []
    (outcome,) = result.outcomes
    assert outcome.now_failing == []
    assert [p["pod"] for p in outcome.pending_placed] == ["default/waiting"]


def test_policy_change_reports_pods_that_would_now_fail() -> None:
    cluster = load_cluster(_best_effort_node_snapshot())
    scenario = Scenario(policies=(parse_policy_flag("single-numa-node@pool=be"),))
    result = run_whatif(cluster, scenario)
    (outcome,) = result.outcomes
    assert outcome.now_failing == [{"pod": "default/wide", "node": "n1", "reason": "TopologyAffinityError"}]
    doc = whatif_document(result)
    assert doc["baseline"]["matchesNRT"] is True
    assert doc["schedulers"][0]["nowFailingAtNode"][0]["pod"] == "default/wide"
    # the wide pod's CPUs are free after the change: more CPU headroom than before
    assert doc["schedulers"][0]["headroomAfter"]["cpu"] > doc["headroomBefore"]["cpu"] - 4


def test_scenario_file_adds_workload_and_compares_schedulers() -> None:
    scenario = parse_scenario(
        {
            "apiVersion": "numaplane.io/v1",
            "kind": "WhatIfScenario",
            "policies": [{"nodeSelector": "pool=be", "config": {"topologyManager": {"scope": "pod"}}}],
            "workload": {"pods": [{"name": "db", "count": 2, "spec": _guaranteed("db", 1)["spec"]}]},
            "schedulers": ["default", "numa:LeastAllocated:overreserve"],
        },
        "scenario.yaml",
    )
    cluster = load_cluster(_best_effort_node_snapshot())
    assert cluster.nodes[0].config(scenario.overrides(cluster.nodes[0].labels)).topology_scope == "pod"
    result = run_whatif(cluster, scenario)
    assert [o.scheduler for o in result.outcomes] == ["default", "numa-LeastAllocated-overreserve"]
    for outcome in result.outcomes:
        assert outcome.workload == {"pods": 2, "placed": 2, "rejected": 0, "pending": 0, "rejectedAtNode": {}}
        assert [p["outcome"] for p in outcome.added] == ["placed", "placed"]


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"kind": "Workload"}, "kind"),
        ({"policies": [{"config": "x"}]}, "policies"),
        ({"policies": [{"nodeSelector": "a in (", "config": {"dra": {"enabled": True}}}]}, "selector"),
        ({"schedulers": ["nope"]}, "unknown scheduler"),
        ({"extra": 1}, "extra: unknown field"),
    ],
)
def test_invalid_scenarios_name_the_field(doc: dict[str, Any], match: str) -> None:
    with pytest.raises(ScenarioError, match=match):
        parse_scenario(doc, "s.yaml")


def test_policy_flag_syntax() -> None:
    change = parse_policy_flag("restricted/pod@pool=numa")
    assert change.config == {"topologyManager": {"policy": "restricted", "scope": "pod"}}
    assert change.matches({"pool": "numa"}) and not change.matches({"pool": "other"})
    with pytest.raises(ScenarioError):
        parse_policy_flag("strict")


def test_node_model_from_nrt_without_memory_rows_uses_no_memory_policy() -> None:
    nrt = {
        "name": "n",
        "attributes": [{"name": "topologyManagerPolicy", "value": "restricted"}],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "costs": [
                    {"name": "node-0", "value": 10 if i == 0 else 20},
                    {"name": "node-1", "value": 20 if i == 0 else 10},
                ],
                "resources": [{"name": "cpu", "capacity": "4", "allocatable": "3", "available": "3"}],
            }
            for i in (0, 1)
        ],
    }
    model = model_node({"name": "n", "allocatable": {"cpu": "6"}}, nrt)
    config = model.config()
    assert (config.topology_policy, config.memory_policy, config.reserved_cpus) == (
        "restricted",
        "None",
        config.reserved_cpus,
    )
    assert config.reserved_cpus is not None and config.reserved_cpus.format() == "0,4"
    assert model.topology.numa_by_id[1].distances == {0: 20, 1: 10}
    assert check_model(model) == []


async def test_in_memory_store_streams_the_same_capture() -> None:
    store = InMemoryKube()
    bound = await _fill(store, 3, 5, 2)
    out = io.StringIO()
    summary = await capture(store, SnapshotWriter(out, {}), page_size=2)
    assert (summary["boundPods"], summary["pendingPods"], summary["nodes"]) == (bound, 2, 3)


async def test_snapshot_and_simulate_from_commands(fake_apiserver: FakeApiServer, tmp_path: Path) -> None:
    await _fill(fake_apiserver.store, 3, 6, 2)
    path = tmp_path / "cluster.yaml"
    snap = await asyncio.create_subprocess_exec(
        *CLI, "snapshot", "--server", fake_apiserver.url, "-o", str(path), "--page-size", "4", stderr=PIPE
    )
    _, err = await snap.communicate()
    assert snap.returncode == 0, err.decode()
    assert "3 nodes, 3 NRTs" in err.decode()
    sim = await asyncio.create_subprocess_exec(
        *CLI,
        "simulate",
        "--from",
        str(path),
        "--set-policy",
        "single-numa-node",
        "-o",
        "table",
        stdout=PIPE,
        stderr=PIPE,
    )
    out, err = await sim.communicate()
    assert sim.returncode == 0, err.decode()
    text = out.decode()
    assert "matches the NRT objects" in text and "Per-zone headroom" in text and "What changes" in text
    bad = await asyncio.create_subprocess_exec(*CLI, "simulate", "--from", str(tmp_path / "none.yaml"), stderr=PIPE)
    _, err = await bad.communicate()
    assert bad.returncode == 2 and "cannot read" in err.decode()


def test_an_unusable_nrt_is_noted_and_the_node_modelled_from_capacity() -> None:
    node = {"name": "odd", "capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8"}}
    nrt = {"name": "odd", "zones": [{"name": "socket-0", "type": "Socket", "resources": []}]}
    cluster = load_cluster(Snapshot(nodes=[node], nrts=[nrt]))
    (model,) = cluster.nodes
    assert model.source == "capacity" and model.topology.num_cpus == 8
    assert "NRT not usable" in cluster.model_notes["odd"][0]


def test_nfd_multithreading_label_pairs_cpus_into_cores() -> None:
    topology = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)
    manager = ResourceManager(topology, parse_config({"cpuManager": {"policy": "static", "reservedCPUCount": 2}}))
    nrt = reduce_nrt(node_nrt(manager, "smt").to_dict())
    labels = {"feature.node.kubernetes.io/cpu-hardware_multithreading": "true"}
    model = model_node({"name": "smt", "labels": labels, "allocatable": {"cpu": "14"}}, nrt)
    assert (model.topology.num_cpus, model.topology.threads_per_core) == (16, 2)
    assert check_model(model) == []
    plain = model_node({"name": "smt", "allocatable": {"cpu": "14"}}, nrt)
    assert plain.topology.threads_per_core == 1

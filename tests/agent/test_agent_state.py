"""The agent's state machine: what NRI carries → admission → cpusets; release; shared pool; Synchronize; snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import capture_request
from state_helpers import container, guaranteed, sandbox

from numaplane.agent.containers import (
    cpu_limit_milli,
    cpu_request_milli,
    derive,
    hugepage_resource,
    qos_from_cgroup_parent,
)
from numaplane.agent.errors import AdmissionRejected, CheckpointCorrupted
from numaplane.agent.state import NodeAgentState
from numaplane.nri.proto import api_pb2
from numaplane.nri.translate import container_from_pb, sandbox_from_pb
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import parse_pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import synthetic

# 2 NUMA nodes x 4 cores x 2 threads: node 0 = 0-3,8-11, node 1 = 4-7,12-15
TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)
CONFIG = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}}


def make_state(config: dict[str, object] | None = None) -> NodeAgentState:
    return NodeAgentState(ResourceManager(TOPOLOGY, CONFIG if config is None else config))


# -- what NRI carries ---------------------------------------------------------------------------------


def test_the_real_capture_derives_the_kubelets_pods(shared_dir: Path) -> None:
    gu = api_pb2.CreateContainerRequest.FromString(
        capture_request(shared_dir, "21-c1-s19-CreateContainer-request-gu-ncc-true.bin").payload
    )
    be = api_pb2.CreateContainerRequest.FromString(
        capture_request(shared_dir, "27-c1-s25-CreateContainer-request-be-ncc-true.bin").payload
    )
    g = derive(sandbox_from_pb(gu.pod), container_from_pb(gu.container))
    assert (g.qos, g.pod_name, g.namespace, g.name) == ("Guaranteed", "gu-ncc-true", "numaplane-wire", "main")
    assert g.key == "6d5ca923-dd9d-4d30-8e79-38cfc2199e49/main"
    spec = g.pod.containers[0]
    assert spec.requests["cpu"].milli_value() == 1000 and spec.limits["cpu"].milli_value() == 1000
    assert spec.requests["memory"].value() == 64 << 20
    assert g.needs_manager and g.cpus == "1"
    b = derive(sandbox_from_pb(be.pod), container_from_pb(be.container))
    assert (b.qos, b.needs_manager, b.pod.containers[0].requests) == ("BestEffort", False, {})


@pytest.mark.parametrize(
    ("parent", "qos"),
    [
        ("/kubepods/pod1", "Guaranteed"),
        ("/kubepods/burstable/pod1", "Burstable"),
        ("/kubepods/besteffort/pod1", "BestEffort"),
        ("kubepods-pod1.slice", "Guaranteed"),
        ("kubepods-burstable-pod1.slice", "Burstable"),
        ("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice", "BestEffort"),
        ("/kubepods.slice/kubepods-pod1.slice", "Guaranteed"),
        ("/some/other/pod1", None),
    ],
)
def test_qos_from_the_cgroup_parent(parent: str, qos: str | None) -> None:
    assert qos_from_cgroup_parent(parent) == qos


def test_cpu_request_from_shares_inverts_the_kubelet_encoding_exactly() -> None:
    for milli in range(3, 200_000):
        assert cpu_request_milli(max(2, milli * 1024 // 1000)) == milli
    assert cpu_request_milli(2) == 0 and cpu_request_milli(None) == 0
    assert cpu_limit_milli(150_000, 100_000) == 1500
    assert cpu_limit_milli(-1, 100_000) is None and cpu_limit_milli(None, None) is None
    assert (hugepage_resource("2MB"), hugepage_resource("1GB"), hugepage_resource("bogus")) == (
        "hugepages-2Mi",
        "hugepages-1Gi",
        None,
    )


def test_burstable_and_hugepages_are_derived_and_an_annotation_grants_nothing() -> None:
    pod = sandbox("b", qos="Burstable")
    c = container(pod, cpu_milli=1500, cpu_limit_milli=3000, memory=1 << 30, hugepages={"2MB": 4 << 20, "1GB": 0})
    info = derive(pod, c)
    spec = info.pod.containers[0]
    assert info.qos == "Burstable" and not info.needs_manager
    assert spec.requests["cpu"].milli_value() == 1500 and spec.limits["cpu"].milli_value() == 3000
    assert spec.requests["hugepages-2Mi"].value() == 4 << 20 and "hugepages-1Gi" not in spec.requests
    assert info.extra_resources == {}
    claim = sandbox("b", qos="Burstable", annotations={"resources.numaplane.io/main": '{"example.com/widget": 2}'})
    with pytest.raises(AdmissionRejected) as refused:
        derive(claim, c)  # without the pod spec the claim cannot be checked (test_agent_annotations.py)
    assert refused.value.reason == "UnverifiedResources"
    bad = sandbox("x", annotations={"resources.numaplane.io/main": "{not json"})
    with pytest.raises(AdmissionRejected) as exc:
        derive(bad, container(bad))
    assert exc.value.reason == "InvalidContainer"


def test_the_api_pod_wins_over_what_nri_carries() -> None:
    pod = sandbox("api", qos="Burstable")
    api = parse_pod(
        {
            "metadata": {"uid": "uid-api", "name": "api", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "resources": {
                            "requests": {"cpu": "2", "memory": "1Gi"},
                            "limits": {"cpu": "2", "memory": "1Gi", "vendor.com/fpga": "1"},
                        },
                    }
                ]
            },
        }
    )
    info = derive(pod, container(pod, cpu_milli=100), api)
    assert info.source == "api" and info.qos == "Guaranteed"
    assert info.pod.containers[0].requests["cpu"].value() == 2
    assert info.extra_resources == {"vendor.com/fpga": 1}


# -- admission and the shared pool --------------------------------------------------------------------


def test_exclusive_and_shared_cpusets_and_pool_updates() -> None:
    node_state = make_state()
    be_pod = sandbox("be", qos="BestEffort")
    be = node_state.create(be_pod, container(be_pod))
    assert not be.exclusive and be.cpus == CPUSet.parse("0-15") and be.updates == ()
    g_pod = sandbox("g")
    g = node_state.create(g_pod, guaranteed(g_pod, n=2))
    assert g.exclusive and g.cpus == CPUSet.parse("1,9")
    # the running shared container is told the smaller pool in the same answer
    assert [(u.container_id, u.cpus.format()) for u in g.updates] == [("ctr-be-main", "0,2-8,10-15")]
    assert node_state.check() == []
    # fractional Guaranteed and Burstable containers share the pool
    f_pod = sandbox("f")
    f = node_state.create(f_pod, container(f_pod, cpu_milli=500, cpu_limit_milli=500, memory=1 << 20))
    assert not f.exclusive and f.cpus == CPUSet.parse("0,2-8,10-15") and f.updates == ()
    # a stopped container keeps its CPUs (it may restart); removing it grows the pool for both shared containers
    assert node_state.stop("ctr-g-main") == [] and node_state.records["ctr-g-main"].stopped
    updates = node_state.remove_container("ctr-g-main")
    assert sorted((u.container_id, u.cpus.format()) for u in updates) == [
        ("ctr-be-main", "0-15"),
        ("ctr-f-main", "0-15"),
    ]
    assert node_state.remove_container("ctr-g-main") == [] and node_state.check() == []


def test_an_unalignable_container_is_rejected_with_the_typed_reason() -> None:
    node_state = make_state()
    pod = sandbox("big")
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(pod, guaranteed(pod, n=9))  # more than one NUMA node holds
    assert exc.value.reason == "TopologyAffinityError"
    assert "TopologyAffinityError" in str(exc.value) and "default/big" in str(exc.value)
    assert node_state.records == {} and node_state.manager.pods == {} and node_state.check() == []
    bad = sandbox("pref", annotations={"numaplane.io/cpu-strategy": "fastest"})
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(bad, container(bad))
    assert exc.value.reason == "InvalidPreference"


def test_create_is_idempotent_and_a_recreated_container_inherits_the_allocation() -> None:
    node_state = make_state()
    pod = sandbox("g")
    first = node_state.create(pod, guaranteed(pod, n=2))
    assert node_state.create(pod, guaranteed(pod, n=2)) == first.__class__(first.cpus, first.mems, True)
    # crash-restart: a new container id under the same pod and name, no StopContainer in between
    again = node_state.create(pod, guaranteed(pod, n=2, cid="ctr-g-main-2"))
    assert again.cpus == first.cpus and set(node_state.records) == {"ctr-g-main-2"}
    assert node_state.remove_container("ctr-g-main") == [] and node_state.check() == []
    node_state.remove_pod("sb-g")
    assert node_state.records == {} and node_state.manager.pods == {}


def test_memory_pinning_gives_memory_nodes() -> None:
    config = {
        "topologyManager": {"policy": "single-numa-node"},
        "cpuManager": {"reservedCPUs": "0"},
        "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
    }
    node_state = make_state(config)
    pod = sandbox("m")
    decision = node_state.create(pod, guaranteed(pod, n=4))
    assert decision.mems == CPUSet([0]) and decision.cpus.is_subset_of(TOPOLOGY.cpus_by_numa[0])
    _, pods = node_state.pod_resources()
    (listed,) = pods
    assert listed.containers[0].memory[0].numa_nodes == (0,)


# -- Synchronize ----------------------------------------------------------------------------------------


def test_synchronize_adopts_drops_and_repins() -> None:
    node_state = make_state()
    a = sandbox("a")
    node_state.create(a, guaranteed(a, n=2))
    gone = sandbox("gone")
    node_state.create(gone, guaranteed(gone, n=2))
    be = sandbox("be", qos="BestEffort")
    b = sandbox("b")
    running = [
        guaranteed(a, n=2, cpus="1,9", state=api_pb2.CONTAINER_RUNNING),
        container(be, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),  # created while we were away
        guaranteed(b, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING),  # unpinned, created while away
    ]  # gone's container was removed while the agent was away
    result = node_state.synchronize([a, be, b, gone], running)
    assert set(result.adopted) == {"ctr-be-main", "ctr-b-main"} and result.dropped == ("ctr-gone-main",)
    assert result.failed == ()
    by_id = {u.container_id: u.cpus.format() for u in result.updates}
    assert "ctr-a-main" not in by_id  # already right
    assert by_id["ctr-b-main"] == "2,10"
    assert by_id["ctr-be-main"] == "0,3-8,11-15"
    assert node_state.check() == []
    assert not node_state.records["ctr-b-main"].adjusted


def test_synchronize_keeps_a_running_container_that_cannot_be_admitted_in_the_shared_pool() -> None:
    node_state = make_state()
    pods = [sandbox(f"g{i}") for i in range(8)]
    running = [guaranteed(p, n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING) for p in pods]
    result = node_state.synchronize(pods, running)
    # 15 allocatable CPUs (CPU 0 reserved): 7 pairs fit, the 8th cannot
    assert len(result.failed) == 1 and len(result.adopted) == 8
    failed_id = result.failed[0][0]
    assert node_state.records[failed_id].exclusive is None and node_state.records[failed_id].error
    assert node_state.check() == []
    updates = {u.container_id: u.cpus for u in result.updates}
    assert updates[failed_id] == node_state.shared_pool == CPUSet.parse("0,8")  # 8: no pair left on node 0


# -- snapshots ---------------------------------------------------------------------------------------------


def test_snapshot_restore_round_trip_and_inconsistent_state_is_refused() -> None:
    node_state = make_state()
    for name in ("a", "b"):
        pod = sandbox(name)
        node_state.create(pod, guaranteed(pod, n=2))
    be = sandbox("be", qos="BestEffort")
    node_state.create(be, container(be))
    snap = node_state.snapshot()
    other = make_state()
    other.restore(snap)
    assert other.snapshot() == snap and other.check() == []
    assert other.shared_pool == node_state.shared_pool
    broken = make_state()
    snap["containers"][1]["exclusive"] = snap["containers"][0]["exclusive"]
    with pytest.raises(CheckpointCorrupted):
        broken.restore(snap)


def test_pod_resources_lists_every_container() -> None:
    node_state = make_state()
    g = sandbox("g", namespace="ns")
    node_state.create(g, guaranteed(g, n=2))
    node_state.create(g, container(g, "side", cpu_milli=100, memory=1 << 20))
    be = sandbox("be", qos="BestEffort", namespace="ns")
    node_state.create(be, container(be))
    allocatable, pods = node_state.pod_resources()
    assert allocatable.cpu_ids == tuple(range(1, 16))
    assert [(p.name, [(c.name, c.cpu_ids) for c in p.containers]) for p in pods] == [
        ("g", [("main", (1, 9)), ("side", ())]),
        ("be", [("main", ())]),
    ]

"""ResourceManager: properties over random pod streams on random and real topologies."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.policy.cpu import ReservedCPUs, StaticPolicy
from numaplane.policy.errors import ReconfigureRejected
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_from_dict, topology_to_dict
from numaplane.topology.model import Topology, synthetic

FIXTURES = ["topoDualSocketHT", "topoDualSocketMultiNumaPerSocketHT", "topoQuadSocketFourWayHT"]


def _fixture(shared: Path, name: str) -> Topology:
    return topology_from_dict(json.loads((shared / "conformance" / "topologies" / f"{name}.json").read_text()))


def _pod(uid: str, cpu: str, memory: str = "1Gi", *, guaranteed: bool = True, annotations: Any = None) -> Pod:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if guaranteed:
        res["limits"] = {"cpu": cpu, "memory": memory}
    return parse_pod(
        {
            "metadata": {"name": uid, "uid": uid, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "resources": res}]},
        }
    )


def _init_and_app_pod(init: dict[str, str], app: dict[str, str], *, app_name: str = "app") -> Pod:
    """Guaranteed pod ``p``: one init container ``init`` then one app container, requests = limits."""
    return parse_pod(
        {
            "metadata": {"name": "p", "uid": "p"},
            "spec": {
                "initContainers": [{"name": "init", "resources": {"requests": init, "limits": init}}],
                "containers": [{"name": app_name, "resources": {"requests": app, "limits": app}}],
            },
        }
    )


topologies = st.builds(
    synthetic,
    sockets=st.integers(1, 2),
    numa_per_socket=st.integers(1, 2),
    cores_per_numa=st.integers(2, 6),
    threads_per_core=st.integers(1, 2),
)
ops = st.lists(
    st.tuples(st.sampled_from(["admit", "admit", "admit", "remove"]), st.integers(1, 6), st.booleans()),
    min_size=1,
    max_size=25,
)
policies = st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"])


def _holdings(rm: ResourceManager) -> Any:
    """What the node's pods hold (allocations and free pools), without reuse bookkeeping."""
    snap = rm.snapshot()["plugins"]
    return (
        rm.cpu.state.default,
        {uid: dict(c) for uid, c in rm.cpu.state.assignments.items()},
        snap["devices"].get("podDevices"),
        snap["memory"].get("machineState"),
        snap["memory"].get("entries"),
    )


def _exclusive_sets(rm: ResourceManager) -> list[CPUSet]:
    return [cpus for containers in rm.cpu.state.assignments.values() for cpus in containers.values()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=topologies, stream=ops, policy=policies, strict=st.booleans())
def test_invariants_over_random_streams(topology: Topology, stream: Any, policy: str, strict: bool) -> None:
    config = {
        "topologyManager": {"policy": policy},
        "cpuManager": {"reservedCPUCount": 1, "options": {"strict-cpu-reservation": "true" if strict else "false"}},
    }
    rm = ResourceManager(topology, config)
    reserved = rm.cpu.policy.reserved if rm.cpu.policy else CPUSet()
    empty = _holdings(rm)
    free_at_start = rm.cpu.state.default
    live: list[str] = []
    for i, (op, cpus, guaranteed) in enumerate(stream):
        if op == "remove" and live:
            rm.remove(live.pop(0))
        else:
            uid = f"p{i}"
            before = _holdings(rm)
            adm = rm.admit(_pod(uid, str(cpus), guaranteed=guaranteed))
            if adm.admitted:
                live.append(uid)
            else:
                assert _holdings(rm) == before, "a rejected pod must hold nothing"
        sets = _exclusive_sets(rm)
        union = 0
        for s in sets:
            assert union & s.mask == 0, "a CPU is in two exclusive allocations"
            union |= s.mask
            assert not (s & reserved), "reserved CPUs are never handed out exclusively"
        if strict:
            assert not (rm.shared_pool() & reserved), "strict reservation keeps reserved CPUs out of the shared pool"
        restored = ResourceManager(topology, config)
        restored.restore(json.loads(json.dumps(rm.snapshot())))
        assert restored.snapshot() == rm.snapshot()
    for uid in live:
        rm.remove(uid)
    assert rm.cpu.state.default == free_at_start, "removing every pod restores the free set exactly"
    assert _holdings(rm) == empty


@settings(max_examples=40, deadline=None)
@given(topology=topologies, stream=ops)
def test_reconfigure_never_changes_existing_allocations(topology: Topology, stream: Any) -> None:
    rm = ResourceManager(
        topology, {"topologyManager": {"policy": "best-effort"}, "cpuManager": {"reservedCPUCount": 1}}
    )
    for i, (_, cpus, guaranteed) in enumerate(stream):
        rm.admit(_pod(f"p{i}", str(cpus), guaranteed=guaranteed))
    before = {uid: a.to_dict() for uid, a in rm.admissions.items()}
    assignments = {uid: dict(c) for uid, c in rm.cpu.state.assignments.items()}
    new = {
        "topologyManager": {"policy": "single-numa-node", "scope": "pod"},
        "cpuManager": {"reservedCPUCount": 1, "options": {"full-pcpus-only": "true"}},
    }
    with contextlib.suppress(ReconfigureRejected):
        rm.reconfigure(new)
    assert {uid: a.to_dict() for uid, a in rm.admissions.items()} == before
    assert {uid: dict(c) for uid, c in rm.cpu.state.assignments.items()} == assignments


def test_reconfigure_rejects_a_reserved_cpu_that_is_held_and_keeps_the_old_config() -> None:
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
    rm = ResourceManager(topo, {"cpuManager": {"reservedCPUs": "0"}})
    adm = rm.admit(_pod("a", "2"))
    held = adm.containers[0].exclusive_cpus
    assert held is not None
    bad = {"cpuManager": {"reservedCPUs": CPUSet([0, held.first()]).format()}, "topologyManager": {"policy": "bogus"}}
    with pytest.raises(ReconfigureRejected) as info:
        rm.reconfigure(bad)
    assert len(info.value.problems) >= 1
    assert any("held exclusively" in p or "bogus" in p for p in info.value.problems)
    assert rm.config.reserved_cpus == CPUSet([0])


def test_reconfigure_applies_to_new_admissions_only() -> None:
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=1)
    rm = ResourceManager(topo, {"topologyManager": {"policy": "best-effort"}, "cpuManager": {"reservedCPUs": "0"}})
    assert rm.admit(_pod("big", "6")).admitted  # spans both NUMA nodes under best-effort
    rm.reconfigure({"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}})
    assert "big" in rm.admissions
    later = rm.admit(_pod("later", "2"))
    assert not later.admitted and later.reason == "TopologyAffinityError"


def test_manager_with_default_plugins_equals_the_policies_called_directly(shared_dir: Path) -> None:
    for name in FIXTURES:
        topo = _fixture(shared_dir, name)
        rm = ResourceManager(
            topo, {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUCount": 2}}
        )
        policy = StaticPolicy(topo, ReservedCPUs(count=2), {}, topology_manager_policy="single-numa-node")
        from numaplane.policy.topology_manager import TopologyManager

        tm = TopologyManager.from_topology(topo, "single-numa-node")
        state = policy.new_state()
        for i, cpus in enumerate([1, 2, 4, 3, 8, 2, 6, 1]):
            pod = _pod(f"p{i}", str(cpus), memory="1Gi")
            adm = rm.admit(pod)
            hint, ok = tm.merge([None, policy.hints(state, pod, pod.containers[0]), None])
            assert adm.admitted == ok, name
            if ok:
                direct = policy.allocate(state, pod, pod.containers[0], hint)
                assert adm.containers[0].exclusive_cpus == direct, (name, i)
        assert rm.cpu.state.default == state.default


def test_invalid_preference_rejects_with_a_clear_reason() -> None:
    topo = synthetic()
    rm = ResourceManager(topo, {"cpuManager": {"reservedCPUCount": 1}})
    adm = rm.admit(_pod("x", "2", annotations={"numaplane.io/cpu-strategy": "zigzag"}))
    assert not adm.admitted
    assert adm.reason == "InvalidPreference"
    assert "numaplane.io/cpu-strategy" in adm.message and "packed" in adm.message
    adm = rm.admit(_pod("y", "2", annotations={"numaplane.io/unknown": "1"}))
    assert adm.reason == "InvalidPreference"


def test_pod_preference_selects_a_stricter_policy_for_one_pod() -> None:
    topo = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=4, threads_per_core=1)
    rm = ResourceManager(topo, {"topologyManager": {"policy": "best-effort"}, "cpuManager": {"reservedCPUs": "0"}})
    strict = rm.admit(_pod("s", "6", annotations={"numaplane.io/topology-policy": "single-numa-node"}))
    assert not strict.admitted and strict.reason == "TopologyAffinityError"
    assert rm.admit(_pod("l", "6")).admitted
    relax = ResourceManager(topo, {"topologyManager": {"policy": "restricted"}})
    adm = relax.admit(_pod("r", "1", annotations={"numaplane.io/topology-policy": "best-effort"}))
    assert adm.reason == "InvalidPreference"


def test_spread_preference_takes_one_thread_per_core() -> None:
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
    rm = ResourceManager(topo, {"cpuManager": {"reservedCPUCount": 0}})
    packed = rm.admit(_pod("p", "2")).containers[0].exclusive_cpus
    assert packed is not None and len({topo.cpu_info[c].core for c in packed}) == 1
    spread = rm.admit(_pod("s", "2", annotations={"numaplane.io/cpu-strategy": "spread-cores"})).containers[0]
    assert spread.exclusive_cpus is not None
    assert len({topo.cpu_info[c].core for c in spread.exclusive_cpus}) == 2


def test_isolated_cpus_require_and_avoid() -> None:
    base = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=1)
    from dataclasses import replace

    topo = replace(base, isolated_cpus=CPUSet.parse("2-3"))
    rm = ResourceManager(topo, {"cpuManager": {"reservedCPUCount": 0}})
    req = rm.admit(_pod("r", "2", annotations={"numaplane.io/isolated-cpus": "require"})).containers[0]
    assert req.exclusive_cpus == CPUSet.parse("2-3")
    none_left = rm.admit(_pod("r2", "1", annotations={"numaplane.io/isolated-cpus": "require"}))
    assert not none_left.admitted
    avoid = rm.admit(_pod("a", "2", annotations={"numaplane.io/isolated-cpus": "avoid"})).containers[0]
    assert avoid.exclusive_cpus == CPUSet.parse("0-1")


def test_remove_container_releases_a_finished_init_container_and_updates_the_record() -> None:
    topo = synthetic(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=2)
    rm = ResourceManager(topo, {"cpuManager": {"reservedCPUCount": 0}})
    res_init = {"cpu": "4", "memory": "1Gi"}
    res_app = {"cpu": "2", "memory": "1Gi"}
    pod = _init_and_app_pod(res_init, res_app)
    adm = rm.admit(pod)
    init_cpus, app_cpus = (c.exclusive_cpus for c in adm.containers)
    assert init_cpus is not None and app_cpus is not None and app_cpus <= init_cpus  # kubelet reuse
    rm.remove_container("p", "init")
    assert [c.name for c in rm.admissions["p"].containers] == ["app"]
    assert rm.cpu.state.assigned() == app_cpus
    restored = ResourceManager(topo, {"cpuManager": {"reservedCPUCount": 0}})
    restored.restore(json.loads(json.dumps(rm.snapshot())))
    assert restored.snapshot() == rm.snapshot()


def test_creating_a_later_container_releases_the_finished_init_containers_memory_as_the_kubelet() -> None:
    """The kubelet's memory manager ``AddContainer``: when a container is created, every earlier regular
    init container has completed and its memory goes (here 512Mi the app container did not reuse;
    a sidecar's stays; CPUs stay, as the CPU manager keeps them until the pod goes)."""
    topo = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=1)
    config = {
        "cpuManager": {"reservedCPUs": "0"},
        "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "100Mi"}}]},
        "topologyManager": {"policy": "single-numa-node"},
    }
    rm = ResourceManager(topo, config)

    def res(cpu: str, memory: str) -> dict[str, Any]:
        return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}

    pod = parse_pod(
        {
            "metadata": {"name": "p", "uid": "p"},
            "spec": {
                "initContainers": [
                    {"name": "init", "resources": res("1", "1Gi")},
                    {"name": "side", "restartPolicy": "Always", "resources": res("1", "64Mi")},
                ],
                "containers": [{"name": "app", "resources": res("1", "512Mi")}],
            },
        }
    )
    assert rm.admit(pod).admitted
    held = [b.size for b in rm.memory.policy.blocks("p", "init") or []]
    assert len(held) == 1 and 0 < held[0] < 1 << 30  # what later containers reused was moved to them
    free_before = rm.memory.policy.allocatable()
    assert rm.release_finished_init_memory("p", "init") == ()  # an init container being created: nothing done
    assert rm.release_finished_init_memory("p", "app") == ("init",)
    assert rm.memory.policy.blocks("p", "init") is None and rm.memory.policy.blocks("p", "side") is not None
    assert rm.cpu.state.to_dict()["entries"]["p"].keys() == {"init", "side", "app"}  # CPUs stay
    admission = {c.name: c for c in rm.admissions["p"].containers}
    assert [a.plugin for a in admission["init"].allocations if a.memory] == []
    assert rm.memory.policy.allocatable() == free_before  # allocatable is capacity: unchanged
    assert rm.release_finished_init_memory("p", "app") == ()  # idempotent
    restored = ResourceManager(topo, config)
    restored.restore(json.loads(json.dumps(rm.snapshot())))
    assert restored.snapshot() == rm.snapshot()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=topologies, stream=ops, policy=policies)
def test_managers_sharing_a_topology_share_the_static_policy_but_not_state(
    topology: Topology, stream: Any, policy: str
) -> None:
    """Nodes built from one topology object share one StaticPolicy (it keeps no per-node state):
    interleaved admissions on two such nodes equal those on nodes built from separate copies."""
    config = {"topologyManager": {"policy": policy}, "cpuManager": {"reservedCPUCount": 1}}
    shared = [ResourceManager(topology, config) for _ in range(2)]
    assert shared[0].cpu.policy is shared[1].cpu.policy
    alone = [ResourceManager(topology_from_dict(topology_to_dict(topology)), config) for _ in range(2)]
    assert alone[0].cpu.policy is not alone[1].cpu.policy
    for i, (op, cpus, guaranteed) in enumerate(stream):
        for rm in (shared[i % 2], alone[i % 2]):  # the same operation on the same node of each pair
            if op == "remove" and rm.pods:
                rm.remove(next(iter(rm.pods)))
            else:
                rm.admit(_pod(f"p{i}", str(cpus), guaranteed=guaranteed))
    for a, b in zip(shared, alone, strict=True):
        assert a.snapshot() == b.snapshot()


@pytest.mark.parametrize("part", ["pod", "plugin", "admission", "version", "config"])
def test_a_snapshot_that_cannot_be_restored_changes_nothing(part: str) -> None:
    from numaplane.resources.errors import PodSpecError

    topo = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=2)
    rm = ResourceManager(topo, {"cpuManager": {"reservedCPUs": "0"}})
    rm.admit(_pod("a", "2"))
    before = rm.snapshot()
    other = ResourceManager(topo, {"cpuManager": {"reservedCPUs": "0,1"}})
    other.admit(_pod("b", "3"))
    doc = json.loads(json.dumps(other.snapshot()))
    if part == "pod":  # a pod the API server would have refused: the last thing restored
        doc["pods"]["b"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-3"
    elif part == "plugin":
        doc["plugins"]["cpu"] = {"policyName": "static", "defaultCpuSet": "0-3,x"}
    elif part == "admission":
        doc["admissions"]["b"]["containers"] = [{"hint": None}]
    elif part == "version":
        doc["version"] = 999
    else:
        doc["config"] = {"topologyManager": {"policy": "bogus"}}
    with pytest.raises(Exception) as info:
        rm.restore(doc)
    if part == "pod":
        assert isinstance(info.value, PodSpecError)
    assert rm.snapshot() == before
    assert rm.admit(_pod("c", "2")).admitted  # still usable


def test_a_refused_pod_admitted_again_frees_no_memory_it_does_not_hold() -> None:
    """A pod whose init container got memory and whose app container is then refused (full-pcpus-only, an
    odd CPU count on 2-thread cores) leaves the machine as it was, however often it is admitted again:
    the agent admits a pod at RunPodSandbox and again at CreateContainer. Before, the second refusal
    released the init container's 512 MiB that the retry had not charged (its reusable memory from the
    first try): memory freed that nobody held, seen by the agent differential on intel-hybrid."""
    topo = synthetic(sockets=1, cores_per_numa=4, threads_per_core=2)
    rm = ResourceManager(
        topo,
        {
            "cpuManager": {"reservedCPUs": "0", "options": {"full-pcpus-only": "true"}},
            "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "100Mi"}}]},
        },
    )

    def machine() -> Any:
        return rm.snapshot()["plugins"]["memory"]["machineState"]

    assert rm.admit(_pod("q", "2", "512Mi")).admitted  # memory held: a release of more shows
    before = machine()
    assert before["0"]["memoryMap"]["memory"]["reserved"] == 512 << 20
    amounts = {"cpu": "2", "memory": "512Mi"}
    odd = {"cpu": "3", "memory": "512Mi"}
    pod = _init_and_app_pod(amounts, odd, app_name="c")
    for _ in range(3):
        admission = rm.admit(pod)
        assert (admission.admitted, admission.reason, admission.container) == (False, "SMTAlignmentError", "c")
        assert machine() == before
    rm.remove("p")
    assert machine() == before
    assert rm.admit(_pod("r", "2", "512Mi")).admitted
    assert machine()["0"]["memoryMap"]["memory"]["reserved"] == 1024 << 20

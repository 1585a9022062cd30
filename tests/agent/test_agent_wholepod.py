"""Whole-pod admission: with the Pod known, the agent admits it once, exactly as the kubelet does.

Init containers' CPUs reused by later containers, the topology manager's ``pod`` scope, sidecars,
release per container and per pod, Synchronize adoption, checkpoint round trips; and, without the Pod,
what the one-container-at-a-time fallback cannot do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from state_helpers import container, guaranteed, sandbox

from numaplane.agent.errors import AdmissionRejected, CheckpointCorrupted
from numaplane.agent.state import NodeAgentState
from numaplane.nri.proto import api_pb2
from numaplane.policy.manager import ResourceManager
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import synthetic

# 2 NUMA nodes x 4 cores x 2 threads: node 0 = 0-3,8-11, node 1 = 4-7,12-15
TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)
NODE0, NODE1 = TOPOLOGY.cpus_by_numa[0], TOPOLOGY.cpus_by_numa[1]
CONFIG: dict[str, Any] = {"topologyManager": {"policy": "single-numa-node"}, "cpuManager": {"reservedCPUs": "0"}}
POD_SCOPE: dict[str, Any] = {
    "topologyManager": {"policy": "single-numa-node", "scope": "pod"},
    "cpuManager": {"reservedCPUs": "0"},
}


def spec(name: str, cpus: int, *, restart: str | None = None) -> dict[str, Any]:
    q = {"cpu": str(cpus), "memory": "64Mi"}
    doc: dict[str, Any] = {"name": name, "image": "x", "resources": {"requests": q, "limits": q}}
    if restart is not None:
        doc["restartPolicy"] = restart
    return doc


def api_pod(name: str, containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> Pod:
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"nodeName": "node-a", "initContainers": init or [], "containers": containers},
        }
    )


class Pods:
    """A ``pod_lookup`` over a dict (the informer's role)."""

    def __init__(self, *pods: Pod) -> None:
        self.by_uid: dict[str, Pod] = {p.uid: p for p in pods}

    def __call__(self, uid: str) -> Pod | None:
        return self.by_uid.get(uid)


def make_state(lookup: Pods | None, config: Mapping[str, Any] = CONFIG) -> NodeAgentState:
    return NodeAgentState(ResourceManager(TOPOLOGY, dict(config)), pod_lookup=lookup)


def reuse_pod() -> Pod:
    """The kubelet's TestStaticPolicyReuseCPUs shape: an init container of 4 CPUs, an app container of 2."""
    return api_pod("reuse", [spec("app", 2)], init=[spec("init", 4)])


# -- init containers' CPUs --------------------------------------------------------------------------------


def test_the_app_container_reuses_the_init_containers_cpus() -> None:
    pod = reuse_pod()
    node_state = make_state(Pods(pod))
    sb = sandbox("reuse")
    init = node_state.create(sb, guaranteed(sb, "init", n=4))
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    assert init.exclusive and app.exclusive
    assert init.cpus.size() == 4 and app.cpus.size() == 2
    assert app.cpus.is_subset_of(init.cpus)  # reused, as the kubelet's static policy does
    # identical to the kubelet-exact manager admitting the same pod on an empty node
    reference = ResourceManager(TOPOLOGY, CONFIG)
    admitted = {c.name: c.exclusive_cpus for c in reference.admit(pod).containers}
    assert admitted == {"init": init.cpus, "app": app.cpus}
    # the pool lacks the init container's 4 CPUs only: nothing more is taken for the app container
    assert node_state.shared_pool == TOPOLOGY.all_cpus - init.cpus
    assert node_state.check() == []
    assert set(node_state.manager.pods) == {"uid-reuse"}  # one admission, of the real pod


def test_without_the_pod_each_container_is_admitted_alone_and_nothing_is_reused() -> None:
    """The documented limit of the fallback: a stopped init container keeps its CPUs (the runtime does
    not say it was an init container: it might restart), until the first creation of another container
    of its sandbox releases it; the app container is then allocated afresh, not from a reuse set."""
    node_state = make_state(None)
    be = sandbox("be", qos="BestEffort")
    node_state.create(be, container(be))
    sb = sandbox("reuse")
    init = node_state.create(sb, guaranteed(sb, "init", n=4))
    assert set(node_state.manager.pods) == {"uid-reuse/init"}
    assert node_state.stop("ctr-reuse-init") == []  # kept: a restart would get it again
    other = sandbox("other")
    taken = node_state.create(other, guaranteed(other, n=4))
    assert not taken.cpus & init.cpus
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    assert "ctr-reuse-init" not in node_state.records
    assert set(node_state.manager.pods) == {"uid-reuse/app", "uid-other/main"} and node_state.check() == []
    assert node_state.exclusive_cpus() == taken.cpus | app.cpus


def test_removing_a_finished_init_container_releases_only_what_is_not_reused() -> None:
    node_state = make_state(Pods(reuse_pod()))
    sb = sandbox("reuse")
    be = sandbox("be", qos="BestEffort")
    node_state.create(be, container(be))
    init_ctr = guaranteed(sb, "init", n=4)
    init = node_state.create(sb, init_ctr)
    # removing the init container before any later container was created releases nothing
    node_state.stop(init_ctr.id)
    assert node_state.remove_container(init_ctr.id, "uid-reuse", "init", "sb-reuse") == []
    again = node_state.create(sb, guaranteed(sb, "init", n=4, cid="ctr-reuse-init-2"))  # a retried init container
    assert again.cpus == init.cpus
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    pool_before = node_state.shared_pool
    updates = node_state.remove_container("ctr-reuse-init-2")
    released = init.cpus - app.cpus
    assert node_state.shared_pool == pool_before | released
    assert [(u.container_id, u.cpus) for u in updates] == [("ctr-be-main", node_state.shared_pool)]
    assert node_state.manager.cpu.state.get("uid-reuse", "init") is None
    assert node_state.records["ctr-reuse-app"].exclusive == app.cpus and node_state.check() == []
    # the whole pod goes with its sandbox
    node_state.remove_pod("sb-reuse", "uid-reuse")
    assert node_state.pods == {} and node_state.manager.pods == {} and node_state.shared_pool == TOPOLOGY.all_cpus
    assert node_state.check() == []


def test_creating_the_app_container_releases_the_finished_init_containers_memory_as_the_kubelet() -> None:
    """The kubelet's memory manager ``AddContainer``: the app container's creation means the init
    container completed, and its memory (what the app container did not reuse) goes at once, without
    waiting for its RemoveContainer; its CPUs stay with the pod (as the kubelet's CPU manager keeps
    them). Found by the real-kubelet differential on kvm-skylake-4cpu-2offline."""
    config = {
        **CONFIG,
        "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "100Mi"}}]},
    }

    def with_memory(name: str, cpus: int, memory: str) -> dict[str, Any]:
        doc = spec(name, cpus)
        doc["resources"] = {
            "requests": {"cpu": str(cpus), "memory": memory},
            "limits": {"cpu": str(cpus), "memory": memory},
        }
        return doc

    pod = api_pod("mem", [with_memory("app", 2, "256Mi")], init=[with_memory("init", 4, "1Gi")])
    node_state = make_state(Pods(pod), config)
    policy = node_state.manager.memory.policy
    assert policy is not None
    sb = sandbox("mem")
    init = node_state.create(sb, guaranteed(sb, "init", n=4))
    held = policy.blocks("uid-mem", "init")
    assert held is not None and [b.size for b in held] == [768 << 20]  # 1Gi less the app's reused 256Mi
    generation = node_state.generation
    node_state.create(sb, guaranteed(sb, "app", n=2))
    assert policy.blocks("uid-mem", "init") is None and policy.blocks("uid-mem", "app") is not None
    assert node_state.generation > generation  # the checkpoint is written again
    assert node_state.manager.cpu.state.get("uid-mem", "init") == init.cpus  # CPUs stay
    assert node_state.check() == []
    restored = make_state(Pods(pod), config)
    restored.restore(node_state.snapshot())
    assert restored.snapshot() == node_state.snapshot() and restored.check() == []


def test_a_sidecars_cpus_are_never_reused() -> None:
    pod = api_pod("side", [spec("app", 2)], init=[spec("proxy", 2, restart="Always"), spec("init", 2)])
    node_state = make_state(Pods(pod))
    sb = sandbox("side")
    proxy = node_state.create(sb, guaranteed(sb, "proxy", n=2))
    init = node_state.create(sb, guaranteed(sb, "init", n=2))
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    assert not proxy.cpus & init.cpus and not proxy.cpus & app.cpus
    assert app.cpus == init.cpus  # the regular init container's CPUs are reused
    # the sidecar is never "finished": removing an instance of it releases nothing
    node_state.stop("ctr-side-proxy")
    node_state.remove_container("ctr-side-proxy", "uid-side", "proxy", "sb-side")
    assert node_state.manager.cpu.state.get("uid-side", "proxy") == proxy.cpus
    assert node_state.create(sb, guaranteed(sb, "proxy", n=2, cid="ctr-side-proxy-2")).cpus == proxy.cpus
    assert node_state.check() == []
    _, listed = node_state.pod_resources()
    assert [(p.name, [(c.name, c.cpu_ids) for c in p.containers]) for p in listed] == [
        ("side", [("app", tuple(app.cpus)), ("proxy", tuple(proxy.cpus))])  # as the kubelet lists them
    ]


def test_a_pod_known_only_after_its_init_container_is_admitted_as_a_whole_at_the_app_container() -> None:
    """Informer lag: the init container was admitted alone; it has finished when the app container
    is created, so its own admission is released and the whole pod admitted."""
    lookup = Pods()
    node_state = make_state(lookup)
    sb = sandbox("reuse")
    node_state.create(sb, guaranteed(sb, "init", n=4))
    assert set(node_state.manager.pods) == {"uid-reuse/init"}
    lookup.by_uid["uid-reuse"] = reuse_pod()
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    assert set(node_state.manager.pods) == {"uid-reuse"} and set(node_state.records) == {"ctr-reuse-app"}
    assert app.cpus.is_subset_of(node_state.manager.cpu.state.get("uid-reuse", "init") or CPUSet())
    assert node_state.check() == []


def test_a_live_container_admitted_alone_keeps_the_pod_one_at_a_time() -> None:
    pod = api_pod("two", [spec("a", 2), spec("b", 2)])
    lookup = Pods()
    node_state = make_state(lookup)
    sb = sandbox("two")
    node_state.create(sb, guaranteed(sb, "a", n=2))
    lookup.by_uid["uid-two"] = pod
    node_state.create(sb, guaranteed(sb, "b", n=2))
    assert set(node_state.manager.pods) == {"uid-two/a", "uid-two/b"} and node_state.pods == {}
    assert node_state.check() == []


# -- topology manager scope ---------------------------------------------------------------------------------


def test_pod_scope_puts_every_container_of_the_pod_on_one_numa_node() -> None:
    pod = api_pod("pair", [spec("a", 3), spec("b", 3)])
    for lookup, together in ((Pods(pod), True), (None, False)):
        node_state = make_state(lookup, POD_SCOPE)
        other = sandbox("other")
        node_state.create(other, guaranteed(other, n=2))  # node 0 keeps 5 free CPUs: not enough for 6
        sb = sandbox("pair")
        a = node_state.create(sb, guaranteed(sb, "a", n=3))
        b = node_state.create(sb, guaranteed(sb, "b", n=3))
        if together:
            assert (a.cpus | b.cpus).is_subset_of(NODE1)
        else:  # one container at a time, "pod" scope sees one container: the pod is split
            assert a.cpus.is_subset_of(NODE0) and b.cpus.is_subset_of(NODE1)
        assert node_state.check() == []


def test_a_pod_that_cannot_be_aligned_is_rejected_at_its_first_container_and_holds_nothing() -> None:
    pod = api_pod("big", [spec("a", 5), spec("b", 5)])
    node_state = make_state(Pods(pod), POD_SCOPE)
    sb = sandbox("big")
    started = node_state.run_pod(sb)
    assert started.rejection is not None and started.rejection.reason == "TopologyAffinityError"
    assert not started.admitted and node_state.manager.pods == {}
    with pytest.raises(AdmissionRejected) as exc:
        node_state.create(sb, guaranteed(sb, "a", n=5))
    assert exc.value.reason == "TopologyAffinityError" and "default/big" in str(exc.value)
    assert (
        node_state.records == {}
        and node_state.pods == {}
        and node_state.manager.pods == {}
        and node_state.check() == []
    )


def test_run_pod_sandbox_admits_the_pod_before_its_containers() -> None:
    node_state = make_state(Pods(reuse_pod()))
    be = sandbox("be", qos="BestEffort")
    node_state.create(be, container(be))
    sb = sandbox("reuse")
    started = node_state.run_pod(sb)
    assert started.admitted and [u.container_id for u in started.updates] == ["ctr-be-main"]
    held = node_state.manager.cpu.state.get("uid-reuse", "init")
    assert held is not None and started.updates[0].cpus == node_state.shared_pool and not held & node_state.shared_pool
    assert node_state.run_pod(sb) == type(started)()  # once
    assert node_state.create(sb, guaranteed(sb, "init", n=4)).cpus == held
    _, listed = node_state.pod_resources()
    assert [(p.name, [c.name for c in p.containers]) for p in listed] == [("be", ["main"]), ("reuse", ["app"])]
    assert node_state.check() == []


def test_pods_with_pod_level_resources_stay_shared_as_on_the_kubelet() -> None:
    doc = {
        "metadata": {"name": "plr", "namespace": "default", "uid": "uid-plr"},
        "spec": {
            "resources": {"requests": {"cpu": "2", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "128Mi"}},
            "containers": [{"name": "main", "image": "x"}],
        },
    }
    node_state = make_state(Pods(parse_pod(doc)))
    sb = sandbox("plr")
    decision = node_state.create(sb, guaranteed(sb, n=2))
    assert not decision.exclusive and decision.cpus == node_state.shared_pool == TOPOLOGY.all_cpus
    assert node_state.records["ctr-plr-main"].whole_pod and node_state.check() == []


# -- restarts, stops, sandboxes --------------------------------------------------------------------------


def test_a_restarted_container_gets_its_allocation_again_and_the_sandbox_releases_it() -> None:
    pod = api_pod("g", [spec("main", 2)])
    node_state = make_state(Pods(pod))
    sb = sandbox("g")
    first = node_state.create(sb, guaranteed(sb, n=2))
    node_state.stop("ctr-g-main")  # the container stopped (e.g. crashed): its pod keeps the CPUs
    assert node_state.records == {} and node_state.manager.cpu.state.get("uid-g", "main") == first.cpus
    assert node_state.create(sb, guaranteed(sb, n=2, cid="ctr-g-main-2")).cpus == first.cpus
    node_state.remove_container("ctr-g-main", "uid-g", "main", "sb-g")  # the old instance goes: nothing changes
    assert node_state.records["ctr-g-main-2"].exclusive == first.cpus and node_state.check() == []
    # a new sandbox of the same pod (the agent missed the old one's stop): the pod's containers all
    # start again, admitted anew; the old container, if it still ran, would share the pool
    sb2 = replace(sandbox("g"), id="sb-g-2")
    node_state.create(sb2, guaranteed(sb2, n=2, cid="ctr-g-main-3"))
    assert node_state.pods["uid-g"].sandbox_id == "sb-g-2" and node_state.records["ctr-g-main-3"].whole_pod
    old = node_state.records["ctr-g-main-2"]
    assert old.exclusive is None and not old.managed and old.error.startswith("PodSandboxReplaced")
    assert node_state.check() == []
    node_state.remove_pod("sb-g", "uid-g")  # the old sandbox's removal leaves the new one alone
    assert set(node_state.records) == {"ctr-g-main-3"} and node_state.check() == []
    node_state.remove_pod("sb-g-2", "uid-g")
    assert node_state.records == {} and node_state.manager.pods == {} and node_state.shared_pool == TOPOLOGY.all_cpus


def test_snapshot_restore_keeps_whole_pods() -> None:
    lookup = Pods(reuse_pod())
    node_state = make_state(lookup)
    sb = sandbox("reuse")
    init = node_state.create(sb, guaranteed(sb, "init", n=4))
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    snap = node_state.snapshot()
    assert snap["pods"] == [{"uid": "uid-reuse", "sandbox": "sb-reuse", "progress": 1}]
    other = make_state(lookup)
    other.restore(snap)
    assert other.snapshot() == snap and other.check() == []
    # after the restart the init container's removal still releases what the app does not reuse
    other.remove_container("ctr-reuse-init")
    assert other.manager.cpu.state.get("uid-reuse", "init") is None
    assert other.shared_pool == node_state.shared_pool | (init.cpus - app.cpus)
    # an entry whose pod the manager does not hold, or a record outside its pod, is refused
    for broken in ({**snap, "pods": [{"uid": "uid-nope", "sandbox": "x"}]}, {**snap, "pods": []}):
        with pytest.raises(CheckpointCorrupted):
            make_state(lookup).restore(broken)


def test_synchronize_adopts_a_running_pod_as_a_whole() -> None:
    """A lost checkpoint: the app container runs, its finished init container is still listed
    (stopped) or already removed; the pod is admitted as a whole, the app reuses the init's CPUs."""
    for init_listed in (True, False):
        node_state = make_state(Pods(reuse_pod()))
        sb = sandbox("reuse")
        listed = [guaranteed(sb, "app", n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)]
        if init_listed:
            listed.append(guaranteed(sb, "init", n=4, cpus="0-15", state=api_pb2.CONTAINER_STOPPED))
        result = node_state.synchronize([sb], listed)
        assert result.adopted == ("ctr-reuse-app",) and result.failed == ()
        state = node_state.manager.cpu.state
        app = state.get("uid-reuse", "app")
        assert app is not None and node_state.records["ctr-reuse-app"].exclusive == app
        assert [(u.container_id, u.cpus) for u in result.updates] == [("ctr-reuse-app", app)]
        init = state.get("uid-reuse", "init")
        if init_listed:  # held until its RemoveContainer, as at creation
            assert init is not None and app.is_subset_of(init)
        else:  # removed while the agent was away: released now
            assert init is None and "init" in node_state.pods["uid-reuse"].released
        assert node_state.check() == []
        # the sandbox is gone at the next Synchronize: the pod is released
        node_state.synchronize([], [])
        assert node_state.pods == {} and node_state.manager.pods == {} and node_state.check() == []


def test_synchronize_keeps_a_known_whole_pod_in_place() -> None:
    node_state = make_state(Pods(reuse_pod()))
    sb = sandbox("reuse")
    node_state.create(sb, guaranteed(sb, "init", n=4))
    app = node_state.create(sb, guaranteed(sb, "app", n=2))
    running = [
        guaranteed(sb, "init", n=4, state=api_pb2.CONTAINER_STOPPED),
        guaranteed(sb, "app", n=2, cpus=app.cpus.format(), state=api_pb2.CONTAINER_RUNNING),
    ]
    before = node_state.manager.snapshot()
    result = node_state.synchronize([sb], running)
    assert result.updates == () and result.adopted == () and result.dropped == ("ctr-reuse-init",)
    assert node_state.manager.snapshot() == before and node_state.check() == []


def test_synchronize_with_two_sandboxes_of_one_pod_never_holds_a_cpu_twice() -> None:
    """Robustness (a kubelet stops the old sandbox first): the newer sandbox's containers get the
    pod's admission; a container still running in the older one shares the pool, holding nothing."""
    node_state = make_state(Pods(api_pod("g", [spec("main", 2)])))
    old = sandbox("g")
    node_state.create(old, guaranteed(old, n=2))
    new = replace(sandbox("g"), id="sb-g-new")
    running = [
        guaranteed(old, n=2, cpus="1,9", state=api_pb2.CONTAINER_RUNNING),
        guaranteed(new, n=2, cid="ctr-g-main-new", cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
    ]
    result = node_state.synchronize([old, new], running)
    assert result.failed == () and result.adopted == ("ctr-g-main-new",)
    assert (
        node_state.pods["uid-g"].sandbox_id == "sb-g-new" and node_state.records["ctr-g-main-new"].exclusive is not None
    )
    assert node_state.records["ctr-g-main"].exclusive is None and node_state.check() == []
    updates = {u.container_id: u.cpus for u in result.updates}
    assert updates["ctr-g-main"] == node_state.shared_pool

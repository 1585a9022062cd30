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


def make_core(lookup: Pods | None, config: Mapping[str, Any] = CONFIG) -> NodeAgentState:
    return NodeAgentState(ResourceManager(TOPOLOGY, dict(config)), pod_lookup=lookup)


def reuse_pod() -> Pod:
    """The kubelet's TestStaticPolicyReuseCPUs shape: an init container of 4 CPUs, an app container of 2."""
    return api_pod("reuse", [spec("app", 2)], init=[spec("init", 4)])


# -- init containers' CPUs --------------------------------------------------------------------------------


def test_the_app_container_reuses_the_init_containers_cpus() -> None:
    pod = reuse_pod()
    core = make_core(Pods(pod))
    sb = sandbox("reuse")
    init = core.create(sb, guaranteed(sb, "init", n=4))
    app = core.create(sb, guaranteed(sb, "app", n=2))
    assert init.exclusive and app.exclusive
    assert init.cpus.size() == 4 and app.cpus.size() == 2
    assert app.cpus.is_subset_of(init.cpus)  # reused, as the kubelet's static policy does
    # identical to the kubelet-exact manager admitting the same pod on an empty node
    reference = ResourceManager(TOPOLOGY, CONFIG)
    admitted = {c.name: c.exclusive_cpus for c in reference.admit(pod).containers}
    assert admitted == {"init": init.cpus, "app": app.cpus}
    # the pool lacks the init container's 4 CPUs only: nothing more is taken for the app container
    assert core.shared_pool == TOPOLOGY.all_cpus - init.cpus
    assert core.check() == []
    assert set(core.manager.pods) == {"uid-reuse"}  # one admission, of the real pod


def test_without_the_pod_each_container_is_admitted_alone_and_nothing_is_reused() -> None:
    """The documented limit of the fallback: the init container's CPUs go back to the shared pool
    when it stops (containerd reports its exit with StopContainer), the shared containers are moved
    onto them, a pod created meanwhile may take them, and the app container is allocated afresh."""
    core = make_core(None)
    be = sandbox("be", qos="BestEffort")
    core.create(be, container(be))
    sb = sandbox("reuse")
    init = core.create(sb, guaranteed(sb, "init", n=4))
    assert set(core.manager.pods) == {"uid-reuse/init"}
    grown = core.stop("ctr-reuse-init")
    assert [(u.container_id, u.cpus) for u in grown] == [("ctr-be-main", TOPOLOGY.all_cpus)]
    other = sandbox("other")
    taken = core.create(other, guaranteed(other, n=4))
    app = core.create(sb, guaranteed(sb, "app", n=2))
    assert taken.cpus == init.cpus and not app.cpus & init.cpus
    assert set(core.manager.pods) == {"uid-reuse/app", "uid-other/main"} and core.check() == []


def test_removing_a_finished_init_container_releases_only_what_is_not_reused() -> None:
    core = make_core(Pods(reuse_pod()))
    sb = sandbox("reuse")
    be = sandbox("be", qos="BestEffort")
    core.create(be, container(be))
    init_ctr = guaranteed(sb, "init", n=4)
    init = core.create(sb, init_ctr)
    # removing the init container before any later container was created releases nothing
    core.stop(init_ctr.id)
    assert core.remove_container(init_ctr.id, "uid-reuse", "init", "sb-reuse") == []
    again = core.create(sb, guaranteed(sb, "init", n=4, cid="ctr-reuse-init-2"))  # a retried init container
    assert again.cpus == init.cpus
    app = core.create(sb, guaranteed(sb, "app", n=2))
    pool_before = core.shared_pool
    updates = core.remove_container("ctr-reuse-init-2")
    released = init.cpus - app.cpus
    assert core.shared_pool == pool_before | released
    assert [(u.container_id, u.cpus) for u in updates] == [("ctr-be-main", core.shared_pool)]
    assert core.manager.cpu.state.get("uid-reuse", "init") is None
    assert core.records["ctr-reuse-app"].exclusive == app.cpus and core.check() == []
    # the whole pod goes with its sandbox
    core.remove_pod("sb-reuse", "uid-reuse")
    assert core.pods == {} and core.manager.pods == {} and core.shared_pool == TOPOLOGY.all_cpus
    assert core.check() == []


def test_a_sidecars_cpus_are_never_reused() -> None:
    pod = api_pod("side", [spec("app", 2)], init=[spec("proxy", 2, restart="Always"), spec("init", 2)])
    core = make_core(Pods(pod))
    sb = sandbox("side")
    proxy = core.create(sb, guaranteed(sb, "proxy", n=2))
    init = core.create(sb, guaranteed(sb, "init", n=2))
    app = core.create(sb, guaranteed(sb, "app", n=2))
    assert not proxy.cpus & init.cpus and not proxy.cpus & app.cpus
    assert app.cpus == init.cpus  # the regular init container's CPUs are reused
    # the sidecar is never "finished": removing an instance of it releases nothing
    core.stop("ctr-side-proxy")
    core.remove_container("ctr-side-proxy", "uid-side", "proxy", "sb-side")
    assert core.manager.cpu.state.get("uid-side", "proxy") == proxy.cpus
    assert core.create(sb, guaranteed(sb, "proxy", n=2, cid="ctr-side-proxy-2")).cpus == proxy.cpus
    assert core.check() == []
    _, listed = core.pod_resources()
    assert [(p.name, [(c.name, c.cpu_ids) for c in p.containers]) for p in listed] == [
        ("side", [("app", tuple(app.cpus)), ("proxy", tuple(proxy.cpus))])  # as the kubelet lists them
    ]


def test_a_pod_known_only_after_its_init_container_is_admitted_as_a_whole_at_the_app_container() -> None:
    """Informer lag: the init container was admitted alone; it has finished when the app container
    is created, so its own admission is released and the whole pod admitted."""
    lookup = Pods()
    core = make_core(lookup)
    sb = sandbox("reuse")
    core.create(sb, guaranteed(sb, "init", n=4))
    assert set(core.manager.pods) == {"uid-reuse/init"}
    lookup.by_uid["uid-reuse"] = reuse_pod()
    app = core.create(sb, guaranteed(sb, "app", n=2))
    assert set(core.manager.pods) == {"uid-reuse"} and set(core.records) == {"ctr-reuse-app"}
    assert app.cpus.is_subset_of(core.manager.cpu.state.get("uid-reuse", "init") or CPUSet())
    assert core.check() == []


def test_a_live_container_admitted_alone_keeps_the_pod_one_at_a_time() -> None:
    pod = api_pod("two", [spec("a", 2), spec("b", 2)])
    lookup = Pods()
    core = make_core(lookup)
    sb = sandbox("two")
    core.create(sb, guaranteed(sb, "a", n=2))
    lookup.by_uid["uid-two"] = pod
    core.create(sb, guaranteed(sb, "b", n=2))
    assert set(core.manager.pods) == {"uid-two/a", "uid-two/b"} and core.pods == {}
    assert core.check() == []


# -- topology manager scope ---------------------------------------------------------------------------------


def test_pod_scope_puts_every_container_of_the_pod_on_one_numa_node() -> None:
    pod = api_pod("pair", [spec("a", 3), spec("b", 3)])
    for lookup, together in ((Pods(pod), True), (None, False)):
        core = make_core(lookup, POD_SCOPE)
        other = sandbox("other")
        core.create(other, guaranteed(other, n=2))  # node 0 keeps 5 free CPUs: not enough for 6
        sb = sandbox("pair")
        a = core.create(sb, guaranteed(sb, "a", n=3))
        b = core.create(sb, guaranteed(sb, "b", n=3))
        if together:
            assert (a.cpus | b.cpus).is_subset_of(NODE1)
        else:  # one container at a time, "pod" scope sees one container: the pod is split
            assert a.cpus.is_subset_of(NODE0) and b.cpus.is_subset_of(NODE1)
        assert core.check() == []


def test_a_pod_that_cannot_be_aligned_is_rejected_at_its_first_container_and_holds_nothing() -> None:
    pod = api_pod("big", [spec("a", 5), spec("b", 5)])
    core = make_core(Pods(pod), POD_SCOPE)
    sb = sandbox("big")
    started = core.run_pod(sb)
    assert started.rejection is not None and started.rejection.reason == "TopologyAffinityError"
    assert not started.admitted and core.manager.pods == {}
    with pytest.raises(AdmissionRejected) as exc:
        core.create(sb, guaranteed(sb, "a", n=5))
    assert exc.value.reason == "TopologyAffinityError" and "default/big" in str(exc.value)
    assert core.records == {} and core.pods == {} and core.manager.pods == {} and core.check() == []


def test_run_pod_sandbox_admits_the_pod_before_its_containers() -> None:
    core = make_core(Pods(reuse_pod()))
    be = sandbox("be", qos="BestEffort")
    core.create(be, container(be))
    sb = sandbox("reuse")
    started = core.run_pod(sb)
    assert started.admitted and [u.container_id for u in started.updates] == ["ctr-be-main"]
    held = core.manager.cpu.state.get("uid-reuse", "init")
    assert held is not None and started.updates[0].cpus == core.shared_pool and not held & core.shared_pool
    assert core.run_pod(sb) == type(started)()  # once
    assert core.create(sb, guaranteed(sb, "init", n=4)).cpus == held
    _, listed = core.pod_resources()
    assert [(p.name, [c.name for c in p.containers]) for p in listed] == [("be", ["main"]), ("reuse", ["app"])]
    assert core.check() == []


def test_pods_with_pod_level_resources_stay_shared_as_on_the_kubelet() -> None:
    doc = {
        "metadata": {"name": "plr", "namespace": "default", "uid": "uid-plr"},
        "spec": {
            "resources": {"requests": {"cpu": "2", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "128Mi"}},
            "containers": [{"name": "main", "image": "x"}],
        },
    }
    core = make_core(Pods(parse_pod(doc)))
    sb = sandbox("plr")
    decision = core.create(sb, guaranteed(sb, n=2))
    assert not decision.exclusive and decision.cpus == core.shared_pool == TOPOLOGY.all_cpus
    assert core.records["ctr-plr-main"].whole_pod and core.check() == []


# -- restarts, stops, sandboxes --------------------------------------------------------------------------


def test_a_restarted_container_gets_its_allocation_again_and_the_sandbox_releases_it() -> None:
    pod = api_pod("g", [spec("main", 2)])
    core = make_core(Pods(pod))
    sb = sandbox("g")
    first = core.create(sb, guaranteed(sb, n=2))
    core.stop("ctr-g-main")  # the container stopped (e.g. crashed): its pod keeps the CPUs
    assert core.records == {} and core.manager.cpu.state.get("uid-g", "main") == first.cpus
    assert core.create(sb, guaranteed(sb, n=2, cid="ctr-g-main-2")).cpus == first.cpus
    core.remove_container("ctr-g-main", "uid-g", "main", "sb-g")  # the old instance goes: nothing changes
    assert core.records["ctr-g-main-2"].exclusive == first.cpus and core.check() == []
    # a new sandbox of the same pod (the agent missed the old one's stop): the pod's containers all
    # start again, admitted anew; the old container, if it still ran, would share the pool
    sb2 = replace(sandbox("g"), id="sb-g-2")
    core.create(sb2, guaranteed(sb2, n=2, cid="ctr-g-main-3"))
    assert core.pods["uid-g"].sandbox_id == "sb-g-2" and core.records["ctr-g-main-3"].whole_pod
    old = core.records["ctr-g-main-2"]
    assert old.exclusive is None and not old.managed and old.error.startswith("PodSandboxReplaced")
    assert core.check() == []
    core.remove_pod("sb-g", "uid-g")  # the old sandbox's removal leaves the new one alone
    assert set(core.records) == {"ctr-g-main-3"} and core.check() == []
    core.remove_pod("sb-g-2", "uid-g")
    assert core.records == {} and core.manager.pods == {} and core.shared_pool == TOPOLOGY.all_cpus


def test_snapshot_restore_keeps_whole_pods() -> None:
    lookup = Pods(reuse_pod())
    core = make_core(lookup)
    sb = sandbox("reuse")
    init = core.create(sb, guaranteed(sb, "init", n=4))
    app = core.create(sb, guaranteed(sb, "app", n=2))
    snap = core.snapshot()
    assert snap["pods"] == [{"uid": "uid-reuse", "sandbox": "sb-reuse", "progress": 1}]
    other = make_core(lookup)
    other.restore(snap)
    assert other.snapshot() == snap and other.check() == []
    # after the restart the init container's removal still releases what the app does not reuse
    other.remove_container("ctr-reuse-init")
    assert other.manager.cpu.state.get("uid-reuse", "init") is None
    assert other.shared_pool == core.shared_pool | (init.cpus - app.cpus)
    # an entry whose pod the manager does not hold, or a record outside its pod, is refused
    for broken in ({**snap, "pods": [{"uid": "uid-nope", "sandbox": "x"}]}, {**snap, "pods": []}):
        with pytest.raises(CheckpointCorrupted):
            make_core(lookup).restore(broken)


def test_synchronize_adopts_a_running_pod_as_a_whole() -> None:
    """A lost checkpoint: the app container runs, its finished init container is still listed
    (stopped) or already removed; the pod is admitted as a whole, the app reuses the init's CPUs."""
    for init_listed in (True, False):
        core = make_core(Pods(reuse_pod()))
        sb = sandbox("reuse")
        listed = [guaranteed(sb, "app", n=2, cpus="0-15", state=api_pb2.CONTAINER_RUNNING)]
        if init_listed:
            listed.append(guaranteed(sb, "init", n=4, cpus="0-15", state=api_pb2.CONTAINER_STOPPED))
        result = core.synchronize([sb], listed)
        assert result.adopted == ("ctr-reuse-app",) and result.failed == ()
        state = core.manager.cpu.state
        app = state.get("uid-reuse", "app")
        assert app is not None and core.records["ctr-reuse-app"].exclusive == app
        assert [(u.container_id, u.cpus) for u in result.updates] == [("ctr-reuse-app", app)]
        init = state.get("uid-reuse", "init")
        if init_listed:  # held until its RemoveContainer, as at creation
            assert init is not None and app.is_subset_of(init)
        else:  # removed while the agent was away: released now
            assert init is None and "init" in core.pods["uid-reuse"].released
        assert core.check() == []
        # the sandbox is gone at the next Synchronize: the pod is released
        core.synchronize([], [])
        assert core.pods == {} and core.manager.pods == {} and core.check() == []


def test_synchronize_keeps_a_known_whole_pod_in_place() -> None:
    core = make_core(Pods(reuse_pod()))
    sb = sandbox("reuse")
    core.create(sb, guaranteed(sb, "init", n=4))
    app = core.create(sb, guaranteed(sb, "app", n=2))
    running = [
        guaranteed(sb, "init", n=4, state=api_pb2.CONTAINER_STOPPED),
        guaranteed(sb, "app", n=2, cpus=app.cpus.format(), state=api_pb2.CONTAINER_RUNNING),
    ]
    before = core.manager.snapshot()
    result = core.synchronize([sb], running)
    assert result.updates == () and result.adopted == () and result.dropped == ("ctr-reuse-init",)
    assert core.manager.snapshot() == before and core.check() == []


def test_synchronize_with_two_sandboxes_of_one_pod_never_holds_a_cpu_twice() -> None:
    """Robustness (a kubelet stops the old sandbox first): the newer sandbox's containers get the
    pod's admission; a container still running in the older one shares the pool, holding nothing."""
    core = make_core(Pods(api_pod("g", [spec("main", 2)])))
    old = sandbox("g")
    core.create(old, guaranteed(old, n=2))
    new = replace(sandbox("g"), id="sb-g-new")
    running = [
        guaranteed(old, n=2, cpus="1,9", state=api_pb2.CONTAINER_RUNNING),
        guaranteed(new, n=2, cid="ctr-g-main-new", cpus="0-15", state=api_pb2.CONTAINER_RUNNING),
    ]
    result = core.synchronize([old, new], running)
    assert result.failed == () and result.adopted == ("ctr-g-main-new",)
    assert core.pods["uid-g"].sandbox_id == "sb-g-new" and core.records["ctr-g-main-new"].exclusive is not None
    assert core.records["ctr-g-main"].exclusive is None and core.check() == []
    updates = {u.container_id: u.cpus for u in result.updates}
    assert updates["ctr-g-main"] == core.shared_pool

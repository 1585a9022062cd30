"""The ask/answer boundary (``policy/asks.py``): same decisions as the direct calls; interleaving, refusal, abort."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.policy.asks import AllocateAnswer, AllocateAsk, HintsAnswer, HintsAsk, Unanswered, answer_in_process
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import UnexpectedAdmissionError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.manager import Admission, ContainerAdmission, ResourceManager
from numaplane.policy.plugin import Hints, PluginAllocation, ResourcePlugin
from numaplane.resources.pod import Container, Pod, parse_pod
from numaplane.topology.model import Topology, synthetic

GADGET = "example.com/gadget"


class GadgetPlugin:
    """An in-process vendor plugin: one gadget per NUMA node."""

    name = "example.com/gadgets"
    resources = frozenset({GADGET})

    def __init__(self, topology: Topology) -> None:
        self.numa = list(topology.numa_ids)
        self.held: dict[tuple[str, str], int] = {}

    def _free(self) -> list[int]:
        return [n for n in self.numa if n not in self.held.values()]

    def hints(self, pod: Pod, container: Container) -> Hints | None:
        if GADGET not in container.requests:
            return None
        return {GADGET: [TopologyHint(NUMAMask.of(n), True) for n in self._free()]}

    def pod_hints(self, pod: Pod) -> Hints | None:
        return None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        if GADGET not in container.requests:
            return PluginAllocation(self.name)
        free = [n for n in self._free() if hint.numa is None or n in hint.numa.ids()]
        if not free:
            raise UnexpectedAdmissionError("no gadget left")
        self.held[(pod.uid, container.name)] = free[0]
        return PluginAllocation(self.name, devices={GADGET: (f"g{free[0]}",)})

    def release(self, pod_uid: str, container_name: str) -> None:
        self.held.pop((pod_uid, container_name), None)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        return {k: PluginAllocation(self.name, devices={GADGET: (f"g{n}",)}) for k, n in self.held.items()}

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        return {n: {GADGET: 1} for n in self.numa}

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return {n: {GADGET: 1} for n in self._free()}

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        pass

    def snapshot(self) -> dict[str, Any]:
        return {f"{u}|{c}": n for (u, c), n in sorted(self.held.items())}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.held = {tuple(k.split("|")): int(v) for k, v in snapshot.items()}  # type: ignore[misc]


def _pod(uid: str, containers: list[tuple[int, bool]]) -> Pod:
    specs = []
    for i, (cpus, gadget) in enumerate(containers):
        res: dict[str, Any] = {"cpu": str(cpus), "memory": "256Mi"}
        if gadget:
            res[GADGET] = "1"
        specs.append({"name": f"c{i}", "resources": {"requests": res, "limits": res}})
    return parse_pod({"metadata": {"name": uid, "uid": uid}, "spec": {"containers": specs}})


# -- the reference: the manager's admission before the boundary (plugins called directly) -------------
class _Recorder:
    def __init__(self, plugin: ResourcePlugin, scoped: bool) -> None:
        self.plugin, self.scoped, self.given = plugin, scoped, {}

    def _wants(self, c: Container) -> bool:
        return any(r in c.requests or r in c.limits for r in self.plugin.resources)

    def hints(self, pod: Pod, container: Container) -> Any:
        return None if self.scoped and not self._wants(container) else self.plugin.hints(pod, container)

    def pod_hints(self, pod: Pod) -> Any:
        if self.scoped and not any(self._wants(c) for c in pod.all_containers()):
            return None
        return self.plugin.pod_hints(pod)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> object:
        if self.scoped and not self._wants(container):
            return PluginAllocation(self.plugin.name)
        result = self.plugin.allocate(pod, container, hint)
        self.given[container.name] = result
        return result


def reference_admit(rm: ResourceManager, pod: Pod) -> Admission:
    if pod.uid in rm.admissions:
        return rm.admissions[pod.uid]
    tm = rm._manager_for(rm.config.topology_policy, rm.config.topology_scope)
    recorders = [_Recorder(p, not rm._is_builtin(p)) for p in rm.plugins]
    result = tm.admit(pod, recorders)  # type: ignore[arg-type]
    if not result.admitted:
        rm._release(pod, tm)
        return Admission(pod.uid, False, reason=result.reason, message=result.message, container=result.container)
    containers = tuple(
        ContainerAdmission(
            c.name, result.hints.get(c.name), tuple(r.given[c.name] for r in recorders if c.name in r.given)
        )
        for c in pod.all_containers()
    )
    admission = Admission(pod.uid, True, containers)
    rm.pods[pod.uid] = pod
    rm.admissions[pod.uid] = admission
    return admission


def _manager(topology: Topology, policy: str, scope: str) -> ResourceManager:
    config = {"topologyManager": {"policy": policy, "scope": scope}, "cpuManager": {"reservedCPUCount": 1}}
    return ResourceManager(topology, config, extra_plugins=[GadgetPlugin(topology)])


topologies = st.builds(
    synthetic,
    sockets=st.integers(1, 2),
    numa_per_socket=st.integers(1, 2),
    cores_per_numa=st.integers(2, 4),
    threads_per_core=st.integers(1, 2),
)
pods = st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=1, max_size=3)
streams = st.lists(st.tuples(st.sampled_from(["admit", "admit", "remove"]), st.integers(0, 7), pods), max_size=20)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topology=topologies,
    stream=streams,
    policy=st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]),
    scope=st.sampled_from(["container", "pod"]),
)
def test_the_boundary_decides_as_the_direct_calls(topology: Topology, stream: Any, policy: str, scope: str) -> None:
    asked, direct = _manager(topology, policy, scope), _manager(topology, policy, scope)
    for op, n, containers in stream:
        if op == "remove":
            assert asked.remove(f"p{n}") == direct.remove(f"p{n}")
            continue
        pod = _pod(f"p{n}", containers)
        assert asked.admit(pod).to_dict() == reference_admit(direct, pod).to_dict()
        assert asked.snapshot() == direct.snapshot()


def test_built_in_answers_are_fresh_when_asked_answers_arrive_late() -> None:
    """A run waits on its vendor plugin while another pod takes CPUs: the decision sees them taken."""
    topology = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1)
    rm = _manager(topology, "single-numa-node", "container")
    plugins = {p.name: p for p in rm.plugins}
    waiting = rm.begin(_pod("slow", [(2, True)]))
    (ask,) = waiting.asks
    assert isinstance(ask, HintsAsk) and ask.plugin == "example.com/gadgets" and ask.container == "c0"
    hints = answer_in_process(plugins, ask)  # both gadgets free: node 0 and node 1
    # meanwhile a plain pod takes the three free CPUs of node 0 (CPU 0 is reserved)
    plain = rm.admit(_pod("plain", [(3, False)]))
    assert plain.admitted and plain.containers[0].hint is not None
    assert plain.containers[0].hint.numa == NUMAMask.of(0)
    waiting.answer([hints])
    (alloc,) = waiting.asks
    assert isinstance(alloc, AllocateAsk) and alloc.hint.numa == NUMAMask.of(1)  # decided on today's CPUs
    waiting.answer([answer_in_process(plugins, alloc)])
    result = waiting.result
    assert result is not None and result.admitted
    mine, theirs = result.containers[0].exclusive_cpus, plain.containers[0].exclusive_cpus
    assert mine is not None and theirs is not None and not (mine & theirs)
    assert result.containers[0].devices == {GADGET: ("g1",)}


def test_an_unanswered_ask_refuses_the_pod_and_releases_it() -> None:
    topology = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1)
    rm = _manager(topology, "best-effort", "container")
    before = rm.snapshot()
    run = rm.begin(_pod("p", [(2, False), (2, True)]))
    (ask,) = run.asks  # c0 needs no gadget: decided (and allocated) without asking
    assert isinstance(ask, HintsAsk) and ask.container == "c1"
    assert rm.cpu.state.assignments.get("p", {}).keys() == {"c0"}
    run.answer([Unanswered("DEADLINE_EXCEEDED after 1 s")])
    assert run.done and run.result is not None and not run.result.admitted
    assert run.result.reason == "PluginUnavailable" and run.result.container == "c1"
    assert "example.com/gadgets" in run.result.message and "DEADLINE_EXCEEDED" in run.result.message
    assert rm.snapshot() == before


def test_abort_releases_everything_and_a_plugin_refusal_is_its_reason() -> None:
    topology = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1)
    rm = _manager(topology, "best-effort", "container")
    before = rm.snapshot()
    run = rm.begin(_pod("p", [(2, False), (2, True)]))
    run.abort()
    assert run.done and run.result is None and rm.snapshot() == before
    run = rm.begin(_pod("p", [(2, True)]))
    run.answer([HintsAnswer(None)])
    run.answer([AllocateAnswer(error=UnexpectedAdmissionError("the vendor says no"))])
    assert run.result is not None and run.result.reason == "UnexpectedAdmissionError"
    assert run.result.message == "the vendor says no" and rm.snapshot() == before


def test_a_pod_without_vendor_resources_is_decided_without_asks() -> None:
    topology = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=4, threads_per_core=1)
    rm = _manager(topology, "single-numa-node", "pod")
    run = rm.begin(_pod("p", [(2, False), (1, False)]))
    assert run.done and run.result is not None and run.result.admitted
    assert rm.begin(_pod("p", [(2, False), (1, False)])).result == run.result  # already admitted

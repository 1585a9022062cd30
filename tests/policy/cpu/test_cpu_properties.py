"""Property tests (hypothesis) over synthetic machines and the conformance fixtures.

Invariants: no CPU in two pods' exclusive sets; exclusive sets never touch the shared pool or the
reserved CPUs; every allocation comes from what was available (plus the pod's reusable CPUs); the
state always passes ``start`` validation; removing a pod restores the shared pool exactly; state
round-trips through dicts; runs are deterministic; ``full-pcpus-only`` hands out whole cores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from helpers_cpu import container, fixture, fixture_names, pod, with_offline
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from numaplane.policy.cpu import StaticPolicy
from numaplane.policy.cpu_assignment import index_for, take_distributed, take_packed
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.errors import AdmissionError, PolicyConfigError, UnexpectedAdmissionError
from numaplane.policy.hints import TopologyHint
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology, synthetic

OPTION_SETS: list[dict[str, str]] = [
    {},
    {"full-pcpus-only": "true"},
    {"distribute-cpus-across-numa": "true"},
    {"distribute-cpus-across-numa": "true", "full-pcpus-only": "true"},
    {"align-by-socket": "true"},
    {"distribute-cpus-across-cores": "true"},
    {"strict-cpu-reservation": "true"},
    {"strict-cpu-reservation": "true", "full-pcpus-only": "true"},
    {"prefer-align-cpus-by-uncorecache": "true"},
]


@st.composite
def machines(draw: st.DrawFn, *, allow_offline: bool = True) -> Topology:
    cores = draw(st.sampled_from([1, 2, 4]))
    topo = synthetic(
        sockets=draw(st.integers(1, 2)),
        numa_per_socket=draw(st.integers(1, 2)),
        cores_per_numa=cores,
        threads_per_core=draw(st.integers(1, 2)),
        uncore_per_numa=draw(st.sampled_from([u for u in (1, 2) if cores % u == 0])),
    )
    if allow_offline and draw(st.booleans()):
        ids = topo.all_cpus.sorted()
        offline = set(draw(st.lists(st.sampled_from(ids[1:]), max_size=2))) if len(ids) > 2 else set()
        topo = with_offline(topo, offline)
    return topo


@dataclass
class Admit:
    cpus: int
    init: int
    sidecar: int
    pod_scope: bool


@dataclass
class Remove:
    which: int


ops_strategy = st.lists(
    st.one_of(
        st.builds(Admit, st.integers(1, 6), st.sampled_from([0, 0, 2, 4]), st.sampled_from([0, 0, 2]), st.booleans()),
        st.builds(Remove, st.integers(0, 50)),
    ),
    min_size=1,
    max_size=12,
)


def make_pod(uid: str, op: Admit) -> Pod:
    inits = []
    if op.init:
        inits.append(container("init", str(op.init)))
    if op.sidecar:
        inits.append(container("side", str(op.sidecar), sidecar=True))
    return pod(uid, [container("app", str(op.cpus))], inits)


def first_preferred(hints: dict[str, list[TopologyHint]] | None) -> TopologyHint | None:
    if not hints or not hints["cpu"]:
        return None
    return next((h for h in hints["cpu"] if h.preferred), hints["cpu"][0])


def whole_cores(topology: Topology, cpus: CPUSet) -> bool:
    idx = index_for(topology)
    return all(idx.core_mask[idx.cpu_core[c]] & ~cpus.mask == 0 for c in cpus)


def check_state(policy: StaticPolicy, state: CPUState) -> None:
    seen = 0
    reserved = policy.reserved.mask
    for containers in state.assignments.values():
        pod_mask = 0
        for cpus in containers.values():
            assert cpus.mask & state.default.mask == 0, "exclusive CPU also in the shared pool"
            assert cpus.mask & reserved == 0, "reserved CPU handed out"
            pod_mask |= cpus.mask
        assert pod_mask & seen == 0, "CPU in two pods' exclusive sets"
        seen |= pod_mask
    if policy.options.strict_cpu_reservation:
        assert state.default.mask & reserved == 0
    if state.default.is_empty():
        # Every CPU is held exclusively: the kubelet's Start would refuse this state ("default cpuset
        # cannot be empty"); check its remaining invariant directly.
        expected = policy.allocatable if policy.options.strict_cpu_reservation else policy.topology.all_cpus
        assert state.assigned() == expected
    else:
        probe = state.copy()
        policy.start(probe)  # raises StateError unless default ∪ assignments is the whole machine
        assert probe.default == state.default
    assert CPUState.restore(state.snapshot()) == state
    plain = CPUState.from_dict(state.to_dict())
    assert (plain.default, plain.assignments) == (state.default, state.assignments)


def run_ops(policy: StaticPolicy, ops: list[Admit | Remove]) -> tuple[CPUState, list[CPUSet]]:
    state = policy.new_state()
    admitted: list[Pod] = []
    handed: list[CPUSet] = []
    for i, op in enumerate(ops):
        if isinstance(op, Remove):
            if admitted:
                victim = admitted.pop(op.which % len(admitted))
                before = state.default
                for c in victim.all_containers():
                    policy.remove_container(state, victim.uid, c.name)
                assert before <= state.default
            check_state(policy, state)
            continue
        p = make_pod(f"pod-{i}", op)
        saved = state.copy()
        try:
            pod_hint = first_preferred(policy.pod_hints(state, p)) if op.pod_scope else None
            for c in p.all_containers():
                hint = pod_hint if op.pod_scope else first_preferred(policy.hints(state, p, c))
                allowed = (state.default.mask & ~policy.reserved.mask) | state.reusable(p.uid).mask
                cpus = policy.allocate(state, p, c, hint)
                if cpus is not None:
                    assert cpus.mask & ~allowed == 0, "allocated CPUs outside available + reusable"
                    assert cpus.size() == policy.guaranteed_cpus(p, c)
                    handed.append(cpus)
        except AdmissionError:
            state = saved  # the resource manager rolls a rejected pod back
        else:
            admitted.append(p)
        check_state(policy, state)
    return state, handed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines(), st.sampled_from(OPTION_SETS), st.integers(0, 3), ops_strategy)
def test_policy_invariants_on_synthetic_machines(
    topo: Topology, options: dict[str, str], reserved: int, ops: list[Admit | Remove]
) -> None:
    try:
        policy = StaticPolicy(topo, reserved, options)
    except PolicyConfigError:
        assume(False)
        return
    state, handed = run_ops(policy, ops)
    again, handed_again = run_ops(StaticPolicy(topo, reserved, options), ops)
    assert again.snapshot() == state.snapshot() and handed_again == handed  # deterministic


@settings(max_examples=100, deadline=None)
@given(machines(allow_offline=False), st.sampled_from([o for o in OPTION_SETS if "full-pcpus-only" in o]),
       st.integers(0, 2), ops_strategy)  # fmt: skip
def test_full_pcpus_only_hands_out_whole_cores(
    topo: Topology, options: dict[str, str], reserved_cores: int, ops: list[Admit | Remove]
) -> None:
    assume(reserved_cores * topo.cpus_per_core < topo.num_cpus)
    policy = StaticPolicy(topo, reserved_cores * topo.cpus_per_core, options)
    _, handed = run_ops(policy, ops)
    assert all(whole_cores(topo, cpus) for cpus in handed)


@settings(max_examples=100, deadline=None)
@given(machines(), st.sampled_from(OPTION_SETS), st.integers(1, 8), st.integers(0, 2))
def test_admit_then_remove_restores_shared_pool(topo: Topology, options: dict[str, str], cpus: int, init: int) -> None:
    try:
        policy = StaticPolicy(topo, 1, options)
    except PolicyConfigError:
        assume(False)
        return
    state = policy.new_state()
    before = state.snapshot()
    p = make_pod("p", Admit(cpus, init * 2, 0, False))
    try:
        for c in p.all_containers():
            policy.allocate(state, p, c, first_preferred(policy.hints(state, p, c)))
    except AdmissionError:
        return
    for c in p.all_containers():
        policy.remove_container(state, p.uid, c.name)
    after = state.snapshot()
    after.pop("reuse", None)
    assert after == before


@settings(max_examples=100, deadline=None)
@given(machines(), st.integers(1, 12), st.data())
def test_hints_are_feasible_and_minimal(topo: Topology, request: int, data: st.DataObject) -> None:
    policy = StaticPolicy(topo, 0)
    ids = topo.all_cpus.sorted()
    free = CPUSet(data.draw(st.lists(st.sampled_from(ids), unique=True)))
    state = CPUState(default=free)
    hints = policy.hints(state, make_pod("p", Admit(request, 0, 0, False)), "app")
    assert hints is not None
    idx = index_for(topo)
    min_size = min(
        (len(h.numa) for h in hints["cpu"] if h.numa is not None and idx.numa_cpus(h.numa.bits).bit_count() >= request),
        default=None,
    )
    for h in hints["cpu"]:
        assert h.numa is not None
        assert (idx.numa_cpus(h.numa.bits) & free.mask).bit_count() >= request
        if h.preferred:
            assert len(h.numa) == min_size


@pytest.mark.parametrize("name", [n for n in fixture_names() if n != "machineInfoDualNumaHT"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_take_algorithms_on_fixtures(name: str, data: st.DataObject) -> None:
    topo = fixture(name)
    idx = index_for(topo)
    ids = topo.all_cpus.sorted()
    free = CPUSet(data.draw(st.lists(st.sampled_from(ids), unique=True, min_size=1))).mask
    n = data.draw(st.integers(0, free.bit_count()))
    runs: dict[str, Callable[[], int]] = {
        "packed": lambda: take_packed(idx, free, n),
        "spread": lambda: take_packed(idx, free, n, spread=True),
        "uncore": lambda: take_packed(idx, free, n, uncore=True),
        "distributed": lambda: take_distributed(idx, free, n, 1),
        "distributed-cores": lambda: take_distributed(idx, free, n, topo.cpus_per_core),
    }
    for label, run in runs.items():
        got = run()
        assert got & ~free == 0, label
        assert got.bit_count() == n, label
        assert run() == got, label
    with pytest.raises(UnexpectedAdmissionError, match="not enough cpus available"):
        take_packed(idx, free, free.bit_count() + 1)

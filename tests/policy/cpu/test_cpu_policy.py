"""Static policy behaviour through the public API: pools, allocate/remove, reuse, hints, errors."""

from __future__ import annotations

import pytest
from helpers_cpu import container, fixture, gu_pod, machine, pod

from numaplane.policy.cpu import StaticPolicy
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.errors import SMTAlignmentError, StateError, UnexpectedAdmissionError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.resources.pod import parse_pod
from numaplane.topology.cpuset import CPUSet


def cs(text: str) -> CPUSet:
    return CPUSet.parse(text)


def test_new_state_and_pools() -> None:
    policy = StaticPolicy(fixture("topoDualSocketHT"), 2)
    state = policy.new_state()
    assert state.default == cs("0-11")
    assert policy.available(state) == cs("1-5,7-11")
    assert policy.shared_pool(state) == cs("0-11")
    strict = StaticPolicy(fixture("topoDualSocketHT"), 2, {"strict-cpu-reservation": "true"})
    assert strict.new_state().default == cs("1-5,7-11")
    assert strict.allocatable_by_numa() == {0: 4, 1: 6}  # reserved 0 and 6 are both on NUMA 0


def test_allocate_and_remove_round_trip() -> None:
    policy = StaticPolicy(fixture("topoDualSocketHT"), 0)
    state = policy.new_state()
    p = gu_pod("p", 4)
    cpus = policy.allocate(state, p, "main", TopologyHint(NUMAMask.of(1), True))
    assert cpus == cs("1,3,7,9")
    assert state.default == cs("0,2,4-6,8,10-11")
    assert policy.allocate(state, p, "main") == cpus  # already assigned: same set, no change
    assert policy.remove_container(state, "p", "main") == cpus
    assert state.default == cs("0-11") and state.assignments == {}
    assert policy.remove_container(state, "p", "main") == cs("")


def test_shared_containers_get_nothing() -> None:
    policy = StaticPolicy(machine(), 0)
    state = policy.new_state()
    burstable = parse_pod(
        {"metadata": {"uid": "b"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
    )
    assert policy.allocate(state, burstable, "c") is None
    assert policy.hints(state, burstable, "c") is None
    frac = pod("f", [container("main", "1500m")])
    assert policy.allocate(state, frac, "main") is None
    assert policy.guaranteed_cpus(frac, "main") == 0
    pod_level = parse_pod(
        {
            "metadata": {"uid": "pl"},
            "spec": {
                "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                "containers": [container("main", "2")],
            },
        }
    )
    assert policy.allocate(state, pod_level, "main") is None
    assert state.assignments == {}


def test_errors_leave_state_unchanged() -> None:
    policy = StaticPolicy(fixture("topoDualSocketHT"), 2, {"full-pcpus-only": "true"})
    state = policy.new_state()
    before = state.snapshot()
    with pytest.raises(SMTAlignmentError) as smt:
        policy.allocate(state, gu_pod("a", 3), "main")
    assert smt.value.reason == "SMTAlignmentError"
    assert str(smt.value) == "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"
    with pytest.raises(SMTAlignmentError, match="available physical CPUs = 10, requested CPUs = 12"):
        policy.allocate(state, gu_pod("b", 12), "main")
    plain = StaticPolicy(fixture("topoDualSocketHT"), 2)
    with pytest.raises(UnexpectedAdmissionError) as err:
        plain.allocate(state, gu_pod("c", 11), "main")
    assert err.value.reason == "UnexpectedAdmissionError"
    assert str(err.value) == "not enough cpus available to satisfy request: requested=11, available=10"
    assert state.snapshot() == before


def test_init_container_reuse_and_sidecars() -> None:
    policy = StaticPolicy(fixture("topoSingleSocketHT"), 0)
    state = policy.new_state()
    p = pod(
        "p",
        [container("app", "2")],
        [container("init", "4"), container("side", "2", sidecar=True)],
    )
    assert policy.pod_guaranteed_cpus(p) == 4
    init = policy.allocate(state, p, "init")
    side = policy.allocate(state, p, "side")
    app = policy.allocate(state, p, "app")
    assert init == cs("0-1,4-5")
    assert side is not None and app is not None
    assert side <= init and app <= init and not side.intersects(app)  # sidecar and app reuse init CPUs
    assert state.reusable("p") == init - side - app
    assert state.reusable("other") == cs("")
    policy.remove_container(state, "p", "init")
    assert state.default == cs("0-7") - side - app


def test_hints_scopes_and_regeneration() -> None:
    policy = StaticPolicy(fixture("topoDualSocketHT"), 0)
    state = policy.new_state()
    p = gu_pod("p", 6)
    hints = policy.hints(state, p, "main")
    assert hints == {"cpu": [TopologyHint(NUMAMask.of(0), True), TopologyHint(NUMAMask.of(1), True),
                             TopologyHint(NUMAMask.of(0, 1), False)]}  # fmt: skip
    assert policy.pod_hints(state, p) == hints
    policy.allocate(state, p, "main", hints["cpu"][1])
    assert policy.hints(state, p, "main") == {
        "cpu": [TopologyHint(NUMAMask.of(1), True), TopologyHint(NUMAMask.of(0, 1), False)]
    }
    bigger = gu_pod("p", 8)
    assert policy.hints(state, bigger, "main") == {"cpu": []}
    assert policy.hints(state, gu_pod("q", 7), "main") == {"cpu": []}


def test_start_validation_messages() -> None:
    policy = StaticPolicy(fixture("topoDualSocketHT"), 0)
    with pytest.raises(StateError, match=r"^default cpuset cannot be empty$"):
        policy.start(CPUState(assignments={"p": {"c": cs("0")}}))
    with pytest.raises(StateError, match='differs from state checkpoint policy "none"'):
        policy.start(CPUState(policy_name="none"))
    state = CPUState(default=cs("1-11"), assignments={"p": {"c": cs("0")}})
    policy.start(state)
    assert state.default == cs("1-11")


def test_container_object_or_name_and_unknown_name() -> None:
    policy = StaticPolicy(machine(), 0)
    state = policy.new_state()
    p = gu_pod("p", 2)
    assert policy.allocate(state, p, p.containers[0]) is not None
    with pytest.raises(ValueError, match="no container"):
        policy.allocate(state, p, "nope")

"""Topology Manager construction, admission flow (scopes, none policy), error mapping, conformance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from numaplane.conformance.runner import run_files
from numaplane.policy.errors import PolicyConfigError, SMTAlignmentError
from numaplane.policy.hints import NO_AFFINITY, NUMAMask, TopologyHint
from numaplane.policy.topology_manager import (
    AFFINITY_ERROR_MESSAGE,
    PlainAllocationError,
    ProviderHints,
    TopologyManager,
    TopologyManagerOptions,
)
from numaplane.resources.pod import Container, Pod, parse_pod


@pytest.mark.parametrize("kind", ["topology-merge", "topology-helpers"])
def test_conformance_kind_passes_completely(shared_dir: Path, kind: str) -> None:
    report = run_files([shared_dir / "conformance" / f"{kind}.jsonl"], [shared_dir / "conformance"])
    assert report.failed == 0, report.to_dict()["failures"][:3]
    assert report.passed > 0


def h(ids: list[int] | None, preferred: bool) -> TopologyHint:
    return TopologyHint(None if ids is None else NUMAMask.from_ids(ids), preferred)


class Recorder:
    """A provider returning fixed hints and recording calls."""

    def __init__(self, name: str, hints: ProviderHints, fail: Exception | None = None) -> None:
        self.name, self._hints, self.fail = name, hints, fail
        self.calls: list[tuple[str, str, Any]] = []

    def hints(self, pod: Pod, container: Container) -> ProviderHints:
        self.calls.append(("hints", container.name, None))
        return self._hints

    def pod_hints(self, pod: Pod) -> ProviderHints:
        self.calls.append(("pod_hints", "", None))
        return self._hints

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> object:
        self.calls.append(("allocate", container.name, hint))
        if self.fail is not None:
            raise self.fail
        return None


POD = parse_pod(
    {
        "metadata": {"name": "p", "uid": "u1"},
        "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b"}]},
    }
)


def test_container_scope_merges_and_allocates_per_container_in_order() -> None:
    cpu = Recorder("cpu", {"cpu": [h([0], True), h([1], True), h([0, 1], False)]})
    mem = Recorder("mem", {"memory": [h([1], True), h([0, 1], False)]})
    tm = TopologyManager("restricted", "container", {}, [0, 1])
    result = tm.admit(POD, [cpu, mem])
    assert result.admitted and result.error is None
    assert result.hints == {"init": h([1], True), "a": h([1], True), "b": h([1], True)}
    assert [c[:2] for c in cpu.calls] == [
        ("hints", "init"),
        ("allocate", "init"),
        ("hints", "a"),
        ("allocate", "a"),
        ("hints", "b"),
        ("allocate", "b"),
    ]
    assert tm.affinity("u1", "a") == h([1], True)
    assert tm.affinity("u1", "missing") == NO_AFFINITY
    tm.remove_container("u1", "a")
    assert tm.affinity("u1", "a") == NO_AFFINITY
    tm.remove_pod("u1")
    assert list(tm.stored()) == []


def test_pod_scope_asks_once_and_stores_one_hint_for_every_container() -> None:
    cpu = Recorder("cpu", {"cpu": [h([0], True), h([1], True)]})
    tm = TopologyManager("single-numa-node", "pod", {}, [0, 1])
    result = tm.admit(POD, [cpu])
    assert result.admitted
    assert set(result.hints.values()) == {h([0], True)}
    assert [c[0] for c in cpu.calls] == ["pod_hints", "allocate", "allocate", "allocate"]


def test_rejection_is_a_topology_affinity_error_and_stops_before_allocating() -> None:
    cpu = Recorder("cpu", {"cpu": [h([0, 1], False)]})
    tm = TopologyManager("restricted", "container", {}, [0, 1])
    result = tm.admit(POD, [cpu])
    assert not result.admitted
    assert result.reason == "TopologyAffinityError"
    assert result.message == AFFINITY_ERROR_MESSAGE == "Resources cannot be allocated with Topology locality"
    assert result.container == "init"
    assert [c[0] for c in cpu.calls] == ["hints"]
    assert list(tm.stored()) == []


def test_provider_errors_are_mapped_like_the_kubelet() -> None:
    tm = TopologyManager("best-effort", "container", {}, [0, 1])
    plain = Recorder("mem", None, PlainAllocationError("[memorymanager] boom"))
    result = tm.admit(POD, [plain])
    assert (result.reason, result.message) == (
        "UnexpectedAdmissionError",
        "Allocate failed due to [memorymanager] boom, which is unexpected",
    )
    typed = Recorder("cpu", None, SMTAlignmentError("SMT Alignment Error: not enough free physical CPUs"))
    assert tm.admit(POD, [typed]).reason == "SMTAlignmentError"
    other = Recorder("x", None, RuntimeError("device plugin gone"))
    assert tm.admit(POD, [other]).message == "Allocate failed due to device plugin gone, which is unexpected"


def test_none_policy_never_asks_for_hints_and_allocates_with_the_zero_hint() -> None:
    cpu = Recorder("cpu", {"cpu": []})
    tm = TopologyManager("none", "container", {}, list(range(16)))  # no NUMA limit for none
    assert tm.admit(POD, [cpu]).admitted
    assert [c for c in cpu.calls if c[0] == "hints"] == []
    assert {c[2] for c in cpu.calls} == {NO_AFFINITY}
    assert tm.merge([{"r": [h([0], True)]}]) == (NO_AFFINITY, True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policy": "bogus"}, 'unknown policy: "bogus"'),
        ({"scope": "node"}, 'unknown scope: "node"'),
        ({"numa_nodes": list(range(9))}, "unsupported on machines with more than 8 NUMA Nodes"),
        ({"options": {"x": "1"}}, 'unknown Topology Manager Policy option: "x"'),
        (
            {"options": {"prefer-closest-numa-nodes": "yes"}},
            'bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "yes": invalid syntax',
        ),
        (
            {"options": {"max-allowable-numa-nodes": "99999999999999999999"}},
            'unable to convert policy option to integer "max-allowable-numa-nodes": '
            'strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
        (
            {"options": {"max-allowable-numa-nodes": "7"}},
            'the minimum value of "max-allowable-numa-nodes" should not be less than 8',
        ),
        (
            {"options": {"prefer-closest-numa-nodes": "true"}, "distances": {0: {0: 10, 1: 11}, 1: {1: 10}}},
            "error getting NUMA distances from cadvisor",
        ),
    ],
)
def test_construction_errors(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"policy": "best-effort", "scope": "container", "numa_nodes": [0, 1]} | kwargs
    with pytest.raises(PolicyConfigError) as err:
        TopologyManager(**args)
    assert message in str(err.value)


def test_options_parse_go_booleans_and_signed_integers() -> None:
    assert TopologyManagerOptions.parse({"prefer-closest-numa-nodes": "T"}).prefer_closest_numa
    assert not TopologyManagerOptions.parse({"prefer-closest-numa-nodes": "0"}).prefer_closest_numa
    assert TopologyManagerOptions.parse({"max-allowable-numa-nodes": "+16"}).max_allowable_numa_nodes == 16


def test_prefer_closest_breaks_ties_by_average_distance() -> None:
    dist = {0: {0: 10, 1: 20, 2: 11}, 1: {0: 20, 1: 10, 2: 20}, 2: {0: 11, 1: 20, 2: 10}}
    hints: ProviderHints = {"r": [h([0, 1], True), h([0, 2], True)]}
    narrow = TopologyManager("best-effort", "container", {}, [0, 1, 2], dist)
    close = TopologyManager("best-effort", "container", {"prefer-closest-numa-nodes": "true"}, [0, 1, 2], dist)
    assert narrow.merge([hints])[0] == h([0, 1], True)
    assert close.merge([hints])[0] == h([0, 2], True)
    single = TopologyManager("single-numa-node", "container", {"prefer-closest-numa-nodes": "true"}, [0, 1, 2], dist)
    assert single.merge([{"r": [h([2], True), h([1], True)]}])[0] == h([1], True)


def test_numa_ids_beyond_63_are_modelled() -> None:
    nodes = [0, 1, 250, 251]
    tm = TopologyManager("restricted", "container", {}, nodes)
    hint, admit = tm.merge([{"gpu": [h([250], True), h([250, 251], False)]}, {"cpu": [h([250], True), h([0], True)]}])
    assert (hint, admit) == (h([250], True), True)
    hint, admit = tm.merge([{"gpu": [h([251], True)]}, {"cpu": [h([0], True)]}])
    assert (hint, admit) == (TopologyHint(NUMAMask.from_ids(nodes), False), False)

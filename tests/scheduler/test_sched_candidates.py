"""The cycle's one-call answers to the extender's filter and prioritize (Cycle.filter, Cycle.prioritize) give
SchedulerState.evaluate's answers, name by name."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import node_doc, nrt_doc, pod_doc, zone_doc

from numaplane.placement.caches.overreserve import OverReserveCache
from numaplane.placement.model.result import ALIGN_REASONS
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.state import SchedulerState

#: Nodes covering every reason: fits, cannot align (container and pod scope; evictions help or not),
#: malformed and untrusted data, no NRT, a policy the plugin does not align, a Node object
#: too malformed for a row; plus a name the state does not know.
NAMES = ("fits", "busy", "small", "podscope", "broken", "foreign", "bare", "restricted", "badnode", "ghost")


def zones(name: str, cpu: tuple[int, int], alloc: int, **kw: Any) -> dict[str, Any]:
    return nrt_doc(name, [zone_doc(i, {"cpu": (alloc, c), "memory": ("8Gi", "8Gi")}) for i, c in enumerate(cpu)], **kw)


def make_state(churn: bool = False) -> SchedulerState:
    """The state of :data:`NAMES`; ``churn``: the first node removed and added again, so that the
    emptied arrays (made later, in search order) have other rows than the cycle's."""
    state = SchedulerState(SchedulerConfig())
    for name in NAMES[:-2]:
        state.node_upserted(node_doc(name))
    state.node_upserted(node_doc("badnode", cpu="lots"))
    broken = zones("broken", (4, 4), 4)
    broken["zones"][0]["resources"][0]["available"] = "lots"
    for nrt in (
        zones("fits", (4, 4), 4),
        zones("busy", (0, 1), 4),
        zones("small", (2, 2), 2),
        zones("podscope", (1, 1), 4, scope="pod"),
        broken,
        zones("foreign", (4, 4), 4),
        zones("restricted", (1, 1), 4, policy="restricted"),
    ):
        state.nrt_upserted(nrt)
    other = pod_doc("other", 1, scheduler="default-scheduler")  # a foreign pod: the node is untrusted
    other["metadata"]["uid"] = "uid-other"
    other["spec"]["nodeName"] = "foreign"
    other["status"] = {"phase": "Running"}
    state.pod_upserted(None, other)
    if churn:
        state.node_deleted(node_doc("fits"))
        state.node_upserted(node_doc("fits"))
        state.nrt_upserted(zones("fits", (4, 4), 4))
    return state


def expected(state: SchedulerState, pod: Pod, names: list[str], mark: bool) -> dict[str, Any]:
    ev = state.evaluate(pod, names, mark=mark, preemption=True)
    scores = [
        ev.scores.get(n, ev.rejected_scores.get(n, state.cycle.numa_score(pod, n) if n in state.nodes else 0))
        for n in names
    ]
    return {
        "feasible": [n in ev.scores for n in names],
        "known": [n not in ev.unknown for n in names],
        "scores": scores,
        "reasons": [ev.reason(n) if n in ev.failed else None for n in names],
        "aligning": [n in ev.failed and ev.reason(n) in ALIGN_REASONS for n in names],
        "preemptible": [n in ev.preemptible for n in names],
    }


def actual(state: SchedulerState, pod: Pod, names: list[str], mark: bool) -> dict[str, Any]:
    answer = state.cycle.filter(pod, names, state.unusable_node, mark=mark)
    return {
        "feasible": answer.feasible.tolist(),
        "known": answer.known.tolist(),
        "scores": state.cycle.prioritize(pod, names, state.nodes).tolist(),
        "reasons": answer.reasons.tolist(),
        "aligning": [bool(f) and r in ALIGN_REASONS for f, r in zip(answer.failed, answer.reasons, strict=True)],
        "preemptible": answer.preemptible.tolist(),
    }


def marks(state: SchedulerState) -> dict[str, int]:
    cache = state.cache
    assert isinstance(cache, OverReserveCache)
    return {n: cache.dirty(n)["maybe_overreserved"] for n in NAMES}


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(st.sampled_from(NAMES), max_size=14),
    cpu=st.integers(1, 5),
    init=st.booleans(),
    mark=st.booleans(),
    churn=st.booleans(),
)
def test_array_verdicts_equal_the_per_name_evaluation(
    names: list[str], cpu: int, init: bool, mark: bool, churn: bool
) -> None:
    doc = pod_doc("p", cpu)
    if init:  # container-scope rejections then need the per-node explanation
        doc["spec"]["initContainers"] = [dict(doc["spec"]["containers"][0], name="init")]
    pod = parse_pod(doc)
    by_name, by_array = make_state(churn), make_state(churn)
    assert actual(by_array, pod, names, mark) == expected(by_name, pod, names, mark)
    assert marks(by_array) == marks(by_name)  # the same rejections reported to the cache


def test_every_reason_is_covered() -> None:
    state = make_state()
    pod = parse_pod(pod_doc("p", 3))
    got = actual(state, pod, list(NAMES), mark=True)
    reasons = dict(zip(NAMES, got["reasons"], strict=True))
    assert reasons["fits"] is None and reasons["bare"] is None  # passes (Guaranteed pod, no NRT)
    assert reasons["busy"] == reasons["small"] == "cannot align container"
    assert reasons["podscope"] == "cannot align pod"
    assert reasons["broken"] == "malformed node topology data"
    assert reasons["foreign"] == "invalid node topology data"
    assert reasons["restricted"] is None  # the plugin only aligns single-numa-node
    assert reasons["badnode"].startswith("malformed node object")  # no row: explained per node
    assert reasons["ghost"] is None and not got["known"][NAMES.index("ghost")]
    assert {n for n, p in zip(NAMES, got["preemptible"], strict=True) if p} == {"busy", "podscope"}
    assert marks(state)["busy"] == marks(state)["small"] == 1 and marks(state)["broken"] == 0


def test_container_scope_with_init_containers_is_explained_per_node() -> None:
    doc = pod_doc("p", 3)
    doc["spec"]["initContainers"] = [dict(doc["spec"]["containers"][0], name="init")]
    pod = parse_pod(doc)
    got = actual(make_state(), pod, ["busy", "small"], mark=False)
    assert got == expected(make_state(), pod, ["busy", "small"], mark=False)
    assert got["reasons"][0] == "cannot align init container"


def test_churned_rows_differ_and_still_agree() -> None:
    state = make_state(churn=True)
    pod = parse_pod(pod_doc("p", 3))
    index, _ = state.cycle.numa_feasible(pod)
    assert dict(state.cycle.emptied_evaluation(pod).index) != dict(index)  # the rows are mapped
    assert actual(state, pod, list(NAMES), mark=False) == expected(make_state(churn=True), pod, list(NAMES), False)


def test_the_cycles_partial_evaluations_are_parts_of_the_one_value() -> None:
    state = make_state(churn=True)
    cycle, pod = state.cycle, parse_pod(pod_doc("p", 3))
    ev, emptied = cycle.verdicts(pod, preemption=True), cycle.emptied_evaluation(pod)
    index, feasible = cycle.numa_feasible(pod)
    assert dict(index) == dict(ev.index) and feasible.tolist() == ev.feasible.tolist()
    index, scores = cycle.numa_scores(pod)
    assert dict(index) == dict(ev.index) and scores.tolist() == ev.scores.tolist()
    by_row = cycle.emptied_feasible(pod)
    assert {n: by_row[r] for n, r in ev.index.items()} == {n: emptied.feasible[r] for n, r in emptied.index.items()}
    assert cycle.reason_codes(pod, ev.feasible).tolist() == ev.codes.tolist()
    trusted = {n: bool(ev.trusted[r]) for n, r in ev.index.items()}
    assert trusted == {n: n not in ("broken", "foreign", "bare", "badnode") for n in ev.index}
    assert ev.preemptible is not None
    assert {n for n, r in ev.index.items() if ev.preemptible[r]} == {"busy", "podscope"}
    assert cycle.verdicts(pod).preemptible is None  # not asked: the emptied arrays are not read

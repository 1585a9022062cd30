"""The scheduler state without an API server: predicates, NUMA evaluation, cache feedback, learning, queue."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sched_helpers import node_doc, nrt_doc, pod_doc, zone_doc

from numaplane.kube.clock import FakeClock
from numaplane.kube.memory import InMemoryKube
from numaplane.nrt.fingerprint import compute_fingerprint
from numaplane.placement.arrays.reasons import MALFORMED, UNTRUSTED
from numaplane.placement.caches.cache import filter_with_cache, score_with_cache
from numaplane.placement.caches.overreserve import OverReserveCache
from numaplane.placement.explain.filter import filter as numa_filter
from numaplane.placement.model.result import ALIGN_REASONS, Fit, Reject
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.decision import fit_error_message
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.loop import StandaloneScheduler
from numaplane.scheduler.queue import SchedulingQueue
from numaplane.scheduler.state import SchedulerState


def two_zone_nrt(name: str, cpu: tuple[int, int] = (4, 4), alloc: int = 4, **kw: Any) -> dict[str, Any]:
    return nrt_doc(name, [zone_doc(i, {"cpu": (alloc, c), "memory": ("8Gi", "8Gi")}) for i, c in enumerate(cpu)], **kw)


def state_with(nodes: list[dict[str, Any]], nrts: list[dict[str, Any]], **config: Any) -> SchedulerState:
    state = SchedulerState(SchedulerConfig().with_overrides(**config))
    for n in nodes:
        state.node_upserted(n)
    for t in nrts:
        state.nrt_upserted(t)
    return state


def bound_doc(
    name: str, node: str, cpu: int = 1, scheduler: str = "numaplane-scheduler", phase: str = "Running"
) -> dict[str, Any]:
    doc = pod_doc(name, cpu, scheduler=scheduler)
    doc["metadata"]["uid"] = f"uid-{name}"
    doc["spec"]["nodeName"] = node
    doc["status"] = {"phase": phase}
    return doc


def test_fit_error_message_is_kube_schedulers() -> None:
    reasons = {
        "a": ["Insufficient cpu", "Insufficient memory"],
        "b": ["Insufficient cpu"],
        "c": ["cannot align container"],
        "d": ["cannot align container"],
        "e": ["cannot align container"],
    }
    assert fit_error_message(5, reasons) == (
        "0/5 nodes are available: 1 Insufficient memory, 2 Insufficient cpu, 3 cannot align container."
    )
    assert fit_error_message(0, {}) == "no nodes available to schedule pods"
    assert fit_error_message(2, {}) == "0/2 nodes are available:"


def test_basic_reasons_stop_at_the_first_failing_plugin() -> None:
    nodes = [
        node_doc("cordoned", cpu=1, unschedulable=True),
        node_doc("tainted", cpu=1, taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
        node_doc("other-zone", labels={"zone": "b"}),
        node_doc("tiny", cpu=1, memory="1Mi"),
        node_doc("good", labels={"zone": "a"}),
    ]
    state = state_with(nodes, [])
    pod = parse_pod(pod_doc("p", 2, node_selector={"zone": "a"}))
    assert state.verdicts.basic_reasons(pod, "cordoned") == ["node(s) were unschedulable"]
    assert state.verdicts.basic_reasons(pod, "tainted") == ["node(s) had untolerated taint {gpu: yes}"]
    assert state.verdicts.basic_reasons(pod, "other-zone") == ["node(s) didn't match Pod's node affinity/selector"]
    free = parse_pod(pod_doc("q", 2))
    assert state.verdicts.basic_reasons(free, "tiny") == ["Insufficient cpu", "Insufficient memory"]
    assert state.verdicts.basic_reasons(pod, "good") == []
    assert state.verdicts.basic_reasons(pod, "ghost") == ["node not found"]


def test_usage_counts_assumed_then_bound_pods_once() -> None:
    state = state_with([node_doc("n", cpu=4)], [])
    pod = parse_pod(bound_doc("p", "", cpu=3) | {"status": {"phase": "Pending"}})
    state.pod_upserted(None, pod_doc("p", 3))
    state.assume(pod, "n")
    assert state.usage.used("n")["cpu"].amount == 3 and state.usage.is_assumed("default/p")
    state.pod_upserted(pod_doc("p", 3), pod_doc("p", 3))  # a pending update does not drop the assumption
    assert state.usage.count("n") == 1
    state.pod_upserted(pod_doc("p", 3), bound_doc("p", "n", 3))
    assert state.usage.count("n") == 1 and not state.usage.is_assumed("default/p")
    assert state.verdicts.basic_reasons(parse_pod(pod_doc("q", 2)), "n") == ["Insufficient cpu"]
    state.pod_upserted(bound_doc("p", "n", 3), bound_doc("p", "n", 3, phase="Succeeded"))
    assert state.usage.count("n") == 0
    state.pod_deleted(bound_doc("p", "n", 3))
    assert "default/p" not in state.pods


def test_placements_bound_by_others_under_our_name_are_learned() -> None:
    state = state_with([node_doc("n")], [two_zone_nrt("n")])
    cache = state.cache
    assert isinstance(cache, OverReserveCache)
    pending = pod_doc("p", 3)
    state.pod_upserted(None, pending)
    state.pod_upserted(pending, bound_doc("p", "n", 3, phase="Pending"))
    assert str(cache.assumed("n")["default/p"]["cpu"]) == "3"
    # already bound at first sight (initial list): the exporter's data has it, no charge
    state.pod_upserted(None, bound_doc("old", "n", 1))
    assert "default/old" not in cache.assumed("n")
    # a pod of another scheduler is foreign: the node is untrusted until a resync
    state.pod_upserted(None, bound_doc("foreign", "n", 1, scheduler="default-scheduler"))
    assert cache.get("n").fresh is False
    ev = state.evaluate(parse_pod(pod_doc("x", 1)), ["n"])
    verdict = ev.reject("n")
    assert ev.failed == ["n"] and isinstance(verdict, Reject)
    assert verdict.reason == "invalid node topology data"
    assert ev.codes == {"n": UNTRUSTED} and ev.reason("n") == verdict.reason  # from the arrays
    assert not preemption_may_help(state, ev.pod, "n", verdict)


def test_evaluate_feeds_rejections_back_to_the_cache() -> None:
    nodes = [node_doc(n) for n in ("full", "broken", "bare")]
    broken = two_zone_nrt("broken")
    broken["zones"][0]["resources"][0]["available"] = "lots"
    state = state_with(nodes, [two_zone_nrt("full", (1, 1)), broken])
    pod = parse_pod(pod_doc("p", 2))
    ev = state.evaluate(pod, mark=False)
    assert sorted(ev.failed) == ["broken", "full"] and set(ev.scores) == {"bare"}
    cache = state.cache
    assert isinstance(cache, OverReserveCache)
    assert cache.dirty("full")["maybe_overreserved"] == 0
    ev = state.evaluate(pod)
    assert cache.dirty("full")["maybe_overreserved"] == 1
    assert cache.dirty("broken")["maybe_overreserved"] == 0
    assert ev.reject("broken").reason == "malformed node topology data"
    assert ev.codes["broken"] == MALFORMED and ev.reason("broken") == "malformed node topology data"
    assert ev.reject("full").reason == "cannot align container"
    assert ev.scores == {"bare": 0}  # Guaranteed pod, no NRT: passes, scores 0


def test_preemption_may_help_only_when_an_emptied_node_fits() -> None:
    nodes = [node_doc(n) for n in ("busy", "small")]
    state = state_with(nodes, [two_zone_nrt("busy", (0, 1), alloc=4), two_zone_nrt("small", (2, 2), alloc=2)])
    pod = parse_pod(pod_doc("p", 3))
    ev = state.evaluate(pod)
    busy, small = ev.reject("busy"), ev.reject("small")
    assert isinstance(busy, Reject) and isinstance(small, Reject)
    assert preemption_may_help(state, pod, "busy", busy)
    assert not preemption_may_help(state, pod, "small", small)


@pytest.mark.parametrize("mode", ["passthrough", "overreserve", "discard-reserved"])
def test_evaluate_agrees_with_the_per_node_functions(mode: str) -> None:
    names = [f"n{i}" for i in range(8)]
    nodes = [node_doc(n, extra={"vendor.com/nic": "4"} if i % 2 else None) for i, n in enumerate(names)]
    nrts = [
        two_zone_nrt("n0", (4, 4)),
        two_zone_nrt("n1", (1, 3)),
        two_zone_nrt("n2", (0, 0)),
        two_zone_nrt("n3", (2, 2), scope="pod"),
        two_zone_nrt("n4", (1, 1), policy="restricted"),
        nrt_doc("n5", [zone_doc("numa-0", {"cpu": (4, 4)}), zone_doc(1, {"cpu": (4, 4), "memory": ("8Gi", "8Gi")})]),
        nrt_doc("n6", [zone_doc(0, {"cpu": (4, 4), "memory": ("8Gi", "8Gi"), "vendor.com/nic": (2, 1)})]),
    ]
    broken = two_zone_nrt("n7")
    broken["zones"][1]["resources"][0]["available"] = "-"
    state = state_with(nodes, [*nrts, broken], cache_mode=mode, kubelet_admission=mode == "passthrough")
    reserved = parse_pod(bound_doc("r", "n0", 2))
    state.assume(reserved, "n0")
    with_init = pod_doc("i", 2)
    with_init["spec"]["initContainers"] = [
        {
            "name": "setup",
            "resources": {"requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}},
        }
    ]
    pods = [
        parse_pod(pod_doc("g", 2)),
        parse_pod(pod_doc("b", 1, guaranteed=False)),
        parse_pod(with_init),
        parse_pod(pod_doc("w", 4)),
        parse_pod(pod_doc("huge", 5)),
    ]
    for pod in pods:
        ev = state.evaluate(pod, names, mark=False, preemption=True)
        for name in names:
            node = state.nodes[name].doc
            verdict = filter_with_cache(pod, state.cache, node, options=state.config.filter_options)
            assert (name in ev.scores) == verdict.fit, (mode, pod.name, name, verdict)
            if verdict.fit:
                assert ev.scores[name] == score_with_cache(pod, state.cache, name, state.config.strategy)
                continue
            assert isinstance(verdict, Reject)
            assert ev.reason(name) == verdict.reason, (mode, pod.name, name)
            # the score the extender gives a node kube-scheduler asks about although our filter rejected it
            assert ev.rejected_scores[name] == score_with_cache(pod, state.cache, name, state.config.strategy)
            helps = preemption_may_help(state, pod, name, verdict)
            assert (name in ev.preemptible and verdict.reason in ALIGN_REASONS) == helps, (mode, pod.name, name)


def preemption_may_help(state: SchedulerState, pod: Pod, name: str, verdict: Reject) -> bool:
    """Reference for :attr:`NumaEvaluation.preemptible`, per node: an alignment rejection on trusted,
    readable data, and the pod fits the node's zones with every zone's ``available`` raised to its
    ``allocatable`` (the node emptied of pods)."""
    if verdict.reason not in ALIGN_REASONS:
        return False
    record = state.nodes.get(name)
    cached = state.cache.get(name, pod)
    topology = cached.topology
    if record is None or record.numa is None or not cached.fresh or topology is None or topology.problem:
        return False
    emptied = replace(topology, zones=tuple(replace(z, available=dict(z.allocatable)) for z in topology.zones))
    return isinstance(numa_filter(pod, emptied, record.numa, options=state.config.filter_options), Fit)


def test_queue_backoff_and_unschedulable_moves() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(initial_backoff_seconds=1, max_backoff_seconds=4, max_unschedulable_seconds=30, clock=clock)
    assert [queue.unschedulable("p") for _ in range(4)] == [1, 2, 4, 4]
    assert queue.sizes() == {"active": 0, "backoff": 0, "unschedulable": 1}
    queue.forget("p")
    assert queue.sizes()["unschedulable"] == 0
    queue.unschedulable("p")
    queue.add("q")
    assert queue.sizes() == {"active": 1, "backoff": 0, "unschedulable": 1}
    assert queue.flush_unschedulable() == 0
    clock.advance(31)
    assert queue.flush_unschedulable() == 1
    assert queue.sizes()["active"] == 2


async def test_queue_events_respect_the_remaining_backoff() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(initial_backoff_seconds=2, max_backoff_seconds=8, clock=clock)
    queue.unschedulable("p")
    assert queue.move_all() == 1
    assert queue.sizes() == {"active": 0, "backoff": 1, "unschedulable": 0}
    await clock.tick(2.1)
    assert queue.sizes()["active"] == 1
    assert await queue.get() == "p"
    queue.done("p")
    assert queue.error("p") == 4  # second failure: doubled
    queue.shutdown()


def test_decision_prefers_the_best_total_then_the_lowest_name() -> None:
    nodes = [node_doc(n, cpu=8) for n in ("b", "a", "c")]
    nrts = [two_zone_nrt("a", (4, 4)), two_zone_nrt("b", (4, 4)), two_zone_nrt("c", (2, 4))]
    state = state_with(nodes, nrts)
    scheduler = StandaloneScheduler(InMemoryKube(), state, ClusterInformers(InMemoryKube(), state))
    decision = scheduler.decide(parse_pod(pod_doc("p", 2)))
    assert decision.node == "a"  # a and b tie (same data), c's zones are fuller
    assert decision.scores["a"] == decision.scores["b"] > decision.scores["c"]
    impossible = scheduler.decide(parse_pod(pod_doc("big", 6)))
    assert impossible.node is None
    assert impossible.message == "0/3 nodes are available: 3 cannot align container."


def test_a_flush_keeps_charging_pods_the_fingerprint_cannot_cover() -> None:
    """The NRT's fingerprint matches the node's Running pods; a pod still being bound (assumed) and one
    bound but not yet admitted (Pending) are in neither set, so the flush must not forget them."""
    nrt = two_zone_nrt("n", (4, 4), fingerprint=compute_fingerprint([("default", "running")]))
    state = state_with([node_doc("n")], [nrt], resync_period_seconds=1.0)
    cache = state.cache
    assert isinstance(cache, OverReserveCache)
    state.pod_upserted(None, bound_doc("running", "n", 1))
    binding = parse_pod(pod_doc("binding", 2))
    state.pod_upserted(None, pod_doc("binding", 2))
    assert state.assume(binding, "n")
    waiting = pod_doc("waiting", 1, scheduler="default-scheduler")
    state.pod_upserted(None, waiting)
    state.pod_upserted(waiting, bound_doc("waiting", "n", 1, scheduler="default-scheduler", phase="Pending"))
    state.evaluate(parse_pod(pod_doc("big", 4)))  # rejected: the node becomes a resync candidate
    assert state.tick(100.0) == ("n",)
    assert set(cache.assumed("n")) == {"default/binding", "default/waiting"}
    assert cache.get("n").fresh  # the foreign mark was cleared by the flush
    zones = cache.get("n").topology
    assert zones is not None and [str(z.available["cpu"]) for z in zones.zones] == ["1", "1"]


def test_unconstrained_pods_node_mask_is_kept_by_tolerations_until_a_node_changes() -> None:
    """The mask of a pod without node constraints is asked of the restricted nodes once per
    tolerations, and asked again after any Node change (a taint removed, a node cordoned or added)."""
    state = SchedulerState(SchedulerConfig())
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    for doc in (node_doc("a"), node_doc("b", taints=[taint]), node_doc("c", unschedulable=True)):
        state.node_upserted(doc)
    plain = parse_pod(pod_doc("plain"))
    tolerant_doc = pod_doc("tolerant")
    tolerant_doc["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    tolerant = parse_pod(tolerant_doc)

    def mask(pod: Pod) -> dict[str, bool]:
        return dict(zip(state.cycle.names, state.node_mask(pod).tolist(), strict=True))

    assert mask(plain) == {"a": True, "b": False, "c": False}
    assert mask(tolerant) == {"a": True, "b": True, "c": False}
    assert mask(plain) == {"a": True, "b": False, "c": False}  # kept: the same answer
    state.node_mask(plain)[:] = False  # a caller's copy: the kept mask is not changed through it
    assert mask(plain) == {"a": True, "b": False, "c": False}
    state.node_upserted(node_doc("b"))  # untainted
    state.node_upserted(node_doc("d", unschedulable=True))
    assert mask(plain) == {"a": True, "b": True, "c": False, "d": False}
    state.node_deleted(node_doc("c"))
    assert mask(tolerant) == {"a": True, "b": True, "d": False}

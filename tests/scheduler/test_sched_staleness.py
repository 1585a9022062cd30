"""Issue 23 item 3: an NRT whose exporter stopped rewriting it is neither trusted nor written off forever."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sched_helpers import node_doc, nrt_doc, pod_doc, zone_doc

from numaplane.exporter import publisher as exporter_publisher
from numaplane.placement.result import Reject
from numaplane.resources.pod import parse_pod
from numaplane.scheduler import staleness
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.state import SchedulerState


def beating_nrt(name: str, free: int, bound: str | None = "30") -> dict[str, Any]:
    doc = nrt_doc(name, [zone_doc(i, {"cpu": (4, free), "memory": ("8Gi", "8Gi")}) for i in (0, 1)])
    if bound is not None:
        doc["metadata"]["annotations"] = {staleness.STALE_AFTER_ANNOTATION: bound}
    return doc


@pytest.mark.parametrize("mode", ["passthrough", "overreserve"])
def test_a_node_whose_nrt_is_not_rewritten_within_its_bound_is_refused_then_trusted_again(mode: str) -> None:
    config = replace(SchedulerConfig(), cache_mode=mode, resync_period_seconds=5.0 if mode == "overreserve" else 0)
    state = SchedulerState(config)
    state.node_upserted(node_doc("n", cpu=8))
    state.nrt_upserted(beating_nrt("n", 4))
    pod = parse_pod(pod_doc("p", 2))
    state.tick(100.0)
    state.sync()
    assert state.evaluate(pod, ["n"]).scores.keys() == {"n"}
    state.tick(129.0)  # within the 30 s bound
    state.sync()
    assert state.evaluate(pod, ["n"]).scores.keys() == {"n"}
    state.tick(131.0)  # beyond it: the exporter is gone
    state.sync()
    ev = state.evaluate(pod, ["n"])
    assert ev.failed == ["n"]
    verdict = state.verdicts.explain(pod, "n")
    assert isinstance(verdict, Reject)
    assert any("is stale: not rewritten by its exporter for 31 s (bound 30 s)" in note for note in verdict.notes)
    assert state.gate.stale() == {"n": pytest.approx(31.0)}
    state.nrt_upserted(beating_nrt("n", 4))  # the exporter is back: trusted at once, no restart
    state.sync()
    assert state.evaluate(pod, ["n"]).scores.keys() == {"n"}
    assert state.gate.stale() == {}


def test_objects_without_a_bound_are_never_stale() -> None:
    state = SchedulerState(SchedulerConfig())
    state.node_upserted(node_doc("n", cpu=8))
    state.nrt_upserted(beating_nrt("n", 4, bound=None))
    state.tick(0.0)
    state.tick(10_000.0)
    state.sync()
    assert state.evaluate(parse_pod(pod_doc("p", 2)), ["n"]).scores.keys() == {"n"}


@pytest.mark.parametrize("text", ["", "0", "-5", "1.5", "x", "9" * 12])
def test_a_malformed_bound_is_no_bound(text: str) -> None:
    assert staleness.stale_after_seconds(beating_nrt("n", 1, bound=text)) is None


def test_a_huge_bound_is_capped_at_a_day() -> None:
    assert staleness.stale_after_seconds(beating_nrt("n", 1, bound="999999999")) == staleness.MAX_STALE_AFTER_SECONDS


def test_exporter_and_scheduler_agree_on_the_annotations() -> None:
    assert exporter_publisher.STALE_AFTER_ANNOTATION == staleness.STALE_AFTER_ANNOTATION
    assert exporter_publisher.HEARTBEAT_ANNOTATION == staleness.HEARTBEAT_ANNOTATION

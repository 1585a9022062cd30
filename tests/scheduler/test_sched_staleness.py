"""Issue 23 item 3: an NRT whose exporter stopped rewriting it is neither trusted nor written off forever."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sched_helpers import events_for, eventually, node_doc, nrt_doc, pod_doc, seed_crd, zone_doc

from numaplane.exporter import publisher as exporter_publisher
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.placement.model.result import Reject
from numaplane.resources.pod import parse_pod
from numaplane.scheduler import staleness
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.requeue import CONDITION_TYPE
from numaplane.scheduler.service import ExtenderService, SchedulerService
from numaplane.scheduler.state import SchedulerState
from numaplane.testing.fakeapi import FakeApiServer


def beating_nrt(name: str, free: int, bound: str | None = "30") -> dict[str, Any]:
    doc = nrt_doc(name, [zone_doc(i, {"cpu": (4, free), "memory": ("8Gi", "8Gi")}) for i in (0, 1)])
    if bound is not None:
        doc["metadata"]["annotations"] = {staleness.STALE_AFTER_ANNOTATION: bound}
    return doc


@pytest.mark.parametrize("mode", ["passthrough", "overreserve"])
def test_a_node_whose_nrt_is_not_rewritten_within_its_bound_is_refused_then_trusted_again(mode: str) -> None:
    config = SchedulerConfig().with_overrides(cache_mode=mode)  # the cache resyncs every 5 s when it is over-reserve
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


@pytest.mark.parametrize("mode", ["standalone", "extender"])
@pytest.mark.parametrize("how", ["rewritten", "deleted"])
async def test_a_pod_held_while_its_node_was_stale_is_scheduled_once_the_node_is_fresh_again(
    how: str, mode: str
) -> None:
    """Through the fake API server: a pod that arrives while the only node's NRT is stale is refused;
    the exporter's next write (same content, new heartbeat) — or the NRT's deletion, as the operator
    deletes those of nodes that left the stack — re-queues it at once, not after the unschedulable
    pool's flush (60 s here). Standalone: the pod is bound. Extender: the requeue signal (the pod
    condition kube-scheduler retries on) names the node. On the old main a deletion re-queued nothing."""
    config = SchedulerConfig().with_overrides(
        resync_period_seconds=0.1,
        backoff_initial_seconds=0.02,
        backoff_max_seconds=0.2,
        max_unschedulable_seconds=60.0,
    )
    async with FakeApiServer() as api:
        await seed_crd(api.store)
        await api.store.create(NODE, node_doc("n", cpu=8))
        nrt = beating_nrt("n", 4, bound="1")
        await api.store.create(NODE_RESOURCE_TOPOLOGY, nrt)
        service: SchedulerService | ExtenderService
        if mode == "standalone":
            service = SchedulerService(api.port_client(), config, metrics_address=None, health_address=None)
        else:
            service = ExtenderService(api.port_client(), config, address="127.0.0.1:0")
        task = asyncio.get_running_loop().create_task(service.run())
        try:

            async def ready() -> bool:
                return service.ready

            await eventually(ready, timeout=10)

            async def stale() -> bool:
                return "n" in service.state.gate.stale()

            await eventually(stale, timeout=5)  # no write for over 1 s: the exporter is gone
            if mode == "standalone":
                await api.store.create(POD, pod_doc("p", 2))

                async def refused() -> bool:
                    return bool(await events_for(api.store, "p", "FailedScheduling"))

                await eventually(refused, timeout=10)
            else:  # kube-scheduler asks the extender, which refuses the pod on its only node
                assert isinstance(service, ExtenderService)
                await api.store.create(POD, pod_doc("p", 2))

                async def known() -> bool:
                    return "default/p" in service.state.pods

                await eventually(known, timeout=10)
                pod = service.state.pods["default/p"]
                assert service.state.evaluate(pod, ["n"]).failed == ["n"]
                service.requeue.refused(pod)
            await asyncio.sleep(0.5)  # the pod now waits (the unschedulable pool, or kube-scheduler's)
            if how == "rewritten":  # the exporter is back (content unchanged, a new heartbeat)
                current = await api.store.get(NODE_RESOURCE_TOPOLOGY, "n")
                notes = current["metadata"]["annotations"]
                current["metadata"]["annotations"] = {**notes, "numaplane.io/heartbeat": "x"}
                await api.store.replace(NODE_RESOURCE_TOPOLOGY, current)
            else:
                await api.store.delete(NODE_RESOURCE_TOPOLOGY, "n")
            fresh = time.monotonic()

            async def retried() -> bool:
                pod = await api.store.get(POD, "p", namespace="default")
                if mode == "standalone":
                    return bool((pod.get("spec") or {}).get("nodeName"))
                conditions = (pod.get("status") or {}).get("conditions") or []
                return any(c["type"] == CONDITION_TYPE and "node n " in c["message"] for c in conditions)

            await eventually(retried, timeout=5)
            assert time.monotonic() - fresh < 5
        finally:
            service.stop()
            await asyncio.wait_for(task, 10)


def test_a_write_between_ticks_is_dated_by_the_next_tick_never_the_previous_one() -> None:
    """Found on the real control plane (heartbeat 1 s, bound 3 s): the scheduler called the node stale
    2.9 s after the exporter's last write — the write had been dated by the tick *before* it arrived."""
    state = SchedulerState(SchedulerConfig())
    state.node_upserted(node_doc("n", cpu=8))
    state.nrt_upserted(beating_nrt("n", 4, bound="3"))
    state.tick(100.0)
    state.nrt_upserted(beating_nrt("n", 4, bound="3"))  # the last write, received at ~100.9
    state.tick(101.0)
    state.tick(103.5)  # 2.6 s after the write: within the bound (the old code said 3.5 s, stale)
    assert state.gate.stale() == {}
    state.tick(104.5)
    assert state.gate.stale() == {"n": pytest.approx(3.5)}

"""RequeueSignal (extender mode): a pod the extender refused everywhere gets the condition that makes
kube-scheduler retry it once an NRT change makes it fit — and only then, and only pods of our profiles.
The real kube-scheduler's reaction is measured in ``tests/realkube/test_real_sched_requeue.py``."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from sched_helpers import GI, node_doc, nrt_doc, pod_doc, zone_doc

from numaplane.kube.clock import FakeClock
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import POD
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.requeue import CONDITION_TYPE, RequeueSignal
from numaplane.scheduler.state import SchedulerState


def _zones(free0: int, free1: int) -> list[dict[str, Any]]:
    return [
        zone_doc(0, {"cpu": (4, free0), "memory": (8 * GI, 8 * GI)}),
        zone_doc(1, {"cpu": (4, free1), "memory": (8 * GI, 8 * GI)}),
    ]


async def _setup(scheduler: str = "numa") -> tuple[InMemoryKube, SchedulerState, RequeueSignal, dict[str, Any]]:
    store = InMemoryKube()
    state = SchedulerState(SchedulerConfig(scheduler_names=("numa",), cache_mode="passthrough"))
    state.node_upserted(node_doc("n1", 8, "16Gi"))
    state.nrt_upserted(nrt_doc("n1", _zones(1, 1)))
    pod = await store.create(POD, pod_doc("waits", 3, scheduler=scheduler))
    state.pod_upserted(None, pod)
    return store, state, RequeueSignal(state, store, debounce_seconds=0), pod


def _condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == CONDITION_TYPE), None)


async def test_refused_pod_is_signalled_once_an_nrt_change_makes_it_fit() -> None:
    store, state, signal, doc = await _setup()
    pod = parse_pod(doc)
    signal.refused(pod)
    assert list(signal.waiting) == ["default/waits"]
    assert await signal.check() == 0  # still nowhere to go: nothing written
    assert _condition(await store.get(POD, "waits", namespace="default")) is None
    state.nrt_upserted(nrt_doc("n1", _zones(4, 1)))
    assert await signal.check() == 1
    condition = _condition(await store.get(POD, "waits", namespace="default"))
    assert condition is not None and condition["status"] == "True" and "n1" in condition["message"]
    assert not signal.waiting  # a later refusal registers it again
    assert await signal.check() == 0
    signal.refused(pod)
    assert await signal.check({"elsewhere"}) == 0  # only the changed nodes are evaluated
    assert await signal.check({"n1"}) == 1


async def test_changes_wake_the_loop_which_checks_only_the_changed_nodes() -> None:
    store, state, signal, doc = await _setup()
    signal.refused(parse_pod(doc))
    task = asyncio.get_running_loop().create_task(signal.run())
    try:
        freed = nrt_doc("n1", _zones(4, 1))
        state.nrt_upserted(freed)
        signal.object_changed(freed)
        deadline = time.monotonic() + 5
        while signal.signalled == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert signal.signalled == 1
        assert _condition(await store.get(POD, "waits", namespace="default")) is not None
    finally:
        task.cancel()


async def test_pods_of_other_schedulers_bound_or_gone_are_not_signalled() -> None:
    _, _, signal, doc = await _setup(scheduler="default-scheduler")
    signal.refused(parse_pod(doc))
    assert not signal.waiting
    _, core2, signal2, doc2 = await _setup()
    signal2.refused(parse_pod(doc2))
    core2.pod_deleted(doc2)
    core2.nrt_upserted(nrt_doc("n1", _zones(4, 4)))
    assert await signal2.check() == 0
    assert not signal2.waiting


async def test_the_signal_is_stamped_by_the_injected_clock_and_keeps_its_transition_time() -> None:
    store, state, _, doc = await _setup()
    clock = FakeClock(datetime(2030, 5, 1, tzinfo=UTC))
    signal = RequeueSignal(state, store, clock=clock, debounce_seconds=0)
    state.nrt_upserted(nrt_doc("n1", _zones(4, 1)))
    signal.refused(parse_pod(doc))
    assert await signal.check() == 1
    first = _condition(await store.get(POD, "waits", namespace="default"))
    assert first is not None
    assert first["lastProbeTime"] == first["lastTransitionTime"] == "2030-05-01T00:00:00Z"
    clock.advance(90)
    state.pod_upserted(None, await store.get(POD, "waits", namespace="default"))
    signal.refused(parse_pod(await store.get(POD, "waits", namespace="default")))
    assert await signal.check() == 1
    second = _condition(await store.get(POD, "waits", namespace="default"))
    assert second is not None
    assert second["lastProbeTime"] == "2030-05-01T00:01:30Z"
    assert second["lastTransitionTime"] == "2030-05-01T00:00:00Z"  # still True: no transition

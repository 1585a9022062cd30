"""The standalone scheduler's FailedScheduling events: a pod's identical repeats are aggregated into
one Event object (count, lastTimestamp) written at most every 30 s; a new message is a new Event."""

from __future__ import annotations

import asyncio

from sched_helpers import events_for, pod_doc

from numaplane.kube.clock import FakeClock
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.resources import POD
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.loop import EVENT_REPEAT_WRITE_SECONDS, StandaloneScheduler
from numaplane.scheduler.state import SchedulerState


async def _settle(scheduler: StandaloneScheduler) -> None:
    while scheduler._background:
        await asyncio.gather(*list(scheduler._background))


async def test_repeated_failed_scheduling_is_one_event_object() -> None:
    store = InMemoryKube()
    clock = FakeClock()
    state = SchedulerState(SchedulerConfig(scheduler_names=("numa",)))
    scheduler = StandaloneScheduler(store, state, ClusterInformers(store, state, clock=clock), clock=clock)
    pod = parse_pod(await store.create(POD, pod_doc("p", 3, scheduler="numa")))
    for _ in range(3):
        scheduler._post_event(pod, "FailedScheduling", "0/1 nodes are available: 1 cannot align container.", "Warning")
        await _settle(scheduler)
    events = await events_for(store, "p", "FailedScheduling")
    assert [e["count"] for e in events] == [1]  # repeats within the window: counted, not written
    clock.advance(EVENT_REPEAT_WRITE_SECONDS + 1)
    scheduler._post_event(pod, "FailedScheduling", "0/1 nodes are available: 1 cannot align container.", "Warning")
    await _settle(scheduler)
    events = await events_for(store, "p", "FailedScheduling")
    assert [e["count"] for e in events] == [4]
    assert events[0]["lastTimestamp"] != events[0]["firstTimestamp"]
    scheduler._post_event(pod, "FailedScheduling", "0/2 nodes are available: 2 cannot align container.", "Warning")
    await _settle(scheduler)
    assert len(await events_for(store, "p", "FailedScheduling")) == 2

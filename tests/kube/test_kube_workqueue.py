"""Work queue: dedup, one worker per item, delays, per-item exponential backoff, rate limits, shutdown."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from numaplane.kube.clock import FakeClock
from numaplane.kube.errors import QueueShutDown
from numaplane.kube.workqueue import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    WorkQueue,
    default_controller_rate_limiter,
)


async def test_dedup_and_fifo() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    for key in ["a", "b", "a", "c", "b"]:
        queue.add(key)
    assert len(queue) == 3
    assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]


async def test_item_added_while_processing_is_requeued_once_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add("a")
    item = await queue.get()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not handed out twice concurrently
    assert queue.processing == {"a"}
    queue.done(item)
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_workers_never_share_an_item() -> None:
    queue: WorkQueue[int] = WorkQueue(clock=FakeClock())
    active: set[int] = set()
    handled: list[int] = []

    async def worker() -> None:
        while True:
            try:
                item = await queue.get()
            except QueueShutDown:
                return
            assert item not in active
            active.add(item)
            await asyncio.sleep(0)
            if len(handled) < 30:
                queue.add(item % 3)  # re-add while processing
            handled.append(item)
            active.discard(item)
            queue.done(item)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for i in range(6):
        queue.add(i)
    while len(queue) or queue.processing:
        await asyncio.sleep(0)
    queue.shutdown()
    await asyncio.gather(*workers)
    assert set(handled) == set(range(6))


async def test_add_after_uses_the_clock_and_earliest_wins() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10.0)
    queue.add_after("a", 4.0)  # earlier: wins
    queue.add_after("a", 8.0)  # later: ignored
    queue.add_after("b", 6.0)
    assert queue.waiting == 2
    await clock.tick(3.9)
    assert len(queue) == 0
    await clock.tick(0.2)
    assert len(queue) == 1
    await clock.tick(2.0)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]
    await clock.tick(10.0)
    assert len(queue) == 0 and queue.waiting == 0
    queue.shutdown()


async def test_add_rate_limited_backs_off_exponentially_per_item() -> None:
    clock = FakeClock()
    limiter = ItemExponentialRateLimiter(base_delay_seconds=1.0, max_delay_seconds=8.0)
    queue: WorkQueue[str] = WorkQueue(clock=clock, rate_limiter=limiter)
    arrivals: list[float] = []
    for _ in range(5):
        queue.add_rate_limited("k")
        while not len(queue):
            await clock.tick(0.25)
        arrivals.append(clock.monotonic())
        assert await queue.get() == "k"
        queue.done("k")
    gaps = [arrivals[0]] + [b - a for a, b in itertools.pairwise(arrivals)]
    assert gaps == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert queue.num_requeues("k") == 5
    queue.forget("k")
    assert queue.num_requeues("k") == 0
    assert limiter.when("other") == 1.0  # per item
    queue.shutdown()


def test_bucket_and_max_of_limiters() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=2.0, burst=2, clock=clock)
    assert [bucket.when(i) for i in range(4)] == [0.0, 0.0, 0.5, 1.0]
    clock.advance(10.0)
    assert bucket.when("x") == 0.0
    combined = MaxOfRateLimiter(ItemExponentialRateLimiter(0.1, 1.0), BucketRateLimiter(1000.0, 1000, clock=clock))
    assert combined.when("a") == pytest.approx(0.1)
    assert combined.when("a") == pytest.approx(0.2)
    assert combined.num_requeues("a") == 2
    default = default_controller_rate_limiter(clock)
    assert default.when("z") == pytest.approx(0.005)


async def test_shutdown_wakes_getters() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shutdown()
    with pytest.raises(QueueShutDown):
        await getter
    queue.add("late")
    assert len(queue) == 0


async def test_real_clock_delay() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("soon", 0.05)
    item = await asyncio.wait_for(queue.get(), 2.0)
    assert item == "soon"
    queue.shutdown()

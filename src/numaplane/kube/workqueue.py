"""A rate-limited work queue with client-go's semantics, on asyncio and an injectable clock.

Invariants (as in client-go's ``workqueue``):

* an item is queued at most once: adding an item that is already waiting is a no-op (dedup);
* an item is handed to at most one worker at a time: adding an item while it is being processed
  marks it dirty, and :meth:`WorkQueue.done` re-queues it once;
* :meth:`WorkQueue.add_after` delays an item (the earliest requested time wins);
  :meth:`WorkQueue.add_rate_limited` delays it by the rate limiter's verdict, :meth:`WorkQueue.forget`
  resets the item's failure count.

The usual worker::

    while True:
        key = await queue.get()          # raises QueueShutDown after shutdown()
        try:
            await reconcile(key)
        except Exception:
            queue.add_rate_limited(key)  # retry with per-item exponential backoff
        else:
            queue.forget(key)
        finally:
            queue.done(key)

Rate limiters: :class:`ItemExponentialRateLimiter` (per item, ``base * 2**failures`` capped),
:class:`BucketRateLimiter` (overall token bucket), :class:`MaxOfRateLimiter` (the slowest verdict),
and :func:`default_controller_rate_limiter` (client-go's default: 5 ms..1000 s per item, 10 qps /
burst 100 overall). Times are seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.errors import QueueShutDown

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "WorkQueue",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)


class RateLimiter(Protocol):
    """Decides how long an item waits before it is retried."""

    def when(self, item: Hashable) -> float:
        """Seconds to wait before ``item`` is processed again (records a failure)."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item`` (after a success)."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        ...


class ItemExponentialRateLimiter:
    """``base_delay_seconds * 2**failures``, capped at ``max_delay_seconds``, per item."""

    def __init__(self, base_delay_seconds: float = 0.005, max_delay_seconds: float = 1000.0) -> None:
        self.base_delay_seconds = base_delay_seconds
        self.max_delay_seconds = max_delay_seconds
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        if failures > 62:  # 2**63 overflows any sensible delay
            return self.max_delay_seconds
        return min(self.base_delay_seconds * float(2**failures), self.max_delay_seconds)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket: ``qps`` tokens per second, at most ``burst`` stored."""

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError("qps and burst must be positive")
        self.qps = qps
        self.burst = burst
        self._clock = clock or SystemClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, item: Hashable) -> float:
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0  # reserve a token, possibly in the future
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of several limiters (every limiter records the failure)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("at least one rate limiter is needed")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go's ``DefaultControllerRateLimiter``: per-item 5 ms..1000 s, overall 10 qps / burst 100."""
    return MaxOfRateLimiter(ItemExponentialRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock=clock))


class WorkQueue(Generic[T]):
    """A deduplicating FIFO of keys with delayed and rate-limited adds (see the module docstring)."""

    def __init__(self, *, rate_limiter: RateLimiter | None = None, clock: Clock | None = None, name: str = "") -> None:
        self.name = name
        self.clock: Clock = clock or SystemClock()
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter(self.clock)
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        # Delayed items: a heap of (ready_at, seq, item); ``_ready_at`` holds each item's earliest time.
        self._heap: list[tuple[float, int, T]] = []
        self._ready_at: dict[T, float] = {}
        self._seq = itertools.count()
        self._delay_task: asyncio.Task[None] | None = None
        self._delay_wakeup = asyncio.Event()

    # ------------------------------------------------------------------ state

    def __len__(self) -> int:
        """Items waiting to be handed out (not counting delayed or in-process ones)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def processing(self) -> frozenset[T]:
        return frozenset(self._processing)

    @property
    def waiting(self) -> int:
        """Items delayed by :meth:`add_after` / :meth:`add_rate_limited` that are not due yet."""
        return len(self._ready_at)

    # ------------------------------------------------------------------ adding

    def add(self, item: T) -> None:
        """Queue ``item`` unless it is already queued; if it is being processed, queue it after ``done``."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake_one()

    def add_after(self, item: T, delay_seconds: float) -> None:
        """Queue ``item`` after ``delay_seconds`` (an earlier pending request for it wins)."""
        if self._shutting_down:
            return
        if delay_seconds <= 0:
            self.add(item)
            return
        ready = self.clock.monotonic() + delay_seconds
        current = self._ready_at.get(item)
        if current is not None and current <= ready:
            return
        self._ready_at[item] = ready
        heapq.heappush(self._heap, (ready, next(self._seq), item))
        self._ensure_delay_task()
        self._delay_wakeup.set()

    def add_rate_limited(self, item: T) -> None:
        """Queue ``item`` after the rate limiter's delay (per-item exponential backoff by default)."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Reset ``item``'s backoff (call after it was processed successfully)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)

    # ------------------------------------------------------------------ consuming

    async def get(self) -> T:
        """The next item; waits while the queue is empty. Raises :class:`QueueShutDown` after shutdown."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(f"work queue {self.name!r} is shut down")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the wake-up on to another getter
                raise
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def done(self, item: T) -> None:
        """Mark ``item`` processed; if it was added meanwhile, it is queued again now."""
        self._processing.discard(item)
        if item in self._dirty and not self._shutting_down:
            self._queue.append(item)
            self._wake_one()

    def shutdown(self) -> None:
        """Stop accepting items; waiting getters raise :class:`QueueShutDown` once the queue is drained."""
        self._shutting_down = True
        self._heap.clear()
        self._ready_at.clear()
        if self._delay_task is not None:
            self._delay_task.cancel()
            self._delay_task = None
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ internals

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _ensure_delay_task(self) -> None:
        if self._delay_task is None or self._delay_task.done():
            self._delay_task = asyncio.get_running_loop().create_task(self._delay_loop(), name=f"workqueue-{self.name}")

    async def _delay_loop(self) -> None:
        while not self._shutting_down:
            now = self.clock.monotonic()
            while self._heap and self._heap[0][0] <= now:
                ready, _, item = heapq.heappop(self._heap)
                if self._ready_at.get(item) != ready:
                    continue  # superseded by an earlier request
                del self._ready_at[item]
                self.add(item)
            if not self._heap:
                self._delay_wakeup.clear()
                await self._delay_wakeup.wait()
                continue
            self._delay_wakeup.clear()
            sleeper = asyncio.ensure_future(self.clock.sleep(self._heap[0][0] - now))
            waker = asyncio.ensure_future(self._delay_wakeup.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sleeper, waker):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

"""Injectable time for the Kubernetes runtime: a real clock and a manually driven fake.

Everything in ``numaplane.kube`` that waits, times out or stamps a time takes a :class:`Clock`, so
tests drive backoffs, lease renewals and timestamps deterministically with :class:`FakeClock`.
``monotonic()`` is for durations (seconds, arbitrary origin); ``now()`` is wall time (UTC, aware)
for timestamps written into objects.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = [
    "Clock",
    "FakeClock",
    "SystemClock",
    "format_micro_time",
    "format_time",
    "parse_time",
]


class Clock(Protocol):
    """Time source: monotonic seconds, wall-clock UTC and an awaitable sleep."""

    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock (``time.monotonic``, ``datetime.now(UTC)``, ``asyncio.sleep``)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told to.

    ``sleep`` parks the caller until :meth:`advance` / :meth:`tick` moves time past its deadline.
    ``tick`` is the usual test driver: it advances deadline by deadline and lets the event loop run
    woken tasks in between, so chains of sleeps (retry loops) progress as they would in real time.
    """

    def __init__(self, start: datetime | None = None, *, settle_iterations: int = 50) -> None:
        self._start = start or datetime(2025, 1, 1, tzinfo=UTC)
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._settle_iterations = settle_iterations

    def monotonic(self) -> float:
        return self._elapsed

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._seq), fut))
        await fut

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending sleeper's wake time (monotonic seconds), if any."""
        self._prune()
        return self._sleepers[0][0] if self._sleepers else None

    def _prune(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper that is due (they run at the next await)."""
        self._elapsed += max(0.0, seconds)
        self._wake_due()

    async def settle(self) -> None:
        """Let runnable tasks run until they block again (a bounded number of loop iterations)."""
        for _ in range(self._settle_iterations):
            await asyncio.sleep(0)

    async def tick(self, seconds: float) -> None:
        """Advance ``seconds``, stopping at each deadline on the way to let woken tasks run."""
        target = self._elapsed + max(0.0, seconds)
        await self.settle()
        while True:
            deadline = self.next_deadline
            if deadline is None or deadline > target:
                break
            self._elapsed = max(self._elapsed, deadline)
            self._wake_due()
            await self.settle()
        self._elapsed = target
        self._wake_due()
        await self.settle()


def format_time(moment: datetime) -> str:
    """Kubernetes ``Time``: RFC 3339 in UTC with second precision (``2025-01-01T00:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """Kubernetes ``MicroTime``: RFC 3339 in UTC with microseconds (``...T00:00:00.000000Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse a Kubernetes ``Time`` or ``MicroTime`` string into an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)

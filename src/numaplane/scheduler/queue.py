"""The scheduling queue: active pods, pods backing off, unschedulable pods (kube-scheduler's three queues).

Keys are ``namespace/name``. Rules (after kube-scheduler's ``PriorityQueue``, simplified to FIFO):

* a pending pod of ours that appears or changes is made *active* (a pod that is unschedulable keeps its
  backoff: it becomes active when the backoff ends);
* an attempt that finds no node makes the pod *unschedulable*: it waits for a cluster event that may
  help (:meth:`SchedulingQueue.move_all` — a node, NodeResourceTopology or cache change, a pod leaving a
  node) and then for the rest of its backoff; or, without any event, for
  ``max_unschedulable_seconds`` at most (:meth:`SchedulingQueue.flush_unschedulable`);
* an attempt that fails with an error (API failure) goes straight to *backoff*;
* backoff per pod is ``initial * 2**(attempts-1)`` capped at ``max`` seconds, reset by a successful bind
  (:meth:`SchedulingQueue.forget`).

Invariant: a key is in at most one of active / backoff (the work queue's delayed set) / unschedulable,
except transiently while a stale backoff entry re-adds a key that an event already activated (the
attempt then finds nothing to do). Times are monotonic seconds of the injected clock.
"""

from __future__ import annotations

from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.workqueue import ItemExponentialRateLimiter, WorkQueue

__all__ = ["SchedulingQueue"]


class SchedulingQueue:
    """Active / backoff / unschedulable pods (module docstring)."""

    def __init__(
        self,
        *,
        initial_backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 10.0,
        max_unschedulable_seconds: float = 60.0,
        clock: Clock | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.backoff = ItemExponentialRateLimiter(initial_backoff_seconds, max_backoff_seconds)
        self.active: WorkQueue[str] = WorkQueue(rate_limiter=self.backoff, clock=self.clock, name="scheduling")
        self.max_unschedulable_seconds = max_unschedulable_seconds
        self._unschedulable: dict[str, tuple[float, float]] = {}  # key → (backoff expiry, since)

    # --- sizes -------------------------------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        return {
            "active": len(self.active),
            "backoff": self.active.waiting,
            "unschedulable": len(self._unschedulable),
        }

    def is_unschedulable(self, key: str) -> bool:
        return key in self._unschedulable

    # --- transitions -------------------------------------------------------------------------------

    def add(self, key: str) -> None:
        """A pending pod appeared or changed: active now, or after its remaining backoff."""
        entry = self._unschedulable.pop(key, None)
        if entry is None:
            self.active.add(key)
        else:
            self.active.add_after(key, entry[0] - self.clock.monotonic())

    def unschedulable(self, key: str) -> float:
        """No node fits: park the pod; returns its backoff in seconds."""
        delay = self.backoff.when(key)
        now = self.clock.monotonic()
        self._unschedulable[key] = (now + delay, now)
        return delay

    def error(self, key: str) -> float:
        """The attempt failed (not a fit problem): retry after the backoff; returns it in seconds."""
        delay = self.backoff.when(key)
        self.active.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """The pod is bound or gone: reset its backoff and drop it from the unschedulable set."""
        self.backoff.forget(key)
        self._unschedulable.pop(key, None)

    def move_all(self) -> int:
        """A cluster event may help: every unschedulable pod becomes active after its backoff."""
        moved = list(self._unschedulable)
        for key in moved:
            self.add(key)
        return len(moved)

    def flush_unschedulable(self) -> int:
        """Activate pods unschedulable for longer than ``max_unschedulable_seconds``; how many."""
        now = self.clock.monotonic()
        stale = [k for k, (_, since) in self._unschedulable.items() if now - since >= self.max_unschedulable_seconds]
        for key in stale:
            self.add(key)
        return len(stale)

    async def get(self) -> str:
        return await self.active.get()

    def done(self, key: str) -> None:
        self.active.done(key)

    def shutdown(self) -> None:
        self.active.shutdown()

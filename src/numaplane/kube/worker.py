"""The controller worker loop, written once: take a key from a queue, handle it, mark it done.

Both the operator's reconcile workers and the scheduler's scheduling loop run it (as client-go's
``processNextWorkItem`` loop does). Invariants: every key taken is marked :meth:`~WorkSource.done`
exactly once, whatever the handler does (also when it is cancelled); a handler's ``Exception`` goes
to ``on_error`` (called inside the ``except`` block, so ``log.exception`` there logs the traceback)
and the loop goes on; the loop returns when the queue shuts down (:class:`~numaplane.kube.errors.QueueShutDown`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from numaplane.kube.errors import QueueShutDown

__all__ = ["WorkSource", "run_worker"]

K = TypeVar("K")


class WorkSource(Protocol[K]):
    """What the loop needs of a queue: :class:`~numaplane.kube.workqueue.WorkQueue` and the
    scheduler's scheduling queue both are one."""

    async def get(self) -> K: ...

    def done(self, item: K) -> None: ...


async def run_worker(
    queue: WorkSource[K], handle: Callable[[K], Awaitable[object]], on_error: Callable[[K, Exception], None]
) -> None:
    """Handle keys of ``queue`` one at a time until it shuts down (see the module docstring)."""
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            await handle(key)
        except Exception as exc:
            on_error(key, exc)
        finally:
            queue.done(key)

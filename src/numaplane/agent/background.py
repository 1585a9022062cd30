"""One background loop per component: start it once, cancel it and wait for it on stop.

The agent's checkpoint writer, policy reporter, config watcher and NRI update sender each run a single
``_run`` coroutine for their lifetime; :class:`BackgroundLoop` holds that task. Invariant: at most one
live task per instance; :meth:`BackgroundLoop.stop` returns only once the task has finished.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import ClassVar

__all__ = ["BackgroundLoop", "cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has finished; its cancellation is not re-raised."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class BackgroundLoop:
    """Mixin: :meth:`start` runs :meth:`_run` in a task named :attr:`task_name` (idempotent while it
    runs), :meth:`stop` cancels it and waits."""

    task_name: ClassVar[str]
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        raise NotImplementedError

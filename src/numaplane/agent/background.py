"""One background loop per component: start it once, cancel it and wait for it on stop.

The agent's checkpoint writer, policy reporter, waiting reporter, config watcher and NRI update sender
each run a single ``_run`` coroutine for their lifetime; :class:`BackgroundLoop` holds that task — in
the agent a child of its :class:`~numaplane.supervisor.Supervisor` (``start(tasks)``), elsewhere (tests)
a plain task. Invariant: at most one live task per instance; :meth:`BackgroundLoop.stop` returns only
once the task has finished.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import ClassVar

import structlog

from numaplane.supervisor import Supervisor

log = structlog.get_logger("numaplane.agent")

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

    #: Called with the task name whenever :meth:`_run` dies of an exception (metrics); the loop is then
    #: restarted after :attr:`restart_seconds` (doubling up to a minute while it keeps dying).
    on_crash: Callable[[str], None] | None = None
    restart_seconds: float = 0.5
    crashes: int = 0

    def start(self, tasks: Supervisor | None = None) -> None:
        """Run the loop (idempotent while it runs): as child :attr:`task_name` of ``tasks``, or a plain task."""
        if self._task is not None and not self._task.done():
            return
        if tasks is not None:
            self._task = tasks.spawn(self._supervise(), self.task_name)
        else:
            self._task = asyncio.get_running_loop().create_task(self._supervise(), name=self.task_name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _supervise(self) -> None:
        """Run :meth:`_run`; a crash is logged, counted and followed by a restart (never silent)."""
        delay = self.restart_seconds
        while True:
            try:
                await self._run()
                return
            except Exception:
                self.crashes += 1
                log.exception("background task died; restarting it", task=self.task_name, crashes=self.crashes)
                if self.on_crash is not None:
                    self.on_crash(self.task_name)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 60.0)

    async def _run(self) -> None:
        raise NotImplementedError

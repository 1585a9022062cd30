"""One task supervisor for every daemon: named child tasks in an :class:`asyncio.TaskGroup`.

A daemon (exporter, scheduler, operator, agent) runs a few long-lived tasks — informers, loops, a
probe server's helpers. :class:`Supervisor` owns them with the TaskGroup's rules:

* **error propagation** — the first child that raises stops the daemon: the group cancels every
  other child, the supervisor logs one line (``task_failed``: daemon, task, error) and
  :meth:`Supervisor.wait` raises :class:`TaskFailed` naming the task, chained to its exception;
* **shutdown** — :meth:`Supervisor.stop` (safe from a signal handler on the loop) makes
  :meth:`~Supervisor.wait` return; :meth:`~Supervisor.close` cancels every child still running and
  waits for all of them, so no task is left behind (also when the caller is itself cancelled);
* a child that returns normally just ends (the others go on); :meth:`~Supervisor.dead` lists the
  children that are no longer running, for liveness probes.

Use it as ``async with Supervisor("exporter") as tasks: tasks.spawn(coro, "loop"); await tasks.wait()``,
or call :meth:`~Supervisor.start` / :meth:`~Supervisor.close` from a daemon's own start and close.
Children must be started from the supervisor's event loop (:meth:`~Supervisor.spawn` is synchronous).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Self

__all__ = ["Supervisor", "TaskFailed"]

log = logging.getLogger(__name__)


class TaskFailed(Exception):
    """A supervised task raised: ``task`` is its name, the cause is its exception."""

    def __init__(self, daemon: str, task: str, error: BaseException) -> None:
        super().__init__(f"{daemon}: task {task!r} failed: {type(error).__name__}: {error}")
        self.daemon = daemon
        self.task = task
        self.error = error


class Supervisor:
    """Named child tasks of one daemon in a TaskGroup (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failure: TaskFailed | None = None
        self._children: dict[str, asyncio.Task[Any]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._runner: asyncio.Task[None] | None = None
        self._opened = asyncio.Event()
        self._stopping = asyncio.Event()
        self._ended = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the group (idempotent); children can be spawned once this returns."""
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run(), name=f"{self.name}-supervisor")
        await self._opened.wait()

    async def _run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                self._opened.set()
                await self._stopping.wait()
                for task in self._children.values():
                    task.cancel()
        except BaseExceptionGroup:
            failed = next(
                ((n, t) for n, t in self._children.items() if t.done() and not t.cancelled() and t.exception()),
                None,
            )
            if failed is None:
                raise
            name, task = failed
            error = task.exception()
            assert error is not None
            self.failure = TaskFailed(self.name, name, error)
            self.failure.__cause__ = error
            log.error("task_failed: daemon=%s task=%s error=%r; stopping every task", self.name, name, error)
        finally:
            self._group = None
            self._opened.set()  # a start() racing with an early end must not hang
            self._ended.set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as child ``name`` (names are unique); ``RuntimeError`` when the group is not open."""
        if self._group is None or self._stopping.is_set():
            coro.close()
            raise RuntimeError(f"{self.name}: cannot start task {name!r}: the supervisor is not running")
        if name in self._children and not self._children[name].done():
            coro.close()
            raise ValueError(f"{self.name}: task {name!r} is already running")
        task = self._group.create_task(coro, name=f"{self.name}-{name}")
        self._children[name] = task
        return task

    def stop(self) -> None:
        """Ask :meth:`wait` to return (safe from a signal handler on the loop)."""
        self._stopping.set()

    async def wait(self) -> None:
        """Until :meth:`stop` or a failing child; then every child is finished. Raises :class:`TaskFailed`."""
        if self._runner is None:
            return
        await asyncio.shield(self._runner)
        if self.failure is not None:
            raise self.failure

    async def close(self) -> None:
        """Cancel every child still running and wait for all of them (a child's failure is not raised)."""
        self._stopping.set()
        runner = self._runner
        if runner is None:
            return
        try:
            await asyncio.shield(runner)
        except asyncio.CancelledError:
            await runner  # the caller was cancelled: still leave no task behind, then go on cancelling
            raise

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ introspection

    @property
    def running(self) -> bool:
        """True while the group is open (between :meth:`start` and the end of :meth:`wait`)."""
        return self._group is not None

    def names(self) -> list[str]:
        """Every child spawned so far, sorted."""
        return sorted(self._children)

    def dead(self) -> dict[str, str]:
        """Children no longer running: ``returned``, ``cancelled`` or ``failed: <error>``."""
        out = {}
        for name, task in sorted(self._children.items()):
            if not task.done():
                continue
            if task.cancelled():
                out[name] = "cancelled"
            elif task.exception() is not None:
                out[name] = f"failed: {task.exception()!r}"
            else:
                out[name] = "returned"
        return out

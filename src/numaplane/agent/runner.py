"""Serialised calls into the agent's state machine, and the container updates owed to the runtime.

:class:`StateRunner` runs every call into :class:`~numaplane.agent.state.NodeAgentState` inline on the
event loop (the state machine does no I/O), answering the admissions it parks through
:class:`~numaplane.agent.asking.Answering`; :class:`UpdateSender` keeps the cpuset changes owed to
running containers and delivers them — in the answers the runtime asks for (:meth:`UpdateSender.take`),
or, only on a runtime where that cannot deadlock it (:mod:`numaplane.nri.runtimes`), with
``Runtime.UpdateContainers`` off the request path (``NRIPlugin.update_containers``, which takes the
same values).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import structlog

from numaplane.agent.asking import Answering
from numaplane.agent.background import BackgroundLoop
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.records import Pending
from numaplane.agent.state import CpusetUpdate, NodeAgentState
from numaplane.nri.errors import CallTimeout, ConnectionClosed, NRIError, StatusError

__all__ = ["Sender", "StateRunner", "UpdateSender"]

log = structlog.get_logger("numaplane.agent")

_T = TypeVar("_T")

#: ``NRIPlugin.update_containers``-shaped: send the updates, return the ids of the containers whose update failed.
Sender = Callable[[list[CpusetUpdate]], Awaitable[list[str]]]


class StateRunner:
    """Runs state-machine calls inline on the event loop, answering the admissions they park (``asking.py``).

    Invariant: a call runs to completion without awaiting, so at most one call is inside the state machine
    at any time; admissions interleave only while their out-of-process plugins are asked.
    """

    def __init__(self, state: NodeAgentState) -> None:
        self.state = state
        self.answering = Answering(state)

    async def call(self, fn: Callable[[], _T | Pending[_T]]) -> _T:
        """``fn()`` (a call into the state machine); an admission it parks is answered and resumed."""
        return await self.answering.call(fn)


class UpdateSender(BackgroundLoop):
    """The container updates owed to the runtime, and how they get there.

    Submitted containers are owed their *current* desired cpuset at delivery time (not a stale value
    from submission). Two ways out:

    * :meth:`take` (always): the handler puts the owed updates into the ``update`` list of the answer
      it is writing (CreateContainer, UpdateContainer, StopContainer); the runtime applies them inside
      that event, under the locks it already holds, so this never deadlocks it;
    * with :attr:`unsolicited` (set per session, only for a runtime whose NRI has the fix, see
      :mod:`numaplane.nri.runtimes`): a background loop sends them with ``Runtime.UpdateContainers``,
      ``chunk`` containers per call, yielding to the event loop between calls; after a send, containers
      whose desired cpuset changed while the call was in flight are sent again. Without a connection
      the updates are dropped: the next Synchronize re-checks every container.
    """

    task_name = "nri-update-sender"

    def __init__(self, runner: StateRunner, metrics: AgentMetrics | None = None, *, chunk: int = 128) -> None:
        self.runner = runner
        self.metrics = metrics
        self.chunk = chunk
        self.sender: Sender | None = None
        self.unsolicited = False  # may Runtime.UpdateContainers be called (see the class docstring)
        self.sent = 0
        self.problems = 0  # updates the runtime refused or that could not be sent
        self._pending: dict[str, str] = {}  # container id → path label
        self._shared = ""  # path label when every stale shared container must be sent
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def owed(self) -> int:
        """Containers owed an update (the stale shared ones counted once they are listed)."""
        return len(self._pending) + (1 if self._shared else 0)

    def submit(self, container_ids: Iterable[str], path: str = "async") -> None:
        for cid in container_ids:
            self._pending[cid] = path
        if self._pending:
            self._kick()

    def submit_shared(self, path: str = "async") -> None:
        """Owe the current pool to every shared container that does not have it yet."""
        self._shared = path
        self._kick()

    def _kick(self) -> None:
        if self.unsolicited:
            self._idle.clear()
            self._wake.set()

    def allow_unsolicited(self, allowed: bool) -> None:
        """Set :attr:`unsolicited` for this session; owed updates go out at once when allowed."""
        self.unsolicited = allowed
        if allowed and (self._pending or self._shared):
            self._kick()

    def forget(self) -> None:
        """Drop what is owed (a Synchronize re-checked every container against the runtime's view)."""
        self._pending.clear()
        self._shared = ""

    def take(self, limit: int, exclude: Iterable[str] = ()) -> list[CpusetUpdate]:
        """At most ``limit`` owed updates for an answer (not ``exclude``: e.g. the container being
        created, which the runtime refuses to update in its own creation); the rest stay owed.
        Synchronous: call it between state-machine calls, never across an ``await``."""
        state = self.runner.state
        if self._shared:
            path, self._shared = self._shared, ""
            for cid in state.stale_shared():
                self._pending.setdefault(cid, path)
        skip = set(exclude)
        out: list[CpusetUpdate] = []
        paths: dict[str, int] = {}
        for cid in list(self._pending):
            if len(out) >= limit:
                break
            if cid in skip:
                continue
            path = self._pending.pop(cid)
            update = state.update_for(cid)
            if update is not None:
                out.append(update)
                paths[path] = paths.get(path, 0) + 1
        if self.metrics is not None:
            for path, n in paths.items():
                self.metrics.container_updates.labels(path=path, result="in-reply").inc(n)
        return out

    async def wait_idle(self, timeout_seconds: float = 5.0) -> None:
        async with asyncio.timeout(timeout_seconds):
            await self._idle.wait()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, {}
            if self._shared:
                path, self._shared = self._shared, ""
                for cid in await self.runner.call(self.runner.state.stale_shared):
                    batch.setdefault(cid, path)
            items = list(batch.items())
            for start in range(0, len(items), self.chunk):
                try:
                    await self._send(dict(items[start : start + self.chunk]))
                except Exception as exc:  # never let the sender die
                    log.error("sending container updates failed", error=str(exc))
                await asyncio.sleep(0)  # let requests in between chunks
            if not self._pending or not self.unsolicited:
                self._idle.set()

    def _desired(self, ids: list[str]) -> list[CpusetUpdate]:
        state = self.runner.state
        return [u for u in (state.update_for(cid) for cid in ids) if u is not None]

    async def _send(self, batch: dict[str, str]) -> None:
        if not batch:
            return
        updates = await self.runner.call(lambda: self._desired(list(batch)))
        if not updates:
            return
        if self.sender is None or not self.unsolicited:
            self._count(batch, "unsent", len(updates))
            return
        if self.metrics is not None:
            self.metrics.unsolicited_calls.inc()
        try:
            failed = await self.sender(updates)
        except (ConnectionClosed, CallTimeout, StatusError, NRIError) as exc:
            log.info("container updates not sent; the next Synchronize re-checks", error=str(exc), count=len(updates))
            self._count(batch, "unsent", len(updates))
            return
        self.sent += len(updates) - len(failed)
        self._count(batch, "failed", len(failed))
        self._count(batch, "ok", len(updates) - len(failed))
        sent = {u.container_id: u for u in updates}

        def changed() -> list[str]:
            state = self.runner.state
            out = []
            for cid, u in sent.items():
                record = state.record_for(cid)
                if record is not None and state.desired(record) != (u.cpus, u.mems):
                    out.append(cid)
            return out

        again = await self.runner.call(changed)
        if again:
            self.submit(again)

    def _count(self, batch: dict[str, str], result: str, n: int) -> None:
        if result != "ok":
            self.problems += n
        if self.metrics is not None and n:
            path = next(iter(batch.values()))
            self.metrics.container_updates.labels(path=path, result=result).inc(n)

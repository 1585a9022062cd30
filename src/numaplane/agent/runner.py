"""Serialised calls into the agent's state machine, and container updates sent in the background.

:class:`StateRunner` runs every call into :class:`~numaplane.agent.state.NodeAgentState` inline on the
event loop (the state machine does no I/O), answering the admissions it parks through
:class:`~numaplane.agent.asking.Answering`; :class:`UpdateSender` sends cpuset changes to the runtime
with ``Runtime.UpdateContainers`` off the request path (translated by :mod:`numaplane.nri.translate`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import structlog

from numaplane.agent.asking import Answering
from numaplane.agent.background import BackgroundLoop
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.state import CpusetUpdate, NodeAgentState
from numaplane.nri.errors import CallTimeout, ConnectionClosed, NRIError, StatusError
from numaplane.nri.proto import api_pb2
from numaplane.nri.translate import update_to_pb

__all__ = ["Sender", "StateRunner", "UpdateSender"]

log = structlog.get_logger("numaplane.agent")

_T = TypeVar("_T")

#: ``NRIPlugin.update_containers``-shaped.
Sender = Callable[[list[api_pb2.ContainerUpdate]], Awaitable[list[api_pb2.ContainerUpdate]]]


class StateRunner:
    """Runs state-machine calls inline on the event loop, answering the admissions they park (``asking.py``).

    Invariant: a call runs to completion without awaiting, so at most one call is inside the state machine
    at any time; admissions interleave only while their out-of-process plugins are asked.
    """

    def __init__(self, state: NodeAgentState) -> None:
        self.state = state
        self.answering = Answering(state)

    async def call(self, fn: Callable[[], _T]) -> _T:
        return await self.answering.call(fn)


class UpdateSender(BackgroundLoop):
    """Sends container updates with ``Runtime.UpdateContainers`` in the background.

    Submitted containers are sent their *current* desired cpuset at send time (not a stale value
    from submission), ``chunk`` containers per call, yielding to the event loop between calls. After
    a send, containers whose desired cpuset changed while the call was in flight are sent again.
    Without a connection the updates are dropped: the next Synchronize re-checks every container.
    """

    task_name = "nri-update-sender"

    def __init__(self, runner: StateRunner, metrics: AgentMetrics | None = None, *, chunk: int = 128) -> None:
        self.runner = runner
        self.metrics = metrics
        self.chunk = chunk
        self.sender: Sender | None = None
        self.sent = 0
        self.problems = 0  # updates the runtime refused or that could not be sent
        self._pending: dict[str, str] = {}  # container id → path label
        self._shared = ""  # path label when every stale shared container must be sent
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def submit(self, container_ids: Iterable[str], path: str = "async") -> None:
        for cid in container_ids:
            self._pending[cid] = path
        if self._pending:
            self._idle.clear()
            self._wake.set()

    def submit_shared(self, path: str = "async") -> None:
        """Send the current pool to every shared container that does not have it yet."""
        self._shared = path
        self._idle.clear()
        self._wake.set()

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
            if not self._pending:
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
        if self.sender is None:
            self._count(batch, "unsent", len(updates))
            return
        try:
            failed = await self.sender([update_to_pb(u) for u in updates])
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

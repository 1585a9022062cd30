"""Containers that wait in the shared pool for resources, made visible on their pods (issue 25 item 16).

A Guaranteed container created while the agent was down runs unpinned; if Synchronize cannot admit it
(its CPUs were taken meanwhile) it keeps running in the shared pool and waits
(``NodeAgentState.waiting``) until a release makes room. :class:`WaitingReporter` turns that into
Events on the container's pod, which ``kubectl describe pod`` shows:

* ``Warning`` :data:`WAITING_REASON` — ``container <name> is not pinned: it runs in the shared pool
  until resources free up (<Reason>: <message>)``, once per container and agent process;
* ``Normal`` :data:`PINNED_REASON` — ``container <name> is pinned to CPUs <cpus>`` when it got them.

:meth:`WaitingReporter.follow` compares the state's waiting containers with the last call's (the
handler calls it after every state change: a dict diff, no I/O); Events are posted by a background
loop, best effort (an API error is logged and the Event dropped). Needs ``create`` on ``events`` in
every namespace (the agent's ClusterRole grants it). Without API access the agent only logs the wait
and counts it (``numaplane_agent_unpinned_containers``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog

from numaplane.agent.background import BackgroundLoop
from numaplane.agent.records import ContainerRecord
from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.errors import KubeError
from numaplane.kube.events import make_event
from numaplane.kube.port import KubePort

__all__ = ["PINNED_REASON", "WAITING_REASON", "WaitingReporter"]

log = structlog.get_logger("numaplane.agent")

WAITING_REASON: Final = "NumaplaneNotPinned"
PINNED_REASON: Final = "NumaplanePinned"


@dataclass(frozen=True, slots=True)
class _Note:
    pod: str
    namespace: str
    uid: str
    reason: str
    message: str
    warning: bool


class WaitingReporter(BackgroundLoop):
    """Events for containers that start or stop waiting (see the module docstring)."""

    task_name = "waiting-reporter"

    def __init__(self, kube: KubePort, *, clock: Clock | None = None, host: str = "") -> None:
        self.kube = kube
        self.clock = clock or SystemClock()
        self.host = host
        self.posted = 0
        self._known: set[str] = set()
        self._queue: asyncio.Queue[_Note] = asyncio.Queue(maxsize=1024)

    def follow(self, waiting: Mapping[str, Any], records: Mapping[str, ContainerRecord]) -> None:
        """Queue Events for the containers that began waiting or were pinned since the last call."""
        now = set(waiting)
        for cid in sorted(now - self._known):
            record = records.get(cid)
            if record is not None:
                why = record.error or "resources are short"
                self._note(
                    record,
                    WAITING_REASON,
                    f"container {record.name} is not pinned: it runs in the shared pool until resources free up ({why})",
                    warning=True,
                )
        for cid in sorted(self._known - now):
            record = records.get(cid)
            if record is not None and record.exclusive is not None:
                self._note(
                    record, PINNED_REASON, f"container {record.name} is pinned to CPUs {record.exclusive.format()}"
                )
        self._known = now

    def _note(self, record: ContainerRecord, reason: str, message: str, *, warning: bool = False) -> None:
        if not record.pod_name or not record.namespace:
            return  # a sandbox the runtime did not name: no pod to put it on
        note = _Note(record.pod_name, record.namespace, record.pod_uid, reason, message, warning)
        try:
            self._queue.put_nowait(note)
        except asyncio.QueueFull:
            log.info("too many pod events queued; dropped one", pod=f"{note.namespace}/{note.pod}", reason=reason)

    async def _run(self) -> None:
        while True:
            note = await self._queue.get()
            metadata: dict[str, Any] = {"name": note.pod, "namespace": note.namespace}
            if note.uid:
                metadata["uid"] = note.uid
            event = make_event(
                {"apiVersion": "v1", "kind": "Pod", "metadata": metadata},
                reason=note.reason,
                message=note.message[:1024],
                now=self.clock.now(),
                event_type="Warning" if note.warning else "Normal",
                component="numaplane-agent",
                host=self.host or None,
            )
            try:
                await self.kube.create_event(event)
            except KubeError as exc:
                log.info("cannot post a pod event", pod=f"{note.namespace}/{note.pod}", error=str(exc))
            else:
                self.posted += 1

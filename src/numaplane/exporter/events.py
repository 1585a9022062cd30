"""Refresh events: what makes the exporter scan, and how bursts are limited.

:class:`EventGate` sits between the event sources and the refresh loop:

* sources :meth:`~EventGate.post` a :class:`Trigger` at any time (never blocks, never fails);
* the loop awaits :meth:`~EventGate.next`, which returns a :class:`Batch` of every trigger posted
  since the previous batch, with the time of the earliest one (for the event-to-published latency);
* batches are rate limited by a token bucket (``max_per_second`` tokens per second, ``burst``
  tokens at most; 0 = unlimited). Unlike the upstream exporter, which drops events beyond its
  buffer, excess events are *coalesced*: an event posted during a wait or a scan is folded into the
  next batch, so the last event of a burst always causes a scan that reads the state after it —
  no later than ``1 / max_per_second`` seconds after the previous scan started.

Sources: :func:`periodic` posts :attr:`Trigger.PERIODIC` every ``period_seconds``;
:class:`NotifyFileWatcher` posts :attr:`Trigger.REACTIVE` when the notify file is written, touched,
replaced or created. It uses inotify through ``asyncinotify`` (on the file's directory, so that
replacing the file works) when that library is installed and the kernel allows it, and otherwise
polls ``(mtime, ctime, size, inode)`` every ``poll_seconds``.

Times are ``time.monotonic()`` seconds (the running loop's clock).
"""

from __future__ import annotations

import asyncio
import enum
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.options import NotifyBackend

__all__ = ["Batch", "EventGate", "NotifyFileWatcher", "Trigger", "inotify_available", "periodic"]


class Trigger(enum.StrEnum):
    """Why a scan runs (also the ``trigger`` metric label)."""

    INITIAL = "initial"  # start-up
    PERIODIC = "periodic"  # the refresh timer (also re-reads sysfs and the kubelet config)
    REACTIVE = "reactive"  # the notify file
    POD_PHASE = "pod-phase"  # a pod of the node became Succeeded or Failed
    OBJECT = "object"  # our object was deleted or changed on the server
    RETRY = "retry"  # back-off after a failed cycle


#: When several triggers are folded into a batch, the label is the first of these present.
_PRIORITY = (
    Trigger.REACTIVE,
    Trigger.POD_PHASE,
    Trigger.OBJECT,
    Trigger.INITIAL,
    Trigger.RETRY,
    Trigger.PERIODIC,
)


@dataclass(frozen=True, slots=True)
class Batch:
    """Triggers folded into one scan; ``first_at`` is the monotonic time of the earliest."""

    triggers: frozenset[Trigger]
    first_at: float

    @property
    def trigger(self) -> Trigger:
        """The representative trigger (see ``_PRIORITY``)."""
        for candidate in _PRIORITY:
            if candidate in self.triggers:
                return candidate
        raise ValueError("empty batch")  # pragma: no cover - batches are never empty

    @property
    def refresh(self) -> bool:
        """Whether the slow inputs (sysfs, kubelet config) should be re-read."""
        return bool(self.triggers & {Trigger.INITIAL, Trigger.PERIODIC})

    @property
    def update_kind(self) -> str:
        """RTE's ``k8stopoawareschedwg/rte-update`` value: ``periodic`` for timer-only batches, else ``reactive``."""
        return "periodic" if self.triggers <= {Trigger.PERIODIC, Trigger.INITIAL, Trigger.RETRY} else "reactive"


class EventGate:
    """Coalescing, rate-limited hand-over of triggers to the refresh loop (see the module docstring)."""

    def __init__(
        self, max_per_second: float = 0.0, burst: int = 1, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_per_second < 0 or burst < 1:
            raise ValueError("max_per_second must be >= 0 and burst >= 1")
        self.max_per_second = max_per_second
        self.burst = burst
        self._clock = clock
        self._pending: dict[Trigger, float] = {}
        self._wake = asyncio.Event()
        self._tokens = float(burst)
        self._stamp = clock()
        self.posted = 0
        self.coalesced = 0
        self.on_post: Callable[[Trigger, bool], None] | None = None

    def post(self, trigger: Trigger) -> None:
        """Record ``trigger`` for the next batch (folded into it if one is already pending)."""
        folded = bool(self._pending)
        self._pending.setdefault(trigger, self._clock())
        self.posted += 1
        if folded:
            self.coalesced += 1
        self._wake.set()
        if self.on_post is not None:
            self.on_post(trigger, folded)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.max_per_second)
        self._stamp = now

    async def next(self) -> Batch:
        """The next batch; waits for a trigger, then for a token."""
        while not self._pending:
            self._wake.clear()
            await self._wake.wait()
        if self.max_per_second > 0:
            self._refill()
            while self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.max_per_second)
                self._refill()
            self._tokens -= 1.0
        batch = Batch(frozenset(self._pending), min(self._pending.values()))
        self._pending.clear()
        self._wake.clear()
        return batch


async def periodic(gate: EventGate, period_seconds: float) -> None:
    """Post :attr:`Trigger.PERIODIC` every ``period_seconds`` (runs until cancelled)."""
    while True:
        await asyncio.sleep(period_seconds)
        gate.post(Trigger.PERIODIC)


def inotify_available() -> bool:
    """Whether ``asyncinotify`` can be imported (the kernel may still refuse; see the watcher)."""
    try:
        import asyncinotify  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


class NotifyFileWatcher:
    """Calls ``on_event()`` when the notify file is written, touched, replaced or created.

    :meth:`prepare` creates the file's folder (mode 0750) and an empty file if missing, and refuses
    a path that exists but is not a regular file (:class:`ExporterConfigError`), as upstream.
    ``backend`` is the backend actually used after :meth:`run` started (``inotify`` or ``poll``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        on_event: Callable[[], None],
        *,
        backend: NotifyBackend = NotifyBackend.AUTO,
        poll_seconds: float = 0.05,
    ) -> None:
        self.path = Path(path)
        self._on_event = on_event
        self.requested = backend
        self.backend: str = ""
        self.poll_seconds = poll_seconds
        self.started = asyncio.Event()
        self._log = structlog.get_logger("numaplane.exporter")

    def prepare(self) -> None:
        try:
            self.path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            if self.path.exists() or self.path.is_symlink():
                if not self.path.is_file():
                    raise ExporterConfigError(f"notify file {self.path} exists and is not a regular file")
            else:
                self.path.touch(mode=0o640)
        except OSError as error:
            raise ExporterConfigError(f"notify file {self.path}: {error}") from error

    async def run(self) -> None:
        """Watch until cancelled."""
        self.prepare()
        if self.requested is not NotifyBackend.POLL:
            try:
                await self._run_inotify()
                return
            except (ImportError, OSError) as error:
                if self.requested is NotifyBackend.INOTIFY:
                    raise ExporterConfigError(f"inotify unavailable for {self.path}: {error}") from error
                self._log.warning("notify_inotify_unavailable", path=str(self.path), error=str(error), fallback="poll")
        await self._run_poll()

    async def _run_inotify(self) -> None:
        from asyncinotify import Inotify, Mask  # type: ignore[import-not-found, unused-ignore]

        mask = Mask.CLOSE_WRITE | Mask.ATTRIB | Mask.MOVED_TO | Mask.CREATE | Mask.MODIFY
        with Inotify() as inotify:
            inotify.add_watch(self.path.parent, mask | Mask.ONLYDIR)
            self.backend = "inotify"
            self.started.set()
            name = self.path.name
            async for event in inotify:
                if event.name is not None and str(event.name) == name:
                    self._on_event()
                elif Mask.IGNORED in event.mask or Mask.DELETE_SELF in event.mask:
                    raise OSError(f"the folder of {self.path} went away")

    def _signature(self) -> tuple[int, int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)

    async def _run_poll(self) -> None:
        self.backend = "poll"
        last = self._signature()
        self.started.set()
        while True:
            await asyncio.sleep(self.poll_seconds)
            now = self._signature()
            if now != last and now is not None:
                self._on_event()
            last = now

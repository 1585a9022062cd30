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
replaced or created; :class:`KubeletWatcher` posts :attr:`Trigger.KUBELET_STATE` when the kubelet
rewrites the checkpoint of one of its managers (it does so on every exclusive allocation and
release) and :attr:`Trigger.KUBELET_CONFIG` when its configuration file changes; in agent mode a
:class:`FilesWatcher` on the agent's applied policy file posts :attr:`Trigger.APPLIED_POLICY` (in every
refresh mode: the published policy is the one in force). All are :class:`FilesWatcher`: inotify through ``asyncinotify`` (on the files' folders, so that replacing a
file works) when that library is installed and the kernel allows it, and otherwise polling of
``(mtime, ctime, size, inode)`` every ``poll_seconds``; with inotify a bounded signature check
catches a dropped event.

Times are the gate's ``clock.monotonic()`` seconds (:mod:`numaplane.kube.clock`; the real one by default).
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.options import NotifyBackend
from numaplane.kube.clock import Clock, SystemClock

__all__ = [
    "KUBELET_STATE_FILES",
    "Batch",
    "EventGate",
    "FilesWatcher",
    "KubeletWatcher",
    "NotifyFileWatcher",
    "Trigger",
    "inotify_available",
    "periodic",
]


class Trigger(enum.StrEnum):
    """Why a scan runs (also the ``trigger`` metric label)."""

    INITIAL = "initial"  # start-up
    PERIODIC = "periodic"  # the refresh timer (also re-reads sysfs and the kubelet config)
    REACTIVE = "reactive"  # the notify file
    KUBELET_STATE = "kubelet-state"  # the kubelet rewrote a checkpoint of its managers
    KUBELET_CONFIG = "kubelet-config"  # the kubelet's configuration file changed (re-read it)
    APPLIED_POLICY = "applied-policy"  # the agent applied another policy (re-read its file)
    POD_PHASE = "pod-phase"  # a pod of the node became Succeeded or Failed
    OBJECT = "object"  # our object was deleted or changed on the server
    DRA = "dra"  # a ResourceSlice of the node, a DeviceClass or a claim's allocation changed (--dra)
    RETRY = "retry"  # back-off after a failed cycle


#: When several triggers are folded into a batch, the label is the first of these present.
_PRIORITY = (
    Trigger.REACTIVE,
    Trigger.KUBELET_STATE,
    Trigger.KUBELET_CONFIG,
    Trigger.APPLIED_POLICY,
    Trigger.POD_PHASE,
    Trigger.DRA,
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
        """Whether the slow inputs (sysfs, kubelet config or applied policy) should be re-read."""
        return bool(self.triggers & {Trigger.INITIAL, Trigger.PERIODIC, Trigger.KUBELET_CONFIG, Trigger.APPLIED_POLICY})

    @property
    def update_kind(self) -> str:
        """RTE's ``k8stopoawareschedwg/rte-update`` value: ``periodic`` for timer-only batches, else ``reactive``."""
        return "periodic" if self.triggers <= {Trigger.PERIODIC, Trigger.INITIAL, Trigger.RETRY} else "reactive"


class EventGate:
    """Coalescing, rate-limited hand-over of triggers to the refresh loop (see the module docstring)."""

    def __init__(self, max_per_second: float = 0.0, burst: int = 1, *, clock: Clock | None = None) -> None:
        if max_per_second < 0 or burst < 1:
            raise ValueError("max_per_second must be >= 0 and burst >= 1")
        self.max_per_second = max_per_second
        self.burst = burst
        #: The time source of batches, rate limit and :func:`periodic` (monotonic seconds, sleeps).
        self.clock: Clock = clock or SystemClock()
        self._pending: dict[Trigger, float] = {}
        self._wake = asyncio.Event()
        self._tokens = float(burst)
        self._stamp = self.clock.monotonic()
        self.posted = 0
        self.coalesced = 0
        self.on_post: Callable[[Trigger, bool], None] | None = None

    def post(self, trigger: Trigger) -> None:
        """Record ``trigger`` for the next batch (folded into it if one is already pending)."""
        folded = bool(self._pending)
        self._pending.setdefault(trigger, self.clock.monotonic())
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
        now = self.clock.monotonic()
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
                await self.clock.sleep((1.0 - self._tokens) / self.max_per_second)
                self._refill()
            self._tokens -= 1.0
        batch = Batch(frozenset(self._pending), min(self._pending.values()))
        self._pending.clear()
        self._wake.clear()
        return batch


async def periodic(gate: EventGate, period_seconds: float) -> None:
    """Post :attr:`Trigger.PERIODIC` every ``period_seconds`` of the gate's clock (runs until cancelled)."""
    while True:
        await gate.clock.sleep(period_seconds)
        gate.post(Trigger.PERIODIC)


def inotify_available() -> bool:
    """Whether ``asyncinotify`` can be imported (the kernel may still refuse; see the watcher)."""
    try:
        import asyncinotify  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


_Signature = tuple[int, int, int, int]


def _signature(path: Path) -> _Signature | None:
    """``(mtime, ctime, size, inode)`` of ``path``, ``None`` when it cannot be stat'ed (absent)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


class FilesWatcher:
    """Calls ``on_change(path)`` when one of ``paths`` is written, touched, replaced, created or removed.

    inotify (``asyncinotify``) watches each path's folder (so that a file replaced by a rename, as
    the kubelet writes its checkpoints, is seen), when the library is installed and the kernel
    allows it; otherwise the ``(mtime, ctime, size, inode)`` of every path is polled every
    ``poll_seconds``. With inotify, a bounded check compares the same signatures every
    ``check_seconds`` (``None``: never), so an event the kernel dropped or a folder that appeared
    after the start (no watch could be set on it) is caught within that bound. A folder that
    goes away ends the inotify watch (the poll backend then takes over under ``auto``).
    ``backend`` is the backend in use once :meth:`run` started (``inotify`` or ``poll``).
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        on_change: Callable[[Path], None],
        *,
        backend: NotifyBackend = NotifyBackend.AUTO,
        poll_seconds: float = 0.05,
        check_seconds: float | None = None,
        what: str = "watched file",
    ) -> None:
        if not paths:
            raise ValueError("nothing to watch")
        self.paths = tuple(Path(p) for p in paths)
        self._on_change = on_change
        self.requested = backend
        self.backend: str = ""
        self.poll_seconds = poll_seconds
        self.check_seconds = check_seconds
        self.what = what
        self.started = asyncio.Event()
        self._seen: dict[Path, _Signature | None] = {}
        self._log = structlog.get_logger("numaplane.exporter")

    async def run(self) -> None:
        """Watch until cancelled."""
        self._seen = {path: _signature(path) for path in self.paths}
        if self.requested is not NotifyBackend.POLL:
            try:
                await self._run_inotify()
                return
            except (ImportError, OSError) as error:
                if self.requested is NotifyBackend.INOTIFY:
                    raise ExporterConfigError(
                        f"inotify unavailable for {self.what} {self.paths[0]}: {error}"
                    ) from error
                self._log.warning(
                    "watch_inotify_unavailable",
                    what=self.what,
                    path=str(self.paths[0]),
                    error=str(error),
                    fallback="poll",
                )
        self.backend = "poll"
        self.started.set()
        await self._check_every(self.poll_seconds)

    def _changed(self, path: Path) -> None:
        self._seen[path] = _signature(path)
        self._on_change(path)

    async def _check_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            for path in self.paths:
                now = _signature(path)
                if now != self._seen.get(path):
                    self._changed(path)

    async def _run_inotify(self) -> None:
        from asyncinotify import Inotify, Mask  # type: ignore[import-not-found, unused-ignore]

        mask = Mask.CLOSE_WRITE | Mask.ATTRIB | Mask.MOVED_TO | Mask.CREATE | Mask.MODIFY | Mask.DELETE
        by_folder: dict[Path, dict[str, Path]] = {}
        for path in self.paths:
            by_folder.setdefault(path.parent, {})[path.name] = path
        with Inotify() as inotify:
            watched: dict[Path, dict[str, Path]] = {}
            for folder, names in by_folder.items():
                if folder.is_dir():
                    inotify.add_watch(folder, mask | Mask.ONLYDIR)
                    watched[folder] = names
            if not watched:
                raise OSError(f"none of the folders of the {self.what}s exists")
            self.backend = "inotify"
            self.started.set()
            checker = (
                asyncio.ensure_future(self._check_every(self.check_seconds)) if self.check_seconds is not None else None
            )
            try:
                async for event in inotify:
                    event_folder = Path(event.watch.path) if event.watch is not None else None
                    if Mask.IGNORED in event.mask or Mask.DELETE_SELF in event.mask:
                        raise OSError(f"a watched folder went away ({event_folder})")
                    in_folder = watched.get(event_folder) if event_folder is not None else None
                    changed = in_folder.get(str(event.name)) if in_folder is not None and event.name else None
                    if changed is not None:
                        self._changed(changed)
            finally:
                if checker is not None:
                    checker.cancel()


class NotifyFileWatcher(FilesWatcher):
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
        super().__init__(
            [path], lambda _path: on_event(), backend=backend, poll_seconds=poll_seconds, what="notify file"
        )
        self.path = self.paths[0]

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
        await super().run()


#: The kubelet's checkpoint files under its root folder that change when it allocates exclusive
#: resources (CPU, memory and device managers; DRA) — what RTE watches with ``--kubelet-state-dir``.
KUBELET_STATE_FILES: tuple[str, ...] = (
    "cpu_manager_state",
    "memory_manager_state",
    "device-plugins/kubelet_internal_checkpoint",
    "dra_manager_state",
)


class KubeletWatcher(FilesWatcher):
    """Posts :attr:`Trigger.KUBELET_STATE` when the kubelet rewrites one of its state files under
    ``state_dir`` (:data:`KUBELET_STATE_FILES`), and :attr:`Trigger.KUBELET_CONFIG` when its
    configuration file ``config_file`` changes (either may be ``None``, not both)."""

    def __init__(
        self,
        gate: EventGate,
        *,
        state_dir: Path | None,
        config_file: Path | None,
        backend: NotifyBackend = NotifyBackend.AUTO,
        poll_seconds: float = 0.05,
        check_seconds: float = 5.0,
    ) -> None:
        paths = [state_dir / name for name in KUBELET_STATE_FILES] if state_dir is not None else []
        if config_file is not None:
            paths.append(config_file)
        self.config_file = config_file

        def changed(path: Path) -> None:
            gate.post(Trigger.KUBELET_CONFIG if path == config_file else Trigger.KUBELET_STATE)

        super().__init__(
            paths, changed, backend=backend, poll_seconds=poll_seconds, check_seconds=check_seconds, what="kubelet file"
        )

"""One exporter per node at a time: an exclusive lock on a node-local file.

Two exporters publishing the same node's object alternate it on every period (RTE PR#394: 7/3 CPUs,
the policy flipping). The operator's pod anti-affinity covers its own pods only — not a second
DaemonSet, a hand-started exporter, nor the overlap of a rolling update. So, with ``--lock-file``
(``numaplane render`` passes ``<agent run dir>/exporter.lock``, a host path every exporter pod on the
node mounts), an exporter takes an exclusive ``flock`` on that file before it reads or writes
anything of the API server, and holds it while it runs. A second exporter for the node waits: it
serves its probes (alive, **not ready**, ``/readyz`` naming the holder), logs once who holds the lock,
and tries again every ``retry_seconds``; it starts publishing as soon as the holder is gone.

The kernel releases the lock when its holder exits, however it exits (crash, SIGKILL, OOM kill):
there is no stale lock to clean up. The holder writes ``pid``, ``node`` and its pod name (``POD_NAME``)
into the file for the waiting one's log; that text is informational only, never the lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from numaplane.exporter.errors import ExporterConfigError
from numaplane.kube.clock import Clock, SystemClock, format_time

__all__ = ["NodeLock"]


class NodeLock:
    """An exclusive ``flock`` on ``path`` (see the module docstring). Not reentrant; one per process."""

    def __init__(self, path: Path, *, node: str, pod: str = "", clock: Clock | None = None) -> None:
        self.path = path
        self.clock: Clock = clock or SystemClock()  # the ``since=`` stamp of the note
        self.node = node
        self.pod = pod
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free (never blocks); ``True`` once held. :class:`ExporterConfigError`
        when the file cannot be opened or locked for another reason than another holder."""
        if self._fd is not None:
            return True
        try:
            self.path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            raise ExporterConfigError(f"lock file {self.path}: {error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as error:
            os.close(fd)
            raise ExporterConfigError(f"lock file {self.path}: cannot lock: {error}") from error
        self._fd = fd
        stamp = format_time(self.clock.now())
        note = f"pid={os.getpid()} node={self.node} pod={self.pod or '-'} since={stamp}\n".encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)
        except OSError:
            pass  # the note is informational; the lock is what counts
        return True

    def holder(self) -> str:
        """What the current holder wrote into the file (``"unknown"`` when unreadable)."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return "unknown"
        return text[:200] or "unknown"

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor releases the flock

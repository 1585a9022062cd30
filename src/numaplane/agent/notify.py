"""Tell the node's exporter that the agent's allocations changed, by touching a file.

An exporter in ``events`` or ``both`` refresh mode (``numaplane exporter --notify-file``) scans as soon
as its notify file is written, touched, replaced or created. The operator points the agent's
``--notify-file`` and that exporter's at the same host file, so a pod's CPUs, memory and devices show
up in the NodeResourceTopology object within the exporter's rate limit instead of one refresh period
later.

Invariants:

* touches requested while the event loop runs one step are coalesced into one touch, done in a
  later step (``loop.call_soon``): never on the NRI request path, never more than one per step;
* every touch sets the file's mtime to a strictly increasing nanosecond value (``max(now, last + 1)``),
  so an exporter that polls ``(mtime, ctime, size, inode)`` sees every touch even when two changes
  fall within one tick of the kernel's coarse file-time clock; an inotify watcher gets ``IN_ATTRIB``;
* a missing file (or folder) is created again (folder mode 0750, file mode 0640, like the exporter);
* a failing touch never stops the agent: it is counted (``result="error"``) and logged once per
  streak of failures; the next change tries again. Only a path that exists and is not a regular
  file is a configuration error (:class:`~numaplane.agent.errors.AgentConfigError`), at start.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from numaplane.agent.errors import AgentConfigError

__all__ = ["ChangeNotifier"]

log = structlog.get_logger("numaplane.agent")


class ChangeNotifier:
    """Touches ``path`` after changes (see the module docstring). ``on_result(ok)`` counts touches."""

    def __init__(self, path: Path, *, on_result: Callable[[bool], None] | None = None) -> None:
        self.path = path
        self.touches = 0
        self._on_result = on_result or (lambda _ok: None)
        self._last_ns = 0
        self._pending = False
        self._failing = False

    def prepare(self) -> None:
        """Refuse a non-file path; create the folder and the file (failures are only logged)."""
        if (self.path.exists() or self.path.is_symlink()) and not self.path.is_file():
            raise AgentConfigError(f"notify file {self.path} exists and is not a regular file")
        self._ensure()

    def notify(self) -> None:
        """Ask for a touch: in the loop's next step when a loop runs, else at once."""
        if self._pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.touch()
            return
        self._pending = True
        loop.call_soon(self._run)

    def _run(self) -> None:
        self._pending = False
        self.touch()

    def _ensure(self) -> bool:
        try:
            self.path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o640)
            os.close(fd)
        except OSError as exc:
            self._failed(exc)
            return False
        return True

    def touch(self) -> bool:
        """Touch the file now; ``False`` (counted, logged) when that failed."""
        stamp = max(time.time_ns(), self._last_ns + 1)
        try:
            os.utime(self.path, ns=(stamp, stamp))
        except FileNotFoundError:
            if not self._ensure():
                return False
            try:
                os.utime(self.path, ns=(stamp, stamp))
            except OSError as exc:
                self._failed(exc)
                return False
        except OSError as exc:
            self._failed(exc)
            return False
        self._last_ns = stamp
        self.touches += 1
        if self._failing:
            self._failing = False
            log.info("notify file writable again", path=str(self.path))
        self._on_result(True)
        return True

    def _failed(self, exc: OSError) -> None:
        self._on_result(False)
        if not self._failing:
            self._failing = True
            log.warning(
                "cannot touch the notify file; the exporter refreshes on its timer only",
                path=str(self.path),
                error=str(exc),
            )

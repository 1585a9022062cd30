"""The agent's checkpoint: a versioned, checksummed state file, written atomically off the request path.

File format (one JSON object, UTF-8)::

    {"format": "numaplane.io/agent-checkpoint", "version": 1,
     "node": "<node name>", "topology": "sha256:<digest of the machine model>",
     "data": {<NodeAgentState.snapshot()>},
     "checksum": "sha256:<hex>"}

``checksum`` is the SHA-256 of the canonical JSON (sorted keys, no spaces) of every other field, so any
change to any byte of content is detected. Reading classifies a bad file:

* :class:`CheckpointCorrupted` — unreadable, truncated, not JSON, fields missing, checksum mismatch
  (and, found later by the caller, content that restores into an inconsistent state);
* :class:`CheckpointForeign` — intact but another format, another version, another node or another
  machine topology (e.g. a state folder copied from another host).

Either way the caller moves the file aside (:meth:`CheckpointStore.quarantine`, keeping it for
inspection as ``<name>.<kind>-<UTC timestamp>``) and rebuilds the state from the runtime
(Synchronize): a bad file is reported, never a crash loop.

Writing (:meth:`CheckpointStore.save`): temp file in the same folder, write, ``fsync``, ``rename`` over
the old file, ``fsync`` the folder — a crash at any point leaves either the old or the new file, never
a mix. :class:`CheckpointWriter` runs writes in a worker thread, coalescing bursts of changes
(at most one write per ``min_interval_seconds``), so no request waits for the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from numaplane import boundedjson
from numaplane.agent.background import BackgroundLoop
from numaplane.agent.errors import CheckpointCorrupted, CheckpointError, CheckpointForeign
from numaplane.topology.model import Topology

__all__ = [
    "FORMAT",
    "VERSION",
    "CheckpointIdentity",
    "CheckpointStore",
    "CheckpointWriter",
    "decode",
    "encode",
    "topology_digest",
    "write_atomically",
]

_WRITES = itertools.count()


def write_atomically(path: Path, payload: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``payload``: temp file in the same folder, write, ``fsync``, ``rename``,
    ``fsync`` the folder — a reader (or a crash) sees the old or the new content, never a mix.
    Creates the folder; raises ``OSError``."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    # a fresh name per write (a write cancelled by shutdown may still run in its thread), created
    # with O_EXCL|O_NOFOLLOW: never written through a planted symlink or into an existing file
    tmp = folder / f".{path.name}.tmp-{os.getpid()}-{next(_WRITES)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode)  # the process umask does not narrow it
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


FORMAT = "numaplane.io/agent-checkpoint"
VERSION = 1
_HEADER_FIELDS = ("format", "version", "node", "topology", "data")

log = structlog.get_logger("numaplane.agent")


def _canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def topology_digest(topology: Topology) -> str:
    """A digest of what allocations depend on: CPUs (core, socket, NUMA, online) and NUMA memory."""
    doc = {
        "cpus": [[c.cpu, c.core, c.socket, c.numa, c.online] for c in topology.cpus],
        "numa": [
            [n.id, n.memory_total_bytes, sorted((h.page_size_bytes, h.total) for h in n.hugepages)]
            for n in topology.numa_nodes
        ],
    }
    return "sha256:" + hashlib.sha256(_canonical(doc)).hexdigest()


@dataclass(frozen=True, slots=True)
class CheckpointIdentity:
    """What a checkpoint must match to be ours: the node name and the machine's topology digest."""

    node: str
    topology: str


def encode(data: Mapping[str, Any], identity: CheckpointIdentity) -> bytes:
    """The file content for ``data`` (see the module docstring)."""
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "node": identity.node,
        "topology": identity.topology,
        "data": data,
    }
    doc["checksum"] = "sha256:" + hashlib.sha256(_canonical(doc)).hexdigest()
    return _canonical(doc) + b"\n"


def decode(raw: bytes, identity: CheckpointIdentity) -> dict[str, Any]:
    """The ``data`` of a checkpoint file; raises :class:`CheckpointCorrupted` / :class:`CheckpointForeign`."""
    try:
        doc = boundedjson.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # boundedjson.JSONInputError is a ValueError
        raise CheckpointCorrupted(f"not a JSON document ({len(raw)} bytes): {exc}") from None
    if not isinstance(doc, dict):
        raise CheckpointCorrupted("not a JSON object")
    if doc.get("format") != FORMAT:
        raise CheckpointForeign(f"format is {doc.get('format')!r}, not {FORMAT!r}")
    missing = [k for k in (*_HEADER_FIELDS, "checksum") if k not in doc]
    if missing:
        raise CheckpointCorrupted(f"fields missing: {', '.join(missing)}")
    body = {k: doc[k] for k in _HEADER_FIELDS}
    want = "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()
    if doc["checksum"] != want:
        raise CheckpointCorrupted(
            f"checksum mismatch (file says {str(doc['checksum'])[:20]}…, content gives {want[:20]}…)"
        )
    if doc["version"] != VERSION:
        raise CheckpointForeign(f"format version {doc['version']!r}, this agent reads {VERSION}")
    if doc["node"] != identity.node:
        raise CheckpointForeign(f"written for node {doc['node']!r}, this is {identity.node!r}")
    if doc["topology"] != identity.topology:
        raise CheckpointForeign("written for another machine topology")
    data = doc["data"]
    if not isinstance(data, dict):
        raise CheckpointCorrupted("data is not an object")
    return data


class CheckpointStore:
    """The checkpoint file at ``path`` (blocking I/O: call from a worker thread on the hot path)."""

    def __init__(self, path: str | os.PathLike[str], identity: CheckpointIdentity) -> None:
        self.path = Path(path)
        self.identity = identity

    def load(self) -> dict[str, Any] | None:
        """The stored data, ``None`` when there is no file; raises :class:`CheckpointError`."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointCorrupted(f"cannot read {self.path}: {exc}") from None
        return decode(raw, self.identity)

    def save(self, data: Mapping[str, Any]) -> int:
        """Write atomically (temp file, fsync, rename, fsync folder); return the bytes written."""
        payload = encode(data, self.identity)
        self.write_bytes(payload)
        return len(payload)

    def write_bytes(self, payload: bytes) -> None:
        write_atomically(self.path, payload)

    def remove_stale_temps(self) -> list[Path]:
        """Delete temp files of writes a crash interrupted (``.<name>.tmp-<pid>``); return them."""
        removed = []
        for tmp in self.path.parent.glob(f".{self.path.name}.tmp-*"):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
        return removed

    def quarantine(self, error: CheckpointError, now: datetime) -> Path | None:
        """Move a bad file aside as ``<name>.<kind>-<UTC timestamp of now>`` (``now``: aware wall time,
        the agent's clock); return the new path (``None`` when there is no file, or when it cannot be
        moved: logged, and the next write replaces it — a bad checkpoint never stops the agent from
        starting)."""
        stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.name}.{error.kind}-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{self.path.name}.{error.kind}-{stamp}.{n}")
        try:
            os.replace(self.path, target)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.error("cannot move the bad checkpoint aside", path=str(self.path), error=str(exc))
            return None
        return target


#: Takes a snapshot of the agent state (serialised with the other state changes): ``(generation, data)``.
SnapshotSource = Callable[[], Awaitable[tuple[int, dict[str, Any]]]]


class CheckpointWriter(BackgroundLoop):
    """Writes the checkpoint in the background whenever :meth:`mark_dirty` was called.

    Writes are coalesced (at most one per ``min_interval_seconds``) and run in a worker thread;
    failures are logged, counted (``on_result(ok, seconds)``) and retried at the next change or after
    ``retry_seconds``. :meth:`flush` writes at once (used at shutdown and by tests).
    """

    task_name = "checkpoint-writer"

    def __init__(
        self,
        store: CheckpointStore,
        source: SnapshotSource,
        *,
        min_interval_seconds: float = 0.05,
        retry_seconds: float = 1.0,
        on_result: Callable[[bool, float], None] | None = None,
    ) -> None:
        self.store = store
        self.source = source
        self.min_interval_seconds = min_interval_seconds
        self.retry_seconds = retry_seconds
        self.on_result = on_result
        self.written_generation = -1
        self.writes = 0
        self._dirty = asyncio.Event()
        self._lock = asyncio.Lock()

    def mark_dirty(self) -> None:
        self._dirty.set()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.min_interval_seconds)
            if not await self.flush():
                await asyncio.sleep(self.retry_seconds)
                self._dirty.set()

    async def flush(self) -> bool:
        """Write the current state now (skipped if that generation is on disk); ``False`` on failure."""
        async with self._lock:
            self._dirty.clear()
            generation, data = await self.source()
            if generation == self.written_generation:
                return True
            started = time.perf_counter()
            try:
                size = await asyncio.to_thread(self.store.save, data)
            except OSError as exc:
                elapsed = time.perf_counter() - started
                log.error("checkpoint write failed", path=str(self.store.path), error=str(exc))
                if self.on_result is not None:
                    self.on_result(False, elapsed)
                return False
            elapsed = time.perf_counter() - started
            self.written_generation = generation
            self.writes += 1
            if self.on_result is not None:
                self.on_result(True, elapsed)
            log.debug("checkpoint written", path=str(self.store.path), bytes=size, seconds=round(elapsed, 4))
            return True

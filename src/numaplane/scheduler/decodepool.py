"""Large extender request bodies decoded in worker processes (issue 25 item 1: latency).

The bounded, typed decoder (:mod:`numaplane.scheduler.wire`) keeps the memory of a hostile body
bounded, but decoding a body of tens of MiB still takes the interpreter lock for up to a second (the
structure scans, the raw slices, the Pod): a decoding *thread* stalls every other request of the
process. So a body larger than :data:`LARGE_BODY_BYTES` (once inflated) is decoded in a worker process
of a small pool, by the very same functions, and what comes back is the typed value
(:class:`~numaplane.scheduler.wire.ExtenderArgs` / :class:`~numaplane.scheduler.wire.BindingArgs`) or
the typed refusal (:class:`~numaplane.scheduler.errors.ExtenderRequestError` with its reason). Smaller
bodies are decoded in process (a thread): they take a few milliseconds, less than the round trip.

Threshold (:data:`LARGE_BODY_BYTES`, 1 MiB): a real kube-scheduler filter for 5,000 nodes with
``NodeNames`` is ~80 KiB and a Pod is a few KiB, so every body of a real cluster in
``nodeCacheCapable`` mode stays in process. Measured on the shared 2-CPU machine (load 5-6, median of
30): an 80 KiB ``NodeNames`` body decodes in 2.2 ms in process and 3.5 ms through a worker; a 1 MiB body
in 13-22 ms in process (the GIL held all along) and 14-32 ms through a worker (the GIL free but for the
pipe). Below 1 MiB the in-process hold stays within the idle p99 of the other requests (2-33 ms by
machine load) and a worker would only add its round trip; above it the hold grows linearly (about 1 s
for 47 MiB).

Invariants:

* At most ``size`` large bodies are in flight (being sent, decoded or answered) at once; one more is
  refused at once with :class:`DecodeBusy` (HTTP 429 with ``Retry-After``), never queued: a queue of
  48 MiB bodies would be memory the caller controls.
* Each worker holds one body at a time. The body is written to the worker from the extender's buffer
  (no copy), and the raw slices of the typed value (the Node objects echoed back, NodeList members)
  come back as their places in the body, rebuilt as views of the extender's buffer: each process holds
  the body about once (the worker while receiving it, twice), as the in-process decoding did.
* A worker that dies (killed by the OOM killer, a signal) or does not answer within
  ``timeout_seconds`` ends that request with :class:`DecodeWorkerLost` (HTTP 503) and is replaced by a
  fresh process at the next large body; a dead worker never hangs the extender (the answer is awaited
  with :meth:`multiprocessing.connection.Connection.poll`, which returns at end of file).
* Workers run at a lower CPU priority (nice +:data:`WORKER_NICENESS`) than the extender.
* Workers are started with the ``spawn`` method (no copy of the extender's threads, locks or caches),
  once — lazily at the first large body, or by :meth:`DecodePool.start` — and kept; :meth:`close`
  stops them. Each is a child process of the extender: its memory is the extender's too (the bench
  counts the RSS of the whole process tree).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any, Final, Literal

import msgspec
import numpy as np
import structlog

from numaplane.scheduler.errors import DecodeBusy, DecodeWorkerLost, ExtenderRequestError
from numaplane.scheduler.wire import ExtenderArgs, decode_body, parse_binding_args, parse_extender_args

__all__ = [
    "DECODE_TIMEOUT_SECONDS",
    "DECODE_WORKERS",
    "LARGE_BODY_BYTES",
    "RETRY_AFTER_SECONDS",
    "WORKER_NICENESS",
    "DecodePool",
    "Verb",
]

log = structlog.get_logger("numaplane.scheduler.decodepool")

#: Bodies larger than this (bytes, once inflated) are decoded in a worker process (module docstring).
LARGE_BODY_BYTES: Final = 1024 * 1024
#: Worker processes (and large bodies in flight): one per core of the extender's usual 2-CPU limit.
DECODE_WORKERS: Final = 2
#: A worker's answer is awaited at most this long (seconds); the bounded decoder takes ~1 s for 48 MiB.
DECODE_TIMEOUT_SECONDS: Final = 60.0
#: Added to a worker's nice value: on a CPU shared with the extender (its limit is 2 CPUs), the event
#: loop answering the other requests is scheduled before a worker decoding a hostile body.
WORKER_NICENESS: Final = 10
#: ``Retry-After`` of a refused large body (seconds).
RETRY_AFTER_SECONDS: Final = 1

#: What a worker decodes: an ``ExtenderArgs`` (filter, prioritize) or an ``ExtenderBindingArgs`` (bind).
Verb = Literal["extender", "binding"]


@dataclass(frozen=True, slots=True)
class _Span:
    """A ``msgspec.Raw`` of the request body sent back as its place in the body (bytes ``start:end``)."""

    start: int
    end: int


def _address(buffer: Any) -> int:
    """Address of the first byte of a buffer (``msgspec.Raw`` values are views of the decoded body)."""
    return int(np.frombuffer(buffer, np.uint8).ctypes.data)


def _to_spans(value: Any, body: bytes) -> Any:
    """``value`` with the raw slices of ``body`` it holds (Node objects, NodeList members) as :class:`_Span`.

    The extender holds the same body: it rebuilds the slices as views of its copy, so a 47 MiB NodeList
    crosses the pipe once (the request), not twice (the answer too), and is held once in each process."""
    if not isinstance(value, ExtenderArgs) or not len(body):
        return value
    base, size = _address(body), len(body)

    def span(raw: Any) -> Any:
        if not isinstance(raw, msgspec.Raw) or not len(raw):
            return raw
        start = _address(raw) - base
        if start < 0 or start + len(raw) > size:  # not a view of the body (a copy): sent as it is
            return raw
        return _Span(start, start + len(raw))

    nodes = None if value.nodes is None else tuple(span(n) for n in value.nodes)
    node_list = {k: span(v) for k, v in value.node_list.items()}
    return dataclasses.replace(value, nodes=nodes, node_list=node_list)


def _from_spans(value: Any, body: bytearray) -> Any:
    """The inverse of :func:`_to_spans` over the extender's copy of the body (views, no copies)."""
    if not isinstance(value, ExtenderArgs):
        return value
    view = memoryview(body)

    def raw(item: Any) -> Any:
        return msgspec.Raw(view[item.start : item.end]) if isinstance(item, _Span) else item

    nodes = None if value.nodes is None else tuple(raw(n) for n in value.nodes)
    node_list = {k: raw(v) for k, v in value.node_list.items()}
    return dataclasses.replace(value, nodes=nodes, node_list=node_list)


def _decode_in_worker(conn: Connection) -> None:
    """The worker's loop: ``(verb, body)`` in, ``("ok", value)`` or ``("refused", reason)`` out.

    Runs in the worker process only. Exceptions are sent as their reasons (exception objects with
    their own ``__init__`` do not always unpickle). Ends when the extender closes its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the extender's Ctrl-C stops it; the pool stops us
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)  # the extender's own requests come first on a busy CPU
    parsers: dict[bytes, Callable[[Any], Any]] = {b"extender": parse_extender_args, b"binding": parse_binding_args}
    while True:
        try:
            verb = conn.recv_bytes()
            body = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            out: tuple[str, Any] = ("ok", _to_spans(parsers[verb](decode_body(body)), body))
        except ExtenderRequestError as exc:
            out = ("refused", exc.reason)
        except Exception as exc:  # a decoder bug: the request fails, the worker lives on
            out = ("failed", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(out)
        except (EOFError, OSError):
            return
        del out, body


class _Worker:
    """One worker process and the extender's end of its pipe."""

    def __init__(self, context: multiprocessing.context.SpawnContext) -> None:
        ours, theirs = context.Pipe(duplex=True)
        self.conn = ours
        self.process: SpawnProcess = context.Process(
            target=_decode_in_worker, args=(theirs,), name="numaplane-extender-decode", daemon=True
        )
        self.process.start()
        theirs.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def exchange(self, verb: Verb, body: bytearray, timeout: float) -> tuple[str, Any]:
        """Send ``body``, wait for the answer (blocking: run in a thread).

        Raises ``EOFError``/``OSError`` when the worker is gone, ``TimeoutError`` when it is silent."""
        self.conn.send_bytes(verb.encode())
        self.conn.send_bytes(body)  # written from the buffer itself, no copy
        if not self.conn.poll(timeout):
            raise TimeoutError(f"no answer within {timeout:g} s")
        answer: tuple[str, Any] = self.conn.recv()
        return answer

    def stop(self, timeout: float = 5.0) -> None:
        """End the process (blocking): close the pipe (the worker's loop returns), then kill if needed."""
        with contextlib.suppress(OSError):
            self.conn.close()
        self.process.join(timeout if self.process.is_alive() else 0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout)
        with contextlib.suppress(ValueError):
            self.process.close()


class DecodePool:
    """``size`` worker processes decoding large bodies (module docstring). Use from one event loop."""

    def __init__(self, size: int = DECODE_WORKERS, *, timeout_seconds: float = DECODE_TIMEOUT_SECONDS) -> None:
        if size < 1:
            raise ValueError("a decode pool needs at least one worker")
        self.size = size
        self.timeout_seconds = timeout_seconds
        self._context = multiprocessing.get_context("spawn")
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._in_flight = 0
        self._closed = False
        #: Counters (for tests and the bench): answers of workers (values and refusals), bodies refused
        #: because every worker was busy, workers lost (died or silent).
        self.answered = 0
        self.busy_refusals = 0
        self.workers_lost = 0

    @property
    def in_flight(self) -> int:
        """Large bodies being sent, decoded or answered now."""
        return self._in_flight

    def pids(self) -> list[int]:
        """Process ids of the live workers (idle and busy)."""
        return [w.pid for w in (*self._idle, *self._busy) if w.pid is not None]

    async def start(self) -> None:
        """Start every worker now (otherwise each starts at the first large body that needs it)."""
        while len(self._idle) + len(self._busy) < self.size and not self._closed:
            self._idle.append(await asyncio.to_thread(_Worker, self._context))

    async def decode(self, verb: Verb, body: bytearray) -> Any:
        """The typed value of ``body`` decoded by a worker (its raw slices are views of ``body``).

        Raises :class:`DecodeBusy` at once when ``size`` bodies are in flight, the worker's
        :class:`~numaplane.scheduler.errors.ExtenderRequestError` (its reason) for a refused body, and
        :class:`DecodeWorkerLost` when the worker died or timed out (it is replaced)."""
        if self._closed:
            raise DecodeWorkerLost("the extender is stopping")
        if self._in_flight >= self.size:
            self.busy_refusals += 1
            raise DecodeBusy(f"{self.size} large request bodies are being decoded already; retry")
        self._in_flight += 1
        try:
            worker = await self._worker()
            self._busy.add(worker)
            try:
                kind, value = await asyncio.to_thread(worker.exchange, verb, body, self.timeout_seconds)
            except (EOFError, OSError, TimeoutError) as exc:
                self._busy.discard(worker)
                self.workers_lost += 1
                await asyncio.to_thread(worker.process.join, 1.0)  # a dead one is reaped: its exit code
                code = worker.process.exitcode
                cause = f"exit code {code}" if code is not None else f"{type(exc).__name__}: {exc}"
                log.warning("extender decode worker lost; a fresh one replaces it", pid=worker.pid, cause=cause)
                await asyncio.to_thread(worker.stop, 1.0)
                raise DecodeWorkerLost(f"the process decoding the request body was lost ({cause})") from None
            self._busy.discard(worker)
            if self._closed:
                await asyncio.to_thread(worker.stop)
            else:
                self._idle.append(worker)
        finally:
            self._in_flight -= 1
        self.answered += 1
        if kind == "ok":
            return _from_spans(value, body)
        if kind == "refused":
            raise ExtenderRequestError(str(value))
        raise RuntimeError(f"decoding in the worker failed: {value}")

    async def _worker(self) -> _Worker:
        """An idle live worker, or a fresh one (a worker that died while idle is replaced silently)."""
        while self._idle:
            worker = self._idle.pop()
            if worker.process.is_alive():
                return worker
            self.workers_lost += 1
            log.warning("extender decode worker died while idle; a fresh one replaces it", pid=worker.pid)
            await asyncio.to_thread(worker.stop, 1.0)
        return await asyncio.to_thread(_Worker, self._context)

    async def close(self) -> None:
        """Stop the idle workers now and the busy ones as their answers arrive (or are lost)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            await asyncio.to_thread(worker.stop)

"""The asyncio driver of the NRI wire protocol: one :class:`~numaplane.nri.protocol.Connection` over a stream.

:class:`AsyncConnection` owns the only I/O of a connection: it feeds the bytes it reads to the sans-I/O
:class:`~numaplane.nri.protocol.Connection`, serves each incoming request in its own task (a slow server
never stalls the reader, nor the answers to our own calls) and completes our calls' futures from the
responses. Every frame is written with one ``write`` call, so frames of concurrent tasks never interleave.
Closing (EOF, a protocol error or :meth:`AsyncConnection.close`) fails pending calls with
:class:`~numaplane.nri.errors.ConnectionClosed` and cancels the serving tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from numaplane.nri.errors import CallTimeout, ConnectionClosed, MessageTooLarge, StatusCode, StatusError
from numaplane.nri.protocol import Connection, RequestReceived, ResponseReceived, Role

__all__ = ["AsyncConnection", "Reply", "RequestServer"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a request server returns: a payload on success, or a non-zero gRPC ``code`` and ``message``."""

    payload: bytes = b""
    code: int = StatusCode.OK
    message: str = ""


RequestServer = Callable[[RequestReceived], Awaitable[Reply]]

_READ_SIZE = 256 * 1024


class AsyncConnection:
    """Runs a :class:`Connection` over an asyncio stream.

    :meth:`run` reads until EOF and must be running for calls to complete. Each incoming request is
    served in its own task, so a slow handler never stalls the reader (nor the answers to our own calls).
    A server that raises :class:`StatusError` answers with that status, any other exception with UNKNOWN.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        serve: RequestServer,
        *,
        role: Role = Role.PLUGIN,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._serve = serve
        self._conn = Connection(role)
        self._waiters: dict[int, asyncio.Future[ResponseReceived]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def run(self) -> None:
        """Read and dispatch until the peer closes. Raises :class:`ProtocolError` on a protocol violation."""
        try:
            while True:
                try:
                    data = await self._reader.read(_READ_SIZE)
                except (ConnectionError, OSError) as exc:
                    log.debug("nri: read failed: %s", exc)
                    data = b""
                if not data:
                    self._conn.receive_eof()
                    return
                for event in self._conn.receive(data):
                    if isinstance(event, RequestReceived):
                        task = asyncio.create_task(self._serve_one(event), name=f"nri-{event.method}-{event.stream_id}")
                        self._tasks.add(task)
                        task.add_done_callback(self._tasks.discard)
                    else:
                        waiter = self._waiters.pop(event.stream_id, None)
                        if waiter is not None and not waiter.done():
                            waiter.set_result(event)
        finally:
            self.close()

    async def call(
        self,
        service: str,
        method: str,
        payload: bytes,
        *,
        timeout_seconds: float | None = None,
        peer_timeout_seconds: float | None = None,
    ) -> bytes:
        """Call ``service``/``method``; return the response payload.

        ``timeout_seconds`` bounds our wait; the deadline announced to the peer (``timeout_nano``) is
        ``peer_timeout_seconds``, by default the same. Raises :class:`StatusError` for an error status,
        :class:`CallTimeout` past ``timeout_seconds``, :class:`ConnectionClosed` if the connection is or
        becomes closed.
        """
        if self._closed:
            raise ConnectionClosed("NRI connection is closed")
        announced = timeout_seconds if peer_timeout_seconds is None else peer_timeout_seconds
        timeout_nano = int(announced * 1e9) if announced is not None else 0
        stream_id, data = self._conn.call(service, method, payload, timeout_nano)
        waiter: asyncio.Future[ResponseReceived] = asyncio.get_running_loop().create_future()
        self._waiters[stream_id] = waiter
        try:
            self._write(data)
            async with asyncio.timeout(timeout_seconds):
                event = await waiter
        except TimeoutError:
            self._conn.abandon(stream_id)
            raise CallTimeout(f"{service}/{method}: no response within {timeout_seconds} s") from None
        finally:
            self._waiters.pop(stream_id, None)
        if not event.ok:
            raise StatusError(event.code, event.message)
        return event.payload

    async def _serve_one(self, request: RequestReceived) -> None:
        try:
            reply = await self._serve(request)
        except StatusError as exc:
            reply = Reply(code=exc.code or StatusCode.UNKNOWN, message=exc.message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("nri: serving %s/%s failed", request.service, request.method)
            reply = Reply(code=StatusCode.UNKNOWN, message=f"{type(exc).__name__}: {exc}")
        if self._closed:
            return
        try:
            data = self._conn.reply(request.stream_id, reply.payload, reply.code, reply.message)
        except MessageTooLarge as exc:
            data = self._conn.reply(request.stream_id, b"", StatusCode.RESOURCE_EXHAUSTED, str(exc))
        with contextlib.suppress(ConnectionClosed):  # the peer left meanwhile; nobody to answer
            self._write(data)

    def _write(self, data: bytes) -> None:
        if self._closed or self._writer.is_closing():
            raise ConnectionClosed("NRI connection is closed")
        # One write call per frame: frames of concurrent tasks never interleave.
        self._writer.write(data)

    def close(self) -> None:
        """Close the socket, fail our pending calls with :class:`ConnectionClosed`, cancel serving tasks."""
        if self._closed:
            return
        self._closed = True
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(ConnectionClosed("NRI connection closed while waiting for a response"))
        self._waiters.clear()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

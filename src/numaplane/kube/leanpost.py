"""A lean HTTP/1.1 client for the scheduler's per-pod POSTs (``pods/binding`` and ``Event``).

Every placed pod costs the scheduler one binding POST (and, standalone, one Event POST). Through the
httpx client that lightkube holds, each is ~1 ms of Python (URL and header merging, the auth flow,
httpcore's connection pool, anyio's TLS stream): a third of the standalone scheduler's CPU per
pod, and the largest part of the extender's bind. :class:`LeanPoster` sends the same request over the
event loop's own TLS transport (``asyncio.open_connection``) on kept-alive connections, one write of
the request and reads until the answer is complete. The HTTP/1.1 framing (request head, ``Content-
Length`` or chunked answers, informational answers, whether the connection may be kept) is ``h11``'s,
the protocol library httpcore itself is built on; this module only pools connections and translates.

It uses what the httpx client uses: its base URL, its SSL context (CA and client certificate), its
default headers and its ``auth`` (the ``Authorization`` header the auth flow sets on its first request:
a bearer token, a token file, an exec plugin's token, basic auth). :meth:`LeanPoster.for_client` gives
``None`` — use httpx — when that is not all there is to it: a proxy, a custom transport, HTTP/2, a base
URL with a path. A ``401`` is not answered here: the caller retries through httpx, whose auth flow
re-reads a rotated token.

Invariants:

* A kept connection is reused only while it is younger than :data:`KEEPALIVE_SECONDS` since its
  last answer and its peer has not closed it. A request is sent again only in one case: it went out
  on a reused connection that the server then closed without a byte of answer — a server closes a
  connection it holds idle (e.g. kube-apiserver when it begins to shut down) only while it has read no
  request on it, so the request was not taken. Then it is sent once more on a new connection
  (Go's ``http.Transport`` does the same). Any other failure after the request was written is raised
  (as an ``httpx2.TransportError``), never retried: a binding the server did apply would come back
  ``409 Conflict``.
* Answers are returned as ``httpx2.Response`` objects (status, headers, body), so the caller's error
  translation is the one of the httpx path.
* At most :data:`MAX_IDLE` connections are kept idle; more may be open while requests are in flight.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import h11
import httpx2

__all__ = ["KEEPALIVE_SECONDS", "MAX_IDLE", "LeanPoster"]

#: A kept connection idle longer than this (seconds) is closed instead of reused (httpcore's default).
KEEPALIVE_SECONDS = 5.0
#: Idle connections kept per poster.
MAX_IDLE = 16
#: Largest answer head (status line and headers, bytes) and body read.
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Bytes asked of the socket per read.
READ_BYTES = 64 * 1024


class _ClosedIdle(Exception):
    """The connection ended before a byte of the answer (module docstring)."""


class _Connection:
    """One socket and its h11 state (one request at a time)."""

    __slots__ = ("http", "idle_since", "reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = time.monotonic()
        self.reused = False

    def usable(self, now: float) -> bool:
        return (
            now - self.idle_since < KEEPALIVE_SECONDS
            and self.http.our_state is h11.IDLE
            and not self.writer.is_closing()
            and not self.reader.at_eof()
        )

    def close(self) -> None:
        self.writer.close()


class LeanPoster:
    """``POST`` of small JSON bodies over kept-alive HTTP/1.1 connections (module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        headers: Mapping[str, str],
        auth: httpx2.Auth | None,
        timeout_seconds: float,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {base_url!r} is not http(s)://host[:port]")
        if parts.path.strip("/"):
            raise ValueError(f"base URL {base_url!r} has a path")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl_context = ssl_context if parts.scheme == "https" else None
        self.base_url = f"{parts.scheme}://{parts.netloc}"
        skipped = {"host", "content-length", "content-type", "accept", "connection", "accept-encoding"}
        self._headers = [("Host", parts.netloc)]
        self._headers += [(k, v) for k, v in headers.items() if k.lower() not in skipped]
        self.auth = auth
        self.timeout_seconds = timeout_seconds
        self._idle: list[_Connection] = []

    @classmethod
    def for_client(cls, client: Any) -> LeanPoster | None:
        """A poster sending what the httpx ``client`` would send, or ``None`` when the client has more
        to it than this poster reproduces (module docstring)."""
        transport = getattr(client, "_transport", None)
        pool = getattr(transport, "_pool", None)
        if type(transport) is not httpx2.AsyncHTTPTransport or pool is None:
            return None
        if getattr(client, "_mounts", None) or getattr(pool, "_proxy", None) is not None:
            return None  # a proxy (from the environment or given): httpx routes it
        if getattr(pool, "_http2", False) or getattr(pool, "_uds", None) or getattr(pool, "_local_address", None):
            return None
        context = getattr(pool, "_ssl_context", None)
        timeout = client.timeout.write or client.timeout.read or 10.0
        try:
            return cls(
                str(client.base_url),
                ssl_context=context if isinstance(context, ssl.SSLContext) else None,
                headers=dict(client.headers),
                auth=client.auth,
                timeout_seconds=float(timeout),
            )
        except ValueError:
            return None

    async def _authorization(self, url: str) -> str | None:
        if self.auth is None:
            return None
        request = httpx2.Request("POST", url)
        flow = self.auth.async_auth_flow(request)
        try:
            sent = await flow.__anext__()
        finally:
            await flow.aclose()
        return sent.headers.get("Authorization")

    async def _connection(self) -> _Connection:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable(now):
                conn.reused = True
                return conn
            conn.close()
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.ssl_context, server_hostname=self.host if self.ssl_context else None
        )
        return _Connection(reader, writer)

    def _release(self, conn: _Connection, keep: bool) -> None:
        now = time.monotonic()
        while self._idle and not self._idle[0].usable(now):  # the oldest first: no expired one lingers
            self._idle.pop(0).close()
        if keep and len(self._idle) < MAX_IDLE:
            conn.idle_since = now
            self._idle.append(conn)
        else:
            conn.close()

    async def post(self, path: str, body: bytes, *, content_type: str = "application/json") -> httpx2.Response:
        """``POST path`` (path and query, from the base URL) with ``body``; the answer, whatever its status.

        Raises ``httpx2.TransportError`` (``ConnectError``, ``WriteError``, ``ReadError``,
        ``RemoteProtocolError``, ``TimeoutException``) when no complete answer came."""
        url = self.base_url + path
        authorization = await self._authorization(url)
        headers = [*self._headers, ("Content-Type", content_type), ("Accept", "application/json")]
        if authorization:
            headers.append(("Authorization", authorization))
        headers.append(("Content-Length", str(len(body))))
        request = h11.Request(method="POST", target=path, headers=headers)
        try:
            async with asyncio.timeout(self.timeout_seconds):
                while True:
                    try:
                        conn = await self._connection()
                    except (OSError, ssl.SSLError) as exc:
                        raise httpx2.ConnectError(f"{type(exc).__name__}: {exc}") from exc
                    try:
                        status, reason, headers, content = await self._exchange(conn, request, body)
                        break
                    except _ClosedIdle as exc:
                        if not conn.reused:
                            raise httpx2.ReadError("the server closed the connection without answering") from exc
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(f"no answer to POST {path} in {self.timeout_seconds} s") from exc
        return httpx2.Response(
            status,
            headers=headers,
            content=content,
            request=httpx2.Request("POST", url),
            extensions={"reason_phrase": reason.encode("latin-1", "replace")},
        )

    async def _exchange(
        self, conn: _Connection, request: h11.Request, body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Write ``request`` and ``body`` on ``conn`` and read its answer; ``conn`` is kept or closed after."""
        keep = False
        try:
            try:
                http = conn.http
                conn.writer.write(
                    b"".join(
                        (
                            http.send(request) or b"",
                            http.send(h11.Data(data=body)) or b"",
                            http.send(h11.EndOfMessage()) or b"",
                        )
                    )
                )
                await conn.writer.drain()
            except (OSError, ssl.SSLError) as exc:
                if conn.reused:  # the server had closed it: nothing of the request was taken
                    raise _ClosedIdle from exc
                raise httpx2.WriteError(f"{type(exc).__name__}: {exc}") from exc
            status, reason, headers, content = await _read_answer(conn)
            if http.our_state is h11.DONE and http.their_state is h11.DONE:
                http.start_next_cycle()
                keep = True
        finally:
            self._release(conn, keep)
        return status, reason, headers, content

    def close(self) -> None:
        """Close the idle connections."""
        while self._idle:
            self._idle.pop().close()


async def _read_answer(conn: _Connection) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """``(status, reason, headers, body)`` of one answer on ``conn`` (informational answers skipped).

    Raises :class:`_ClosedIdle` when the connection ended before a byte of it, an ``httpx2`` transport
    error otherwise."""
    http, reader = conn.http, conn.reader
    received = False
    response: h11.Response | None = None
    body = bytearray()
    try:
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await reader.read(READ_BYTES)
                except ConnectionResetError:
                    if not received:
                        raise _ClosedIdle from None
                    raise
                if not data and not received:
                    raise _ClosedIdle
                received = True
                http.receive_data(data)  # b"": the peer closed (h11 decides whether the answer was complete)
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                if len(body) + len(event.data) > MAX_BODY_BYTES:
                    raise httpx2.RemoteProtocolError("answer body too large")
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx2.ReadError("the server closed the connection mid-answer")
            # h11.InformationalResponse (1xx): skipped
    except h11.RemoteProtocolError as exc:
        raise httpx2.RemoteProtocolError(f"bad answer: {exc}") from exc
    except (ConnectionError, ssl.SSLError) as exc:
        raise httpx2.ReadError(f"{type(exc).__name__}: {exc}") from exc
    assert response is not None  # h11 gives the Response before any Data or EndOfMessage
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in response.headers]
    # the server decides the encoding; ours asks for none (no Accept-Encoding), so gzip is unexpected
    encoding = next((v for k, v in headers if k.lower() == "content-encoding"), "identity").lower()
    if encoding not in ("identity", ""):
        raise httpx2.RemoteProtocolError(f"unrequested Content-Encoding {encoding!r}")
    return response.status_code, response.reason.decode("latin-1"), headers, bytes(body)

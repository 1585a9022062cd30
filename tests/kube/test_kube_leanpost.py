"""The lean POST client (numaplane.kube.leanpost) against a raw asyncio HTTP/1.1 server whose framing each
test chooses: reuse of kept connections, chunked and Content-Length bodies, a server that closes, a
401 sent back to httpx, a silent server, and the clients it declines to imitate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx2
import pytest

from numaplane.kube import leanpost
from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import Conflict
from numaplane.kube.leanpost import LeanPoster

Answer = Callable[[bytes, bytes], bytes | None]


@dataclass
class RawServer:
    """Answers each request with ``answer(head, body)`` (``None``: close without answering)."""

    answer: Answer
    connections: int = 0
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                body = await reader.readexactly(length)
                self.requests.append((head, body))
                out = self.answer(head, body)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if b"connection: close" in out.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], asyncio.Future[RawServer]]]:
    servers: list[RawServer] = []

    async def start(answer: Answer) -> RawServer:
        raw = RawServer(answer)
        raw.server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        servers.append(raw)
        return raw

    yield start  # type: ignore[misc]
    for raw in servers:
        assert raw.server is not None
        raw.server.close()


def ok(body: bytes = b'{"kind":"Status","status":"Success"}', extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def poster(port: int, **kw: object) -> LeanPoster:
    return LeanPoster(
        f"http://127.0.0.1:{port}",
        ssl_context=None,
        headers={"User-Agent": "t"},
        auth=httpx2.BasicAuth("u", "p"),
        timeout_seconds=float(kw.get("timeout", 5.0)),  # type: ignore[arg-type]
    )


async def test_requests_reuse_one_kept_connection_and_carry_the_clients_headers(serve) -> None:  # type: ignore[no-untyped-def]
    raw = await serve(lambda head, body: ok(body))
    lean = poster(raw.port)
    for i in range(3):
        answer = await lean.post(f"/api/v1/namespaces/ns/pods/p{i}/binding?fieldManager=m", b'{"n":%d}' % i)
        assert answer.status_code == 201
        assert answer.json() == {"n": i}
    assert raw.connections == 1
    head = raw.requests[0][0].decode()
    assert head.startswith("POST /api/v1/namespaces/ns/pods/p0/binding?fieldManager=m HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{raw.port}" in head and "User-Agent: t" in head
    assert "Authorization: Basic dTpw" in head and "Content-Type: application/json" in head
    lean.close()


async def test_chunked_answers_and_error_statuses_come_back_as_httpx_responses(serve) -> None:  # type: ignore[no-untyped-def]
    status = b'{"kind":"Status","code":409,"reason":"Conflict","message":"already bound"}'
    chunked = b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += b"%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\n\r\n" % (10, status[:10], len(status) - 10, status[10:])
    raw = await serve(lambda head, body: b"HTTP/1.1 100 Continue\r\n\r\n" + chunked)
    answer = await poster(raw.port).post("/b", b"{}")
    assert answer.status_code == 409 and answer.reason_phrase == "Conflict"
    assert answer.json()["message"] == "already bound"
    with pytest.raises(httpx2.HTTPStatusError):
        answer.raise_for_status()


async def test_a_connection_the_server_closed_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    raw = await serve(lambda head, body: ok(extra="Connection: close\r\n"))
    lean = poster(raw.port)
    for _ in range(2):
        assert (await lean.post("/b", b"{}")).status_code == 201
    assert raw.connections == 2


async def test_an_idle_connection_past_keepalive_is_replaced(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    raw = await serve(lambda head, body: ok())
    lean = poster(raw.port)
    await lean.post("/b", b"{}")
    monkeypatch.setattr(leanpost, "KEEPALIVE_SECONDS", 0.0)
    await lean.post("/b", b"{}")
    assert raw.connections == 2


async def test_no_answer_is_a_transport_error_and_the_request_is_sent_once(serve) -> None:  # type: ignore[no-untyped-def]
    raw = await serve(lambda head, body: None)
    with pytest.raises(httpx2.ReadError):
        await poster(raw.port).post("/b", b"{}")
    assert len(raw.requests) == 1
    silent = await serve(lambda head, body: b"")
    with pytest.raises(httpx2.ReadTimeout):
        await LeanPoster(
            f"http://127.0.0.1:{silent.port}", ssl_context=None, headers={}, auth=None, timeout_seconds=0.2
        ).post("/b", b"{}")
    with pytest.raises(httpx2.ConnectError):
        await poster(1).post("/b", b"{}")


async def test_the_port_binds_through_it_and_falls_back_to_httpx_on_401(serve) -> None:  # type: ignore[no-untyped-def]
    seen: list[bool] = []

    def answer(head: bytes, body: bytes) -> bytes:
        seen.append(b"accept-encoding" in head.lower())  # httpx asks for gzip, the lean client does not
        if len(seen) == 1:
            return b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
        if len(seen) == 3:
            return b"HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n"
        return ok()

    raw = await serve(answer)
    port = LightkubePort.from_server(f"http://127.0.0.1:{raw.port}")
    try:
        await port.bind("p", "n1", namespace="ns")
        assert seen == [False, True]  # the lean client's 401, then httpx's answered request
        with pytest.raises(Conflict):
            await port.bind("p", "n1", namespace="ns")
        assert seen[2] is False
        assert b'"target":{"apiVersion":"v1","kind":"Node","name":"n1"}' in raw.requests[-1][1]
    finally:
        await port.close()


def test_clients_it_cannot_imitate_keep_httpx() -> None:
    plain = httpx2.AsyncClient(base_url="https://127.0.0.1:6443")
    assert LeanPoster.for_client(plain) is not None
    assert LeanPoster.for_client(httpx2.AsyncClient(base_url="https://h:1", proxy="http://proxy:3128")) is None
    assert LeanPoster.for_client(httpx2.AsyncClient(base_url="https://h:1", http2=True)) is None
    assert LeanPoster.for_client(httpx2.AsyncClient(base_url="https://h:1/prefix")) is None
    assert LeanPoster.for_client(object()) is None


async def test_a_kept_connection_closed_unanswered_is_retried_once_on_a_new_one(serve) -> None:  # type: ignore[no-untyped-def]
    answers = iter([ok(b'{"n":1}'), None, ok(b'{"n":2}')])  # the 2nd request: the kept connection ends
    raw = await serve(lambda head, body: next(answers))
    lean = poster(raw.port)
    assert (await lean.post("/b", b"{}")).json() == {"n": 1}
    assert (await lean.post("/b", b"{}")).json() == {"n": 2}
    assert raw.connections == 2 and len(raw.requests) == 3

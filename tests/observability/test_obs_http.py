"""The shared probes + metrics server: addresses, groups, checks, registries, errors."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import Counter

from numaplane.observability import AddressError, ListenError, ObservabilityError, ProbeServer, parse_address

pytestmark = pytest.mark.timeout(30)


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


@pytest_asyncio.fixture
async def servers() -> AsyncIterator[list[ProbeServer]]:
    started: list[ProbeServer] = []
    yield started
    for server in started:
        await server.stop()


def test_parse_address() -> None:
    assert parse_address(":2112") == ("0.0.0.0", 2112)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:8081") == ("::1", 8081)
    assert parse_address("localhost:65535") == ("localhost", 65535)
    for bad in ("nowhere", "host:", "host:http", "host:-1", "host:65536", ""):
        with pytest.raises(AddressError):
            parse_address(bad)
    with pytest.raises(ValueError, match="expected HOST:PORT"):  # an AddressError is a ValueError
        parse_address("8080")


async def test_each_instance_has_its_own_registry(servers: list[ProbeServer]) -> None:
    a, b = ProbeServer(), ProbeServer()
    servers += [a, b]
    assert a.registry is not b.registry
    Counter("numaplane_test_things", "Things.", registry=a.registry).inc(3)
    await a.start("127.0.0.1:0", None)
    await b.start("127.0.0.1:0", None)
    status, text = await get(a.ports["metrics"], "/metrics")
    assert status == 200 and "numaplane_test_things_total 3.0" in text
    assert "numaplane_test_things" not in (await get(b.ports["metrics"], "/metrics"))[1]
    # metrics only on that address: no probes there
    assert (await get(a.ports["metrics"], "/healthz"))[0] == 404


async def test_probes_answer_with_the_checks_verdict_and_details(servers: list[ProbeServer]) -> None:
    state: dict[str, Any] = {"synced": False, "alive": True}
    server = ProbeServer(
        liveness=lambda: (state["alive"], {"tasks": "running" if state["alive"] else "dead"}),
        readiness=lambda: (state["synced"], {"synced": state["synced"]}),
    )
    servers.append(server)
    await server.start(None, "127.0.0.1:0")
    assert set(server.ports) == {"health"}
    port = server.ports["health"]
    status, text = await get(port, "/readyz")
    assert status == 503 and json.loads(text) == {"ok": False, "synced": False}
    state["synced"] = True
    status, text = await get(port, "/readyz")
    assert status == 200 and json.loads(text) == {"ok": True, "synced": True}
    assert (await get(port, "/healthz"))[0] == 200
    state["alive"] = False
    status, text = await get(port, "/healthz")
    assert status == 503 and json.loads(text) == {"ok": False, "tasks": "dead"}
    assert (await get(port, "/metrics"))[0] == 404


async def test_named_checks_are_pluggable_and_a_raising_check_fails(servers: list[ProbeServer]) -> None:
    flags = {"cache": True, "api": True}

    def broken() -> tuple[bool, Mapping[str, Any]]:
        raise RuntimeError("boom")

    server = ProbeServer()
    servers.append(server)
    assert server.readiness() == (True, {})  # no checks: ready
    server.add_readiness_check("cache", lambda: (flags["cache"], {"cacheGeneration": 7}))
    server.add_readiness_check("api", lambda: (flags["api"], {}))
    await server.start("127.0.0.1:0", "127.0.0.1:0")  # one address string: one listener for both
    port = server.ports["health"]
    assert server.ports["metrics"] == port
    status, text = await get(port, "/readyz")
    assert status == 200 and json.loads(text) == {"ok": True, "cacheGeneration": 7}
    flags["cache"] = flags["api"] = False
    status, text = await get(port, "/readyz")
    assert status == 503 and json.loads(text) == {"ok": False, "cacheGeneration": 7, "failing": ["cache", "api"]}
    server.add_liveness_check("loop", broken)
    status, text = await get(port, "/healthz")
    body = json.loads(text)
    assert status == 503 and body["failing"] == ["loop"] and body["errors"] == {"loop": "RuntimeError: boom"}


async def test_route_groups_share_or_split_addresses(servers: list[ProbeServer]) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=str(len(await request.read())))

    def routes(app: web.Application) -> None:
        app.router.add_post("/prefix/hello", hello)

    server = ProbeServer(max_body_bytes=64)
    servers.append(server)
    server.add_routes("extender", routes)
    with pytest.raises(ValueError, match="reserved"):
        server.add_routes("metrics", routes)
    with pytest.raises(ValueError, match="no routes"):
        await server.start(None, None, other="127.0.0.1:0")
    await server.start("127.0.0.1:0", None, extender="127.0.0.1:0")
    port = server.ports["extender"]
    async with aiohttp.ClientSession() as http:
        async with http.post(f"http://127.0.0.1:{port}/prefix/hello", data=b"x" * 10) as r:
            assert r.status == 200 and await r.text() == "10"
        async with http.post(f"http://127.0.0.1:{port}/prefix/hello", data=b"x" * 100) as r:
            assert r.status == 413  # above max_body_bytes
    # one address for every group: one listener serves them all
    shared = ProbeServer()
    servers.append(shared)
    shared.add_routes("extender", routes)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    address = f"127.0.0.1:{free}"
    await shared.start(address, address, extender=address)
    assert shared.ports == {"metrics": free, "health": free, "extender": free}
    for path in ("/metrics", "/healthz", "/readyz"):
        assert (await get(free, path))[0] == 200


async def test_a_busy_address_is_a_listen_error_and_nothing_stays_open(servers: list[ProbeServer]) -> None:
    first = ProbeServer()
    servers.append(first)
    await first.start("127.0.0.1:0", None)
    busy = f"127.0.0.1:{first.ports['metrics']}"
    second = ProbeServer()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    with pytest.raises(ListenError, match="cannot listen on") as error:
        # the metrics address binds first, then the busy health address fails
        await second.start(f"127.0.0.1:{free}", busy)
    assert isinstance(error.value, OSError) and isinstance(error.value, ObservabilityError)
    with socket.socket() as s:
        s.bind(("127.0.0.1", free))  # released again
    with pytest.raises(AddressError):
        await second.start("127.0.0.1:0", "no-port")
    assert second.ports == {}  # a bad address is refused before anything listens

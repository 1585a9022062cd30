"""Large extender bodies are decoded in worker processes (issue 25 item 1: latency under a hostile body).

A hostile body is decoded by a worker process (never this process's GIL), while the event loop keeps
answering ``/healthz`` and small filters quickly; a legal large body's answer is the same as in
process (its Node objects echoed back as views of the extender's buffer); past the pool's size a large
body gets 429 with ``Retry-After``; a worker killed mid-request (as the OOM killer would) gives 503 for
that request and a fresh worker serves the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import signal
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from test_sched_hardening import post, server, started  # noqa: F401  (server is a fixture)

from numaplane.scheduler.decodepool import LARGE_BODY_BYTES, RETRY_AFTER_SECONDS, DecodePool
from numaplane.scheduler.errors import DecodeBusy
from numaplane.scheduler.service import ExtenderService
from numaplane.scheduler.wire import decode_body, encode, filter_result, parse_extender_args
from numaplane.testing.fakeapi import FakeApiServer

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20
SMALL = b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["rig-node"]}'


def _large_legal(nodes: int, padding: int) -> bytes:
    """A filter with ``nodes`` Node objects (made-up names; the reply echoes none of them)."""
    items = [
        {"metadata": {"name": f"made-up-{i}", "annotations": {"pad": "p" * padding}}, "kind": "Node"}
        for i in range(nodes)
    ]
    pod = {"metadata": {"name": "big", "namespace": "default", "uid": "u-big"}}
    return json.dumps({"Pod": pod, "Nodes": {"kind": "NodeList", "items": items}, "NodeNames": None}).encode()


@contextlib.asynccontextmanager
async def pool_service(
    api: FakeApiServer, shared_dir: Path, **kw: Any
) -> AsyncIterator[tuple[ExtenderService, DecodePool]]:
    """An extender service on ``api`` (``started``, with ``kw``) and its decode pool, started; closed
    after the block (the pool's workers with it)."""
    service = await started(api, shared_dir, **kw)
    pool = service.decode_pool
    assert pool is not None
    try:
        await pool.start()
        yield service, pool
    finally:
        await service.close()


@pytest_asyncio.fixture
async def one_worker(
    server: FakeApiServer,  # noqa: F811
    shared_dir: Path,
) -> AsyncIterator[tuple[ExtenderService, DecodePool]]:
    """:func:`pool_service` with a pool of one worker."""
    async with pool_service(server, shared_dir, decode_workers=1) as pair:
        yield pair


async def _get(port: int, path: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as response:
        await response.read()
        return response.status


async def test_a_hostile_body_is_decoded_out_of_process_while_the_loop_answers(
    server: FakeApiServer,  # noqa: F811
    shared_dir: Path,
) -> None:
    async with pool_service(server, shared_dir) as (service, pool):
        port = service.ports["extender"]
        # 12 MiB once inflated: 4 M empty Node objects (the bench sends the 47 MiB shapes)
        items = b"{}," * (4 * MIB) + b"{}"
        hostile = gzip.compress(b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [' + items + b"]}}")
        slow = asyncio.ensure_future(post(port, "filter", hostile, {"Content-Encoding": "gzip"}))
        health: list[float] = []
        small: list[float] = []
        while not slow.done():
            began = time.perf_counter()
            assert await _get(port, "/healthz") == 200
            health.append(time.perf_counter() - began)
            began = time.perf_counter()
            status, _ = await post(port, "filter", SMALL)
            small.append(time.perf_counter() - began)
            assert status == 200
        status, reply = await slow
        assert status == 400 and "more than 15000 nodes" in reply["Error"], (status, reply)
        assert pool.answered == 1  # the worker refused it: the typed error crossed the pipe
        assert health and small
        # served throughout, quickly: no decoding holds this process's GIL (a thread held it 24-133 ms)
        assert statistics.median(health) < 0.1 and statistics.median(small) < 0.1, (health, small)
        assert max(health) < 1.0 and max(small) < 1.0, (health, small)
    assert pool.pids() == []  # stopped with the service


async def test_a_large_legal_body_answers_as_in_process(server: FakeApiServer, shared_dir: Path) -> None:  # noqa: F811
    body = _large_legal(2_000, 600)
    assert len(body) > LARGE_BODY_BYTES
    args = parse_extender_args(decode_body(body))
    expected = json.loads(encode(filter_result(args, [], {}, {})))["Nodes"]
    service = await started(server, shared_dir)
    try:
        status, reply = await post(service.ports["extender"], "filter", body)
        assert service.decode_pool is not None and service.decode_pool.answered == 1
        assert status == 200, reply
        assert reply["Nodes"] == expected  # the NodeList's other members came back from the worker's spans
        assert set(reply["FailedAndUnresolvableNodes"]) == {f"made-up-{i}" for i in range(2_000)}
        # a small body is decoded in process
        assert (await post(service.ports["extender"], "filter", SMALL))[0] == 200
        assert service.decode_pool.answered == 1
    finally:
        await service.close()


async def test_past_the_pool_size_a_large_body_gets_429_with_retry_after(
    one_worker: tuple[ExtenderService, DecodePool],
) -> None:
    service, pool = one_worker
    holding = asyncio.ensure_future(pool.decode("extender", bytearray(_large_legal(15_000, 2_000))))
    await asyncio.sleep(0)
    assert pool.in_flight == 1
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{service.ports['extender']}/filter", data=_large_legal(600, 2_000)) as r,
    ):
        reply = await r.json()
        assert r.status == 429, reply
        assert r.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
        assert "retry" in reply["Error"]
    assert len((await holding).item_names) == 15_000  # the first one was not disturbed
    assert pool.busy_refusals == 1
    with pytest.raises(DecodeBusy):  # refused at once, never queued
        await asyncio.gather(pool.decode("extender", bytearray(b"{}")), pool.decode("extender", bytearray(b"{}")))


async def test_a_worker_killed_mid_request_gives_503_and_a_fresh_worker(
    one_worker: tuple[ExtenderService, DecodePool],
) -> None:
    service, pool = one_worker
    (victim,) = pool.pids()
    port = service.ports["extender"]
    request = asyncio.ensure_future(post(port, "filter", _large_legal(15_000, 2_000)))
    while pool.in_flight == 0:  # the body is read; now the worker receives and decodes it
        assert not request.done(), request.result()
        await asyncio.sleep(0.001)
    os.kill(victim, signal.SIGKILL)  # as the OOM killer would
    status, reply = await asyncio.wait_for(request, 30)
    assert status == 503, reply
    assert "lost" in reply["Error"] and "exit code -9" in reply["Error"], reply
    assert pool.workers_lost == 1 and pool.pids() == []
    # the extender never hung: it answers at once, and a fresh worker serves the next large body
    assert (await post(port, "filter", SMALL))[0] == 200
    status, _ = await post(port, "filter", _large_legal(2_000, 600))
    assert status == 200
    assert len(pool.pids()) == 1 and pool.pids() != [victim]


def _dead(pid: int) -> bool:
    """``pid`` has exited (a zombie until its parent reaps it, or gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_a_worker_dead_while_idle_is_replaced_without_failing_a_request(
    one_worker: tuple[ExtenderService, DecodePool],
) -> None:
    service, pool = one_worker
    (victim,) = pool.pids()
    os.kill(victim, signal.SIGKILL)
    for _ in range(500):
        if _dead(victim):
            break
        await asyncio.sleep(0.01)
    status, reply = await post(service.ports["extender"], "filter", _large_legal(2_000, 600))
    assert status == 200, reply
    assert pool.workers_lost == 1 and len(pool.pids()) == 1 and pool.pids() != [victim]

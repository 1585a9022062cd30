"""Benchmark: the Kubernetes adapters — in-memory store and lightkube over the fake API server.

Usage: ``python bench/kube_store.py [--quick]``. Prints ``metric: value unit`` lines:

* ``memory_create_rate`` / ``memory_patch_rate``: pod creates / merge patches per second in ``InMemoryKube``;
* ``memory_list_field_selector``: one ``list(POD, field_selector="spec.nodeName=...")`` over all pods;
* ``memory_watch_fanout_rate``: events delivered per second to 20 open watches (one write → 20 events);
* ``http_create_rate`` / ``http_get_rate``: the same through ``LightkubePort`` and the fake API server
  on 127.0.0.1 (HTTP/1.1, one connection pool);
* ``http_list_all``: one list of every pod over HTTP;
* ``informer_sync``: an ``Informer`` listing every pod and starting its watch, over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from numaplane.kube.informer import Informer
from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import POD, KubePort, WatchEvent
from numaplane.testing.fakeapi import FakeApiServer


def pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"pod-{i}", "namespace": "default", "labels": {"app": f"a{i % 10}"}},
        "spec": {"nodeName": f"node-{i % 50}", "containers": [{"name": "c", "image": "busybox"}]},
    }


def report(metric: str, value: float, unit: str) -> None:
    print(f"{metric}: {value:.1f} {unit}")


async def creates(kube: KubePort, count: int, offset: int = 0) -> float:
    start = time.perf_counter()
    for i in range(offset, offset + count):
        await kube.create(POD, pod(i))
    return count / (time.perf_counter() - start)


async def drain(stream: AsyncIterator[WatchEvent], count: int) -> None:
    seen = 0
    async for _ in stream:
        seen += 1
        if seen >= count:
            return


async def bench_memory(count: int) -> None:
    kube = InMemoryKube()
    report("memory_create_rate", await creates(kube, count), "ops/s")
    start = time.perf_counter()
    for i in range(count):
        await kube.patch(POD, f"pod-{i}", {"metadata": {"labels": {"touched": "1"}}})
    report("memory_patch_rate", count / (time.perf_counter() - start), "ops/s")
    start = time.perf_counter()
    listing = await kube.list(POD, field_selector="spec.nodeName=node-7")
    report("memory_list_field_selector", (time.perf_counter() - start) * 1e3, f"ms ({len(listing.items)} of {count})")

    rv = kube.resource_version
    writes = max(10, count // 10)
    streams = [kube.watch(POD, resource_version=rv) for _ in range(20)]
    tasks = [asyncio.create_task(drain(s, writes)) for s in streams]
    await asyncio.sleep(0)
    start = time.perf_counter()
    for i in range(writes):
        await kube.patch(POD, f"pod-{i}", {"metadata": {"labels": {"touched": "2"}}})
    await asyncio.gather(*tasks)
    report("memory_watch_fanout_rate", 20 * writes / (time.perf_counter() - start), "events/s")
    for s in streams:
        with contextlib.suppress(Exception):
            await s.aclose()  # type: ignore[attr-defined]


async def bench_http(count: int) -> None:
    async with FakeApiServer() as server:
        kube = server.port_client()
        report("http_create_rate", await creates(kube, count), "ops/s")
        start = time.perf_counter()
        for i in range(count):
            await kube.get(POD, f"pod-{i}")
        report("http_get_rate", count / (time.perf_counter() - start), "ops/s")
        start = time.perf_counter()
        listing = await kube.list(POD)
        report("http_list_all", (time.perf_counter() - start) * 1e3, f"ms ({len(listing.items)} pods)")
        informer = Informer(kube, POD)
        start = time.perf_counter()
        informer.start()
        await informer.wait_for_sync()
        report("informer_sync", (time.perf_counter() - start) * 1e3, f"ms ({len(informer.store)} pods)")
        await informer.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args()
    count = 200 if args.quick else 5000
    await bench_memory(count)
    await bench_http(count // 5)


if __name__ == "__main__":
    asyncio.run(main())

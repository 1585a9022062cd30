"""Small helpers shared by the Kubernetes adapter tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from numaplane.kube.memory import InMemoryKube
from numaplane.kube.port import KubePort, WatchEvent
from numaplane.testing.fakeapi import FakeApiServer


async def take(stream: AsyncIterator[WatchEvent], count: int, timeout: float = 5.0) -> list[WatchEvent]:
    """The next ``count`` events of ``stream``, then close it."""
    events: list[WatchEvent] = []

    async def run() -> None:
        async for event in stream:
            events.append(event)
            if len(events) >= count:
                return

    try:
        await asyncio.wait_for(run(), timeout)
    finally:
        with contextlib.suppress(Exception):
            await stream.aclose()  # type: ignore[attr-defined]
    return events


async def eventually(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> None:
    """Wait until ``predicate()`` is truthy (fails the test after ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


async def wait_for_watchers(store: InMemoryKube, count: int = 1) -> None:
    await eventually(lambda: store.watcher_count() >= count)


def pod(
    name: str, namespace: str = "default", labels: dict[str, str] | None = None, node: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": spec}


@dataclass
class Harness:
    """A port under test plus the store behind it (for test-side controls)."""

    name: str
    kube: KubePort
    server: FakeApiServer | None
    _store: InMemoryKube

    @property
    def store(self) -> InMemoryKube:
        # The server may swap its store on restart; always read through it.
        return self.server.store if self.server is not None else self._store

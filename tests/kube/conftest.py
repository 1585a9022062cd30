"""Fixtures for the Kubernetes adapter tests.

``harness`` is parametrised: the same test runs against the in-memory port and against the
production lightkube adapter talking to the project's fake API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kube_helpers import Harness

from numaplane.kube.memory import InMemoryKube
from numaplane.testing.fakeapi import FakeApiServer
from numaplane.testing.fakeapi.pytest_plugin import fake_apiserver, fake_kube

__all__ = ["fake_apiserver", "fake_kube", "harness"]


@pytest_asyncio.fixture(params=["memory", "fakeapi"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    if request.param == "memory":
        store = InMemoryKube(strict_resources=True)
        yield Harness("memory", store, None, store)
        await store.close()
        return
    async with FakeApiServer() as server:
        port = server.port_client()
        yield Harness("fakeapi", port, server, server.store)
        await port.close()

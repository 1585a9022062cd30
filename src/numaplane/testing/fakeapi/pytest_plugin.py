"""pytest fixtures for the fake API server.

Enable with ``pytest_plugins = ["numaplane.testing.fakeapi.pytest_plugin"]`` in the root
``conftest.py`` (or import the fixtures into a package's ``conftest.py``).

* ``fake_apiserver`` — a started :class:`FakeApiServer` on an ephemeral loopback port, stopped after
  the test;
* ``fake_kube`` — a :class:`~numaplane.kube.client.LightkubePort` (the production adapter) connected
  to ``fake_apiserver``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from numaplane.kube.client import LightkubePort
from numaplane.testing.fakeapi.server import FakeApiServer

__all__ = ["fake_apiserver", "fake_kube"]


@pytest_asyncio.fixture
async def fake_apiserver() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server


@pytest_asyncio.fixture
async def fake_kube(fake_apiserver: FakeApiServer) -> AsyncIterator[LightkubePort]:
    port = fake_apiserver.port_client()
    yield port
    await port.close()

"""The fake Kubernetes API server: an aiohttp app on 127.0.0.1 over an :class:`InMemoryKube` store.

Typical use::

    async with FakeApiServer() as server:
        async with server.port_client() as kube:        # a LightkubePort, the production adapter
            await kube.create(POD, {...})
        server.store.compact()                          # next watch from an old version → 410
        server.faults.add(409, verb="update", resource="leases")   # next lease update → 409
        await server.restart(keep_state=False)          # same port, empty store

The port is ephemeral on the first start and kept across :meth:`restart` / :meth:`stop` +
:meth:`start`, so clients configured once keep working. Stopping aborts open watch connections
(clients see a broken stream), as a crashing API server would.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web
from lightkube import AsyncClient

from numaplane.kube.client import LightkubePort, server_config
from numaplane.kube.errors import Gone
from numaplane.kube.memory import InMemoryKube
from numaplane.testing.fakeapi.app import build_app
from numaplane.testing.fakeapi.faults import FaultInjector

__all__ = ["FakeApiServer", "fake_apiserver"]


class FakeApiServer:
    """A loopback Kubernetes API server for tests (see the module docstring).

    ``store``: the backing store (a fresh :class:`InMemoryKube` with ``strict_resources=True`` by
    default). ``bookmark_interval_seconds``: send watch bookmarks this often (default: only when
    :meth:`InMemoryKube.send_bookmarks` is called). ``history_limit``: watch history kept.
    """

    def __init__(
        self,
        store: InMemoryKube | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_limit: int = 1000,
        bookmark_interval_seconds: float | None = None,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the fake API server listens on loopback only")
        self._history_limit = history_limit
        self._bookmark_interval = bookmark_interval_seconds
        self.store = store or self._new_store()
        self.host = host
        self.port = port
        self.faults = FaultInjector()
        self.requests: deque[tuple[str, str]] = deque(maxlen=2000)
        self.watch_tasks: set[asyncio.Task[Any]] = set()
        self.watch_transports: set[asyncio.BaseTransport] = set()
        self._runner: web.AppRunner | None = None
        self._clients: list[LightkubePort] = []

    def _new_store(self) -> InMemoryKube:
        return InMemoryKube(
            strict_resources=True,
            history_limit=self._history_limit,
            bookmark_interval_seconds=self._bookmark_interval,
        )

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Start listening (on the previous port after a stop)."""
        if self._runner is not None:
            return
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = int(sock.getsockname()[1])
        runner = web.AppRunner(build_app(self), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.SockSite(runner, sock)
        await site.start()
        self._runner = runner

    async def stop(self) -> None:
        """Stop listening and abort open connections (state is kept; see :meth:`restart`)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        for transport in list(self.watch_transports):
            transport.abort()  # type: ignore[attr-defined]
        for task in list(self.watch_tasks):
            task.cancel()
        if self.watch_tasks:
            await asyncio.wait(list(self.watch_tasks), timeout=1.0)
        await runner.cleanup()

    async def restart(self, *, keep_state: bool = True, down_seconds: float = 0.0) -> None:
        """Stop, optionally wait, and start again on the same port; ``keep_state=False`` empties the store."""
        await self.stop()
        if down_seconds > 0:
            await asyncio.sleep(down_seconds)
        if not keep_state:
            self.store = self._new_store()
        await self.start()

    async def close(self) -> None:
        """Close the clients made by :meth:`port_client` and stop."""
        for client in self._clients:
            await client.close()
        self._clients.clear()
        await self.stop()

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ watch controls

    def expire_watches(self) -> None:
        """Compact the history and end every open watch with a 410 ``ERROR`` event (clients relist)."""
        self.store.compact()
        self.store.close_watches(Gone("too old resource version (watch expired by the fake server)"))

    def end_watches(self) -> None:
        """End every open watch stream normally (clients resume from their last version)."""
        self.store.close_watches()

    # ------------------------------------------------------------------ clients

    def kubeconfig(self, *, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig document for this server (no credentials)."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "numaplane-fake", "cluster": {"server": self.url}}],
            "users": [{"name": "numaplane-fake", "user": {}}],
            "contexts": [
                {
                    "name": "numaplane-fake",
                    "context": {"cluster": "numaplane-fake", "user": "numaplane-fake", "namespace": namespace},
                }
            ],
            "current-context": "numaplane-fake",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write :meth:`kubeconfig` as YAML to ``path``."""
        target = Path(path)
        target.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        return target

    def lightkube_client(self, **kwargs: Any) -> AsyncClient:
        """A plain lightkube ``AsyncClient`` for this server (the caller closes it)."""
        kwargs.setdefault("trust_env", False)
        return AsyncClient(server_config(self.url, namespace="default"), **kwargs)

    def port_client(self, **kwargs: Any) -> LightkubePort:
        """The production adapter (:class:`LightkubePort`) pointed at this server; closed by :meth:`close`."""
        port = LightkubePort.from_server(self.url, namespace="default", **kwargs)
        self._clients.append(port)
        return port


def fake_apiserver(**kwargs: Any) -> FakeApiServer:
    """A not-yet-started :class:`FakeApiServer`; use it as ``async with fake_apiserver() as server``."""
    return FakeApiServer(**kwargs)

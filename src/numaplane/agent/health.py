"""``/metrics``, ``/healthz`` and ``/readyz`` over HTTP (aiohttp), on one or two addresses.

``/healthz`` (liveness) answers 200 while the agent's background tasks are alive; ``/readyz``
(readiness) 200 once the agent is registered with the runtime and has synchronized. Both return a
small JSON document with the details (e.g. the last rejected config), 503 when not ok.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Probe", "ProbeServer", "parse_address"]

#: ``() → (ok, details)``.
Probe = Callable[[], tuple[bool, dict[str, Any]]]


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all interfaces) → ``(host, port)``; raises ``ValueError``."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address must be HOST:PORT, got {address!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class ProbeServer:
    """Serves metrics and probes; ``ports`` maps ``metrics``/``health`` to the bound port."""

    def __init__(self, registry: CollectorRegistry, *, liveness: Probe, readiness: Probe) -> None:
        self.registry = registry
        self.liveness = liveness
        self.readiness = readiness
        self.ports: dict[str, int] = {}
        self._runners: list[web.AppRunner] = []

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _answer(probe: Probe) -> web.Response:
        ok, details = probe()
        body = json.dumps({"ok": ok, **details}, default=str)
        return web.Response(status=200 if ok else 503, text=body, content_type="application/json")

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._answer(self.liveness)

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._answer(self.readiness)

    async def start(self, metrics_address: str | None, health_address: str | None) -> None:
        """Listen on the addresses (``None``/``""`` disables one; port 0 picks a free port)."""
        groups: dict[str, list[str]] = {}
        for address, name in ((metrics_address, "metrics"), (health_address, "health")):
            if address:
                groups.setdefault(address, []).append(name)
        for address, names in groups.items():
            host, port = parse_address(address)
            app = web.Application()
            if "metrics" in names:
                app.router.add_get("/metrics", self._metrics)
            if "health" in names:
                app.router.add_get("/healthz", self._healthz)
                app.router.add_get("/readyz", self._readyz)
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
            self._runners.append(runner)
            bound = int(runner.addresses[-1][1]) if runner.addresses else port
            for name in names:
                self.ports[name] = bound

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()

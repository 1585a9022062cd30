"""``/metrics``, ``/healthz`` and ``/readyz`` over HTTP (one small aiohttp server per address).

Metrics and probes may listen on different addresses (as controller-runtime's manager does, so
manifests look familiar) or share one. ``/healthz`` answers 200 while the exporter's tasks are
alive (liveness), ``/readyz`` 200 once the object is published and the inputs are readable
(readiness); both return a small JSON document explaining the answer, 503 otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.options import parse_address

__all__ = ["Probe", "ProbeServer"]

#: ``() → (ok, details)``: a probe's verdict and a JSON-ready explanation.
Probe = Callable[[], tuple[bool, dict[str, Any]]]


class ProbeServer:
    """Serves the endpoints on ``metrics_address`` / ``health_address`` (``HOST:PORT``; port 0 = any)."""

    def __init__(self, registry: CollectorRegistry, *, liveness: Probe, readiness: Probe) -> None:
        self.registry = registry
        self.liveness = liveness
        self.readiness = readiness
        self.ports: dict[str, int] = {}
        self._runners: list[web.AppRunner] = []

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _verdict(probe: Probe) -> web.Response:
        ok, details = probe()
        return web.Response(
            status=200 if ok else 503,
            text=json.dumps({"ok": ok, **details}, default=str),
            content_type="application/json",
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._verdict(self.liveness)

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._verdict(self.readiness)

    async def start(self, metrics_address: str | None, health_address: str | None) -> None:
        """Listen; ``None`` or ``""`` disables that endpoint group. :attr:`ports` gets the bound ports.

        A busy or forbidden address is an :class:`ExporterConfigError` (nothing stays listening).
        """
        groups: dict[str, list[str]] = {}
        if metrics_address:
            groups.setdefault(metrics_address, []).append("metrics")
        if health_address:
            groups.setdefault(health_address, []).append("health")
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
            site = web.TCPSite(runner, host, port)
            try:
                await site.start()
            except OSError as error:
                await runner.cleanup()
                await self.stop()
                raise ExporterConfigError(f"cannot listen on {address}: {error}") from error
            self._runners.append(runner)
            bound = int(runner.addresses[-1][1]) if runner.addresses else port
            for name in names:
                self.ports[name] = bound

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()

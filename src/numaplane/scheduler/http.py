"""HTTP endpoints of the scheduler processes: ``/metrics``, ``/healthz``, ``/readyz`` (+ extender verbs).

:class:`HttpEndpoints` listens on one or more ``HOST:PORT`` addresses (``:PORT`` means every interface,
port ``0`` an ephemeral one) with one small aiohttp application per address; each address serves the
groups assigned to it (``metrics``, ``health``, or extra routes such as the extender's verbs). Probes
answer 200 or 503 with a JSON document explaining the verdict (``{"ok": ..., ...details}``).

Request bodies up to :data:`MAX_BODY_BYTES` are accepted (an extender filter request with 5,000 full
Node objects is about 35 MB).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from numaplane.scheduler.errors import SchedulerConfigError

__all__ = ["MAX_BODY_BYTES", "HttpEndpoints", "Probe", "RouteAdder", "parse_address"]

MAX_BODY_BYTES = 256 * 1024 * 1024

#: ``() → (ok, details)``: a probe's verdict and a JSON-ready explanation.
Probe = Callable[[], tuple[bool, dict[str, Any]]]
#: Adds routes to an application (used for the extender's verbs).
RouteAdder = Callable[[web.Application], None]


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` / ``:PORT`` / ``[v6]:PORT`` → (host, port); an empty host means ``0.0.0.0``."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise SchedulerConfigError(f"address {text!r} must be HOST:PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise SchedulerConfigError(f"address {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise SchedulerConfigError(f"address {text!r}: port out of range")
    host = host.strip("[]") or "0.0.0.0"
    return host, port


class HttpEndpoints:
    """The process's HTTP listeners (module docstring). :attr:`ports` maps group → bound port."""

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

    async def start(self, groups: dict[str, list[str]], extra: dict[str, RouteAdder] | None = None) -> None:
        """Listen on each address of ``groups`` (address → group names: ``metrics``, ``health`` or a key of
        ``extra``). Addresses that are ``None``/empty must be left out by the caller."""
        extra = extra or {}
        for address, names in groups.items():
            host, port = parse_address(address)
            app = web.Application(client_max_size=MAX_BODY_BYTES)
            if "metrics" in names:
                app.router.add_get("/metrics", self._metrics)
            if "health" in names:
                app.router.add_get("/healthz", self._healthz)
                app.router.add_get("/readyz", self._readyz)
            for name in names:
                adder = extra.get(name)
                if adder is not None:
                    adder(app)
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            site = web.TCPSite(runner, host, port)
            await site.start()
            self._runners.append(runner)
            bound = int(runner.addresses[-1][1]) if runner.addresses else port
            for name in names:
                self.ports[name] = bound

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()


def address_groups(**addresses: str | None) -> dict[str, list[str]]:
    """``{address: [group, ...]}`` from ``group=address`` keywords, skipping disabled (empty) ones."""
    groups: dict[str, list[str]] = {}
    for name, address in addresses.items():
        if address:
            groups.setdefault(address, []).append(name)
    return groups

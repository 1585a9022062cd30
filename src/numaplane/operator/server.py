"""The operator's HTTP endpoints (aiohttp): ``/metrics``, ``/healthz``, ``/readyz``.

* ``/healthz`` — 200 while the event loop answers and no controller task has died;
* ``/readyz`` — 200 once every informer has synced (standby replicas are ready too: they serve
  probes and wait for the lease), 503 before;
* ``/metrics`` — the operator's own :class:`prometheus_client.CollectorRegistry` (never the global one).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["build_app"]


def build_app(
    registry: CollectorRegistry, *, ready: Callable[[], bool], healthy: Callable[[], bool]
) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n") if healthy() else web.Response(status=503, text="controller stopped\n")

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n") if ready() else web.Response(status=503, text="caches not synced\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app

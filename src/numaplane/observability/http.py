"""``/metrics``, ``/healthz`` and ``/readyz`` (and extra route groups) over HTTP, on aiohttp.

:class:`ProbeServer` serves endpoint *groups* on ``HOST:PORT`` addresses (``:PORT`` means every
interface, port ``0`` an ephemeral one; :attr:`ProbeServer.ports` tells the bound port of each
group). Groups sharing an address share one small aiohttp application; metrics and probes may also
listen apart, as controller-runtime's manager does, so manifests look familiar:

* ``metrics`` — ``GET /metrics``: the text exposition of :attr:`ProbeServer.registry`, a Prometheus
  ``CollectorRegistry`` of this instance (a fresh one unless the component passes its own; never the
  process-global registry, so tests can run several components in one process);
* ``health`` — ``GET /healthz`` (liveness) and ``GET /readyz`` (readiness): 200 when every check of
  that kind passes, else 503, with a JSON document ``{"ok": bool, ...details}`` explaining the verdict;
* any other group — routes a component adds with :meth:`ProbeServer.add_routes` (the scheduler
  extender's verbs).

Checks are pluggable: ``() → (ok, details)`` callables, one given to the constructor per kind and
more added by name (:meth:`ProbeServer.add_readiness_check`). The verdict is the conjunction; the
details of every check are merged into the document, and the names of failing named checks are
listed under ``failing``. A check that raises counts as failing (its error is reported under
``errors``), so a probe answers 503 rather than 500. No checks means ok.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from numaplane.observability.errors import AddressError, ListenError
from numaplane.observability.tls import allowed_identity, client_identity

__all__ = ["DEFAULT_MAX_BODY_BYTES", "Check", "ProbeServer", "RouteAdder", "parse_address"]

#: ``() → (ok, details)``: a check's verdict and a JSON-ready explanation.
Check = Callable[[], tuple[bool, Mapping[str, Any]]]
#: Adds routes to an application (one route group).
RouteAdder = Callable[[web.Application], None]
#: aiohttp's own default request body limit.
DEFAULT_MAX_BODY_BYTES: Final = 1024**2
_RESERVED_GROUPS: Final = frozenset({"metrics", "health"})
log = structlog.get_logger("numaplane.observability.http")


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` / ``:PORT`` / ``[v6]:PORT`` → ``(host, port)``; an empty host means ``0.0.0.0``.

    Raises :class:`AddressError` (a ``ValueError``) for anything else or a port outside 0-65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise AddressError(f"address {text!r}: expected HOST:PORT")
    port = int(port_text)
    if port > 65535:
        raise AddressError(f"address {text!r}: port out of range")
    return host.strip("[]") or "0.0.0.0", port


class ProbeServer:
    """Metrics, probes and extra route groups of one process (see the module docstring)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        liveness: Check | None = None,
        readiness: Check | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.max_body_bytes = max_body_bytes
        self.ports: dict[str, int] = {}
        self._liveness: list[tuple[str, Check]] = [("", liveness)] if liveness is not None else []
        self._readiness: list[tuple[str, Check]] = [("", readiness)] if readiness is not None else []
        self._routes: dict[str, RouteAdder] = {}
        self._runners: list[web.AppRunner] = []

    # -- configuration -------------------------------------------------------------------------------
    def add_liveness_check(self, name: str, check: Check) -> None:
        """``/healthz`` also requires ``check`` (named in ``failing`` when it fails)."""
        self._liveness.append((name, check))

    def add_readiness_check(self, name: str, check: Check) -> None:
        """``/readyz`` also requires ``check`` (named in ``failing`` when it fails)."""
        self._readiness.append((name, check))

    def add_routes(self, group: str, adder: RouteAdder) -> None:
        """Routes served on the address given for ``group`` in :meth:`start`."""
        if group in _RESERVED_GROUPS:
            raise ValueError(f"route group {group!r} is reserved")
        self._routes[group] = adder

    # -- verdicts ------------------------------------------------------------------------------------
    def liveness(self) -> tuple[bool, dict[str, Any]]:
        """The ``/healthz`` verdict and details."""
        return _evaluate(self._liveness)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """The ``/readyz`` verdict and details."""
        return _evaluate(self._readiness)

    # -- HTTP ----------------------------------------------------------------------------------------
    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _answer(verdict: tuple[bool, dict[str, Any]]) -> web.Response:
        ok, details = verdict
        return web.Response(
            status=200 if ok else 503,
            text=json.dumps({"ok": ok, **details}, default=str),
            content_type="application/json",
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._answer(self.liveness())

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._answer(self.readiness())

    async def start(
        self,
        metrics_address: str | None = None,
        health_address: str | None = None,
        *,
        tls: Mapping[str, ssl.SSLContext] | None = None,
        client_subjects: Mapping[str, Collection[str]] | None = None,
        **groups: str | None,
    ) -> None:
        """Listen: ``metrics`` on ``metrics_address``, ``health`` on ``health_address``, each route group
        of :meth:`add_routes` on ``groups[name]``. ``None`` or ``""`` leaves a group out. ``tls`` maps a
        group name to the TLS context its address is served with (every group sharing that address
        is then served over TLS too). ``client_subjects`` maps a group name to the client certificate
        subjects (common name or subjectAltName) its address accepts: any other client, or one without
        a certificate, gets HTTP 403 before a route runs (meant with a context that requires client
        certificates; ``numaplane.observability.tls``).

        Every address is parsed before anything listens (:class:`AddressError`); an address that cannot
        be bound is a :class:`ListenError`, after which nothing stays listening.
        """
        unknown = sorted(set(groups) - set(self._routes))
        if unknown:
            raise ValueError(f"no routes added for group(s) {', '.join(unknown)}")
        by_address: dict[str, list[str]] = {}
        for name, address in (("metrics", metrics_address), ("health", health_address), *groups.items()):
            if address:
                by_address.setdefault(address, []).append(name)
        parsed = {address: parse_address(address) for address in by_address}
        for address, names in by_address.items():
            host, port = parsed[address]
            context = next((tls[name] for name in names if tls and name in tls), None)
            subjects = next((client_subjects[n] for n in names if client_subjects and n in client_subjects), None)
            runner = web.AppRunner(self._application(names, subjects), access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            try:
                await web.TCPSite(runner, host, port, ssl_context=context).start()
            except OSError as error:
                await runner.cleanup()
                await self.stop()
                self.ports.clear()
                raise ListenError(f"cannot listen on {address}: {error}") from error
            self._runners.append(runner)
            bound = int(runner.addresses[-1][1]) if runner.addresses else port
            for name in names:
                self.ports[name] = bound

    def _application(self, names: list[str], subjects: Collection[str] | None = None) -> web.Application:
        middlewares = [_client_subjects_middleware(frozenset(subjects))] if subjects is not None else []
        app = web.Application(client_max_size=self.max_body_bytes, middlewares=middlewares)
        for name in names:
            if name == "metrics":
                app.router.add_get("/metrics", self._metrics)
            elif name == "health":
                app.router.add_get("/healthz", self._healthz)
                app.router.add_get("/readyz", self._readyz)
            else:
                self._routes[name](app)
        return app

    async def stop(self) -> None:
        """Close every listener (idempotent)."""
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()


def _client_subjects_middleware(allowed: frozenset[str]) -> Any:
    """Refuse (403, one log line) a request whose client certificate names no subject of ``allowed``."""

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        if allowed_identity(peercert, allowed) is None:
            names = client_identity(peercert)
            log.warning("client certificate refused", subjects=list(names), allowed=sorted(allowed), path=request.path)
            return web.Response(
                status=403,
                text=json.dumps({"error": f"client {', '.join(names) or '(no certificate)'} is not allowed"}),
                content_type="application/json",
            )
        response: web.StreamResponse = await handler(request)
        return response

    return check


def _evaluate(checks: list[tuple[str, Check]]) -> tuple[bool, dict[str, Any]]:
    ok = True
    details: dict[str, Any] = {}
    failing: list[str] = []
    errors: dict[str, str] = {}
    for name, check in checks:
        try:
            passed, more = check()
        except Exception as exc:
            passed, more = False, {}
            errors[name or "check"] = f"{type(exc).__name__}: {exc}"
        details.update(more)
        if not passed:
            ok = False
            if name:
                failing.append(name)
    if failing:
        details["failing"] = failing
    if errors:
        details["errors"] = errors
    return ok, details

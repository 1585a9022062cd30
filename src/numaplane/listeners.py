"""Every daemon's default metrics and probe listeners, in one place (issue 25 item 8; issue 26 finding 11).

Loopback only: nothing outside the host (or the pod) reaches a daemon's ``/metrics``, ``/healthz`` or
``/readyz`` unless it is asked for with ``:PORT`` (every interface), as the rendered manifests do where
Prometheus scrapes and the kubelet probes (docs/operator.md, "Metrics and probes"). A distinct port per
daemon and per listener, so any of them run side by side on one host (no two default to 8081).

No imports: the command line reads it without loading the HTTP server.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_ADDRESSES", "LISTENER_HELP", "default_address"]

#: Each daemon's default ``(metrics, health)`` listeners.
DEFAULT_ADDRESSES: Final[dict[str, tuple[str, str]]] = {
    "operator": ("127.0.0.1:8080", "127.0.0.1:8081"),
    "scheduler": ("127.0.0.1:8082", "127.0.0.1:8083"),
    "agent": ("127.0.0.1:2114", "127.0.0.1:8084"),
    "exporter": ("127.0.0.1:2112", "127.0.0.1:8085"),
}

#: The help text of a ``--metrics-address``/``--health-address`` option (``what``: the endpoints).
LISTENER_HELP: Final = "HOST:PORT for {what} (loopback by default; ':PORT' listens on every interface); '' disables."


def default_address(daemon: str, group: str) -> str:
    """The default listener of ``daemon``'s ``metrics`` or ``health`` endpoints."""
    metrics, health = DEFAULT_ADDRESSES[daemon]
    return metrics if group == "metrics" else health

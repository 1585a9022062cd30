"""numaplane.observability: what every long-running component shares to be observed (an adapter).

* :mod:`~numaplane.observability.logs` — :func:`configure_logging`: structlog over stdlib logging, one
  JSON object per line on stderr (or console text), every record with ``timestamp``, ``level``,
  ``logger`` and ``event``;
* :mod:`~numaplane.observability.http` — :class:`ProbeServer`: ``/metrics`` (a Prometheus registry of
  its own per instance), ``/healthz`` and ``/readyz`` (pluggable liveness and readiness checks) and any
  extra route group (the scheduler extender's verbs), each group on its own ``HOST:PORT`` or sharing
  one; :func:`parse_address`;
* :mod:`~numaplane.observability.errors` — :class:`AddressError`, :class:`ListenError`.

The agent, exporter, scheduler and operator each configure logging once from their command line and
run one :class:`ProbeServer`; components map :class:`ObservabilityError` to their own error types.
"""

from numaplane.observability.errors import AddressError, ListenError, ObservabilityError
from numaplane.observability.http import Check, ProbeServer, RouteAdder, parse_address
from numaplane.observability.logs import LOG_FORMATS, LOG_LEVELS, configure_logging

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "AddressError",
    "Check",
    "ListenError",
    "ObservabilityError",
    "ProbeServer",
    "RouteAdder",
    "configure_logging",
    "parse_address",
]

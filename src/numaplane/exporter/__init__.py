"""numaplane.exporter: publishes this node's NodeResourceTopology (the RTE's job, with its complaints fixed).

Modules: ``options`` (the configuration value), ``kubelet`` (kubelet config file), ``sources``
(PodResources API, sysfs), ``scan`` (inputs → object), ``events`` (triggers, coalescing rate limit,
notify file), ``mirror`` (list + watch of our object and the node's pods), ``publisher`` (writes
only on change), ``metrics``, ``daemon`` (the wiring, with ``/metrics``, ``/healthz`` and
``/readyz`` served by :class:`numaplane.observability.http.ProbeServer`), ``status`` (what the probes report), ``errors``. Logs are set up
by :func:`numaplane.observability.logs.configure_logging` (structlog JSON).
"""

from numaplane.exporter.daemon import Exporter
from numaplane.exporter.errors import ExporterConfigError, ExporterError
from numaplane.exporter.events import Trigger
from numaplane.exporter.options import ExporterOptions, NotifyBackend, PodExclude, RefreshMode
from numaplane.exporter.publisher import Outcome, Publisher
from numaplane.exporter.status import ExporterStatus

__all__ = [
    "Exporter",
    "ExporterConfigError",
    "ExporterError",
    "ExporterOptions",
    "ExporterStatus",
    "NotifyBackend",
    "Outcome",
    "PodExclude",
    "Publisher",
    "RefreshMode",
    "Trigger",
]

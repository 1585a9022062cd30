"""The exporter's Prometheus metrics, in a registry of its own (never the global default one).

Families (prefix ``numaplane_exporter_``; base units; counters end in ``_total``):

=============================================  =========  ======================================
name                                           type       labels
=============================================  =========  ======================================
``writes_total``                               counter    ``operation`` (create/update), ``trigger``
``skips_total``                                counter    ``trigger`` — scans that found the object unchanged
``errors_total``                               counter    ``kind`` (see :mod:`numaplane.exporter.errors`)
``events_total``                               counter    ``trigger`` — events posted to the gate
``events_coalesced_total``                     counter    — events folded into an already pending scan
``scan_duration_seconds``                      histogram  — reading inputs and computing the object
``write_duration_seconds``                     histogram  ``operation`` (create/update/unchanged)
``event_to_published_seconds``                 histogram  ``trigger`` — earliest event of a batch →
                                                          object on the server (or found unchanged)
``last_write_timestamp_seconds``               gauge      — Unix time of the last successful write
``ready``                                      gauge      — 1 when /readyz would answer 200
``info``                                       gauge      ``node``, ``refresh_mode``, ``fingerprint_method``,
                                                          ``notify_backend`` (always 1)
``zone_capacity`` / ``zone_allocatable`` /     gauge      ``node``, ``zone``, ``resource`` — from the last
``zone_available``                                        computed object (CPUs and devices: count;
                                                          memory and hugepages: bytes), at scrape time
=============================================  =========  ======================================

Histogram buckets are exponential-ish from 1 ms to 10 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from numaplane.nrt.model import NodeResourceTopology

__all__ = ["BUCKETS_SECONDS", "PREFIX", "ExporterMetrics", "ZoneCollector"]

PREFIX: Final = "numaplane_exporter"
BUCKETS_SECONDS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0)


class ZoneCollector(Collector):
    """Per-zone gauges computed at scrape time from the last object the exporter computed."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.nrt: NodeResourceTopology | None = None

    def collect(self) -> Iterator[Metric]:
        families = {
            field: GaugeMetricFamily(
                f"{PREFIX}_zone_{field}",
                f"Per-NUMA-zone {field} of the last computed NodeResourceTopology (count or bytes).",
                labels=["node", "zone", "resource"],
            )
            for field in ("capacity", "allocatable", "available")
        }
        nrt = self.nrt
        if nrt is not None:
            for zone in nrt.zones:
                for row in zone.resources:
                    labels = [self.node_name, zone.name, row.name]
                    families["capacity"].add_metric(labels, float(row.capacity.amount))
                    families["allocatable"].add_metric(labels, float(row.allocatable.amount))
                    families["available"].add_metric(labels, float(row.available.amount))
        yield from families.values()


class ExporterMetrics:
    """All metric families of one exporter, registered in :attr:`registry` (fresh per instance)."""

    def __init__(self, node_name: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.writes = Counter(f"{PREFIX}_writes", "NodeResourceTopology writes.", ["operation", "trigger"], registry=r)
        self.skips = Counter(f"{PREFIX}_skips", "Scans whose object was already published.", ["trigger"], registry=r)
        self.errors = Counter(f"{PREFIX}_errors", "Errors by kind.", ["kind"], registry=r)
        self.events = Counter(f"{PREFIX}_events", "Refresh events posted.", ["trigger"], registry=r)
        self.coalesced = Counter(f"{PREFIX}_events_coalesced", "Events folded into a pending scan.", registry=r)
        self.scan_seconds = Histogram(
            f"{PREFIX}_scan_duration_seconds",
            "Time to read the inputs and compute the object.",
            buckets=BUCKETS_SECONDS,
            registry=r,
        )
        self.write_seconds = Histogram(
            f"{PREFIX}_write_duration_seconds",
            "Time spent publishing (API calls included).",
            ["operation"],
            buckets=BUCKETS_SECONDS,
            registry=r,
        )
        self.event_to_published = Histogram(
            f"{PREFIX}_event_to_published_seconds",
            "From the earliest event of a batch to the object being on the server (or found unchanged).",
            ["trigger"],
            buckets=BUCKETS_SECONDS,
            registry=r,
        )
        self.last_write = Gauge(
            f"{PREFIX}_last_write_timestamp_seconds", "Unix time of the last successful write.", registry=r
        )
        self.ready = Gauge(f"{PREFIX}_ready", "1 when the exporter is ready (see /readyz).", registry=r)
        self.zone_memory_reported = Gauge(
            f"{PREFIX}_zone_memory_reported",
            "1 when the published zones carry memory rows; 0 when none does (memory manager policy None:"
            " NUMA-aware schedulers refuse every Guaranteed pod requesting memory on the node).",
            registry=r,
        )
        self.info = Gauge(
            f"{PREFIX}_info",
            "Static facts about this exporter (value always 1).",
            ["node", "refresh_mode", "fingerprint_method", "notify_backend"],
            registry=r,
        )
        self.zones = ZoneCollector(node_name)
        r.register(self.zones)
        # pre-create the label sets dashboards expect, so rates start at 0 rather than absent
        for kind in ("podresources_unavailable", "podresources_malformed", "api_conflict", "api_server"):
            self.errors.labels(kind=kind)

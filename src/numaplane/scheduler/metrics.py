"""The scheduler's Prometheus metrics, in a registry of its own (never the global default one).

Families (prefix ``numaplane_scheduler_``; base units; counters end in ``_total``), mirroring
kube-scheduler's names where one exists:

===============================================  =========  =============================================
name                                             type       labels
===============================================  =========  =============================================
``scheduling_attempt_duration_seconds``          histogram  ``result`` (scheduled / unschedulable / error)
                                                            — from taking the pod off the queue to the
                                                            binding's answer (or the failure)
``pending_pods``                                 gauge      ``queue`` (active / backoff / unschedulable),
                                                            read at scrape time
``binds_total``                                  counter    ``result`` (success / error)
``extender_requests_total``                      counter    ``verb`` (filter / prioritize / bind), ``code``
``extender_request_duration_seconds``            histogram  ``verb`` — body read to response ready
``cache_resyncs_total``                          counter    — over-reserve resyncs that flushed >= 1 node
``cache_flushed_nodes_total``                    counter    — nodes flushed by those resyncs
``events_total``                                 counter    ``reason`` (FailedScheduling / Scheduled)
``leader``                                       gauge      — 1 while this instance holds the lease
``info``                                         gauge      ``mode``, ``cache``, ``scoring_strategy`` (1)
===============================================  =========  =============================================

Histogram buckets are exponential from 1 ms (x2) to about 16 s, as kube-scheduler's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["BUCKETS_SECONDS", "PREFIX", "SchedulerMetrics"]

PREFIX: Final = "numaplane_scheduler"
BUCKETS_SECONDS: Final = tuple(0.001 * 2**i for i in range(15))


class SchedulerMetrics:
    """All metric families of one scheduler process, in :attr:`registry` (fresh per instance)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.attempt_seconds = Histogram(
            f"{PREFIX}_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency: queue pop to binding answer or failure.",
            ["result"],
            buckets=BUCKETS_SECONDS,
            registry=r,
        )
        self.pending = Gauge(f"{PREFIX}_pending_pods", "Pods waiting to be scheduled, by queue.", ["queue"], registry=r)
        self.binds = Counter(f"{PREFIX}_binds", "pods/binding requests sent, by result.", ["result"], registry=r)
        self.extender_requests = Counter(
            f"{PREFIX}_extender_requests", "Extender requests answered.", ["verb", "code"], registry=r
        )
        self.extender_seconds = Histogram(
            f"{PREFIX}_extender_request_duration_seconds",
            "Extender request handling time (body read to response ready).",
            ["verb"],
            buckets=BUCKETS_SECONDS,
            registry=r,
        )
        self.requeue_signals = Counter(
            f"{PREFIX}_requeue_signals",
            "Refused pods the extender asked kube-scheduler to retry because a node freed room, by result.",
            ["result"],
            registry=r,
        )
        self.resyncs = Counter(f"{PREFIX}_cache_resyncs", "Cache resyncs that flushed at least one node.", registry=r)
        self.flushed = Counter(f"{PREFIX}_cache_flushed_nodes", "Nodes flushed by cache resyncs.", registry=r)
        self.events = Counter(f"{PREFIX}_events", "Kubernetes Events posted, by reason.", ["reason"], registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this instance holds the leader lease.", registry=r)
        self.info = Gauge(
            f"{PREFIX}_info", "Static facts (value always 1).", ["mode", "cache", "scoring_strategy"], registry=r
        )
        for result in ("scheduled", "unschedulable", "error"):
            self.attempt_seconds.labels(result=result)
        for result in ("success", "error"):
            self.binds.labels(result=result)

    def watch_queues(self, sizes: dict[str, Callable[[], float]]) -> None:
        """Read the ``pending_pods`` gauge children from ``sizes`` at scrape time."""
        for queue, func in sizes.items():
            self.pending.labels(queue=queue).set_function(func)

    def flushed_nodes(self, count: int) -> None:
        if count:
            self.resyncs.inc()
            self.flushed.inc(count)

"""Prometheus metrics of the operator: reconciles, their duration, objects applied and pruned, NRT GC."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["Metrics"]


@dataclass
class Metrics:
    """Prometheus metrics of one operator instance (registered on its own registry)."""

    registry: CollectorRegistry
    reconciles: Counter
    duration: Histogram
    applied: Counter
    pruned: Counter
    nrt_collected: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> Metrics:
        reg = registry or CollectorRegistry()
        return cls(
            reg,
            Counter(
                "numaplane_operator_reconcile",
                "Reconciles by controller and result.",
                ["controller", "result"],
                registry=reg,
            ),
            Histogram(
                "numaplane_operator_reconcile_duration_seconds",
                "Reconcile duration.",
                ["controller"],
                buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10),
                registry=reg,
            ),
            Counter(
                "numaplane_operator_objects_applied", "Objects written by server-side apply.", ["kind"], registry=reg
            ),
            Counter(
                "numaplane_operator_objects_pruned", "Objects deleted because no longer wanted.", ["kind"], registry=reg
            ),
            Counter(
                "numaplane_operator_nrt_garbage_collected",
                "NRT objects of deleted nodes, or of ours whose node left the stack, removed.",
                registry=reg,
            ),
        )

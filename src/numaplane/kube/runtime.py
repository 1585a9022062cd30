"""The controller runtime in one import: informer, work queue, leader election, clocks.

Shared by the exporter, the scheduler, the operator and the agent. Each piece lives in its own
module (:mod:`~numaplane.kube.informer`, :mod:`~numaplane.kube.workqueue`,
:mod:`~numaplane.kube.leader`, :mod:`~numaplane.kube.clock`); this module re-exports them.
"""

from __future__ import annotations

from numaplane.kube.clock import Clock, FakeClock, SystemClock
from numaplane.kube.informer import EventHandlers, Indexer, IndexFunc, Informer, index_by_field
from numaplane.kube.leader import LeaderElectionConfig, LeaderElector
from numaplane.kube.workqueue import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WorkQueue,
    default_controller_rate_limiter,
)

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "EventHandlers",
    "FakeClock",
    "IndexFunc",
    "Indexer",
    "Informer",
    "ItemExponentialRateLimiter",
    "LeaderElectionConfig",
    "LeaderElector",
    "MaxOfRateLimiter",
    "RateLimiter",
    "SystemClock",
    "WorkQueue",
    "default_controller_rate_limiter",
    "index_by_field",
]

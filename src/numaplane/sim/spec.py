"""What a simulation run is given and what it returns: scheduler specs, engine settings, results.

:class:`SchedulerSpec` names a scheduler configuration (``default`` or a NUMA-aware one with its
scoring strategy and cache mode), :class:`SimConfig` the engine's timing and search settings
(simulated seconds), :class:`RunResult` one run's counts (pods unless said otherwise) and series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from numaplane.placement.model.strategies import ScoringStrategy

__all__ = ["DEFAULT_SCHEDULERS", "EXTRA_SCHEDULERS", "RunResult", "SchedulerSpec", "SimConfig"]


@dataclass(frozen=True)
class SchedulerSpec:
    """A scheduler configuration: ``numa_aware`` with a scoring ``strategy`` and a ``cache`` mode."""

    name: str
    numa_aware: bool = False
    strategy: str = "LeastAllocated"
    cache: str = "passthrough"  # passthrough | overreserve | discard-reserved

    @staticmethod
    def parse(text: str) -> SchedulerSpec:
        """``default`` or ``numa:<Strategy>[:<cache>]`` or one of the built-in names."""
        for spec in DEFAULT_SCHEDULERS + EXTRA_SCHEDULERS:
            if spec.name == text:
                return spec
        parts = text.split(":")
        if parts[0] == "default" and len(parts) == 1:
            return SchedulerSpec("default")
        if parts[0] == "numa" and 2 <= len(parts) <= 3:
            strategy = parts[1]
            cache = parts[2] if len(parts) == 3 else "overreserve"
            ScoringStrategy(strategy)  # validates the name
            if cache not in ("passthrough", "overreserve", "discard-reserved"):
                raise ValueError(f"unknown cache mode {cache!r} (passthrough, overreserve, discard-reserved)")
            return SchedulerSpec(f"numa-{strategy}-{cache}", True, strategy, cache)
        known = ", ".join(s.name for s in DEFAULT_SCHEDULERS + EXTRA_SCHEDULERS)
        raise ValueError(f"unknown scheduler {text!r}: use one of {known} or numa:<Strategy>[:<cache>]")


DEFAULT_SCHEDULERS: tuple[SchedulerSpec, ...] = (
    SchedulerSpec("default"),
    SchedulerSpec("numa-LeastAllocated-passthrough", True, "LeastAllocated", "passthrough"),
    SchedulerSpec("numa-LeastAllocated-overreserve", True, "LeastAllocated", "overreserve"),
    SchedulerSpec("numa-MostAllocated-overreserve", True, "MostAllocated", "overreserve"),
    SchedulerSpec("numa-BalancedAllocation-overreserve", True, "BalancedAllocation", "overreserve"),
    SchedulerSpec("numa-LeastNUMANodes-overreserve", True, "LeastNUMANodes", "overreserve"),
)
EXTRA_SCHEDULERS: tuple[SchedulerSpec, ...] = (
    SchedulerSpec("numa-LeastAllocated-discard-reserved", True, "LeastAllocated", "discard-reserved"),
)


@dataclass(frozen=True)
class SimConfig:
    """Engine parameters (seconds). ``duration_s`` None: until the last arrival + ``drain_s``."""

    duration_s: float | None = None
    drain_s: float = 60.0
    refresh_period_s: float = 10.0
    resync_period_s: float = 5.0
    retry_interval_s: float = 15.0
    recreate_delay_s: float = 1.0
    max_recreates: int = 3
    max_backoff_s: float = 10.0
    samples: int = 120
    sample_zones: bool = True
    fragmentation_cpus: int = 4
    percentage_of_nodes_to_score: int = 0  # kube-scheduler's setting; 0 = its adaptive default


@dataclass
class RunResult:
    """Outcome of one scheduler run (counts are pods unless said otherwise)."""

    scheduler: str
    pods: int = 0
    placed: int = 0
    rejections: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    pending: int = 0
    aligned: int = 0
    exclusive: int = 0
    attempts: int = 0
    unschedulable_attempts: int = 0
    cpu_utilisation: float = 0.0
    fragmentation: float = 0.0
    wall_seconds: float = 0.0
    events: int = 0
    times: list[float] = field(default_factory=list)
    rejections_over_time: list[int] = field(default_factory=list)
    utilisation_over_time: list[float] = field(default_factory=list)
    pending_over_time: list[int] = field(default_factory=list)
    zone_utilisation: dict[str, list[float]] = field(default_factory=dict)
    admissions: list[tuple[str, str, bool, str]] = field(default_factory=list)
    # the first message the nodes gave for each rejection reason (e.g. an invalid annotation's text)
    messages: dict[str, str] = field(default_factory=dict)
    # rejected bindings of pods the NUMA filter did not judge on that node (a NUMA-aware scheduler):
    # neither the node's policy nor the pod's own topology-policy is single-numa-node (upstream semantics)
    unfiltered: int = 0
    # pods still pending at the end whose numaplane.io/ preferences every node refuses (a NUMA-aware
    # scheduler holds them: its filter rejects them on every node, with the message in ``messages``)
    pending_invalid: int = 0

    @property
    def rejected(self) -> int:
        return sum(self.rejections.values())

    @property
    def aligned_share(self) -> float:
        return self.aligned / self.exclusive if self.exclusive else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "pods": self.pods,
            "placed": self.placed,
            "rejectedAtNode": self.rejected,
            "rejectionsByReason": dict(sorted(self.rejections.items())),
            "rejectedWithoutNumaFilter": self.unfiltered,
            "failedAfterRecreates": self.failed,
            "pending": self.pending,
            "pendingInvalidPreference": self.pending_invalid,
            "numaAlignedShare": round(self.aligned_share, 4),
            "exclusivePods": self.exclusive,
            "cpuUtilisation": round(self.cpu_utilisation, 4),
            "fragmentation": round(self.fragmentation, 4),
            "schedulingAttempts": self.attempts,
            "unschedulableAttempts": self.unschedulable_attempts,
            "wallSeconds": round(self.wall_seconds, 3),
        }

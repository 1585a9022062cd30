"""``NUMAResourcesScheduler`` (numaplane.io/v1): the NUMA-aware scheduler, standalone or as an extender.

A cluster-scoped singleton named :data:`SINGLETON_NAME`.

* ``mode: standalone`` — a Deployment running ``numaplane scheduler run``, a secondary scheduler for
  pods whose ``spec.schedulerName`` is ``schedulerName``.
* ``mode: extender`` — the stock kube-scheduler image (``kubeSchedulerImage``) with one profile named
  ``schedulerName`` and our extender (``numaplane scheduler extender``) as a sidecar on loopback.
  ``schedulerName: default-scheduler`` is accepted in this mode only: the rendered kube-scheduler then
  serves every pod of the default profile (docs/scheduler.md's first example; the cluster's own
  kube-scheduler must be stopped, or both schedule those pods).

``kubeSchedulerClient`` (extender mode): the rendered kube-scheduler's API client rate limit
(``clientConnection.qps``/``burst``). kube-scheduler's own default, 50/100, caps it near 25-50 bindings per
second (a binding and an Event per pod); the default here, 200/400, leaves room for a few hundred.
``numaplane scheduler run`` has no client-side rate limit of its own (the API server's priority and
fairness bounds it), so the field is refused in standalone mode (an option that does not apply).

``replicas > 1`` turns on Lease leader election. ``cacheResyncPeriod`` is a duration (``0s``
disables resync). Scoring weights are integers 1..100 per resource; without resources the
scheduler weighs ``cpu`` and ``memory`` 1 each.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.operator.api.meta import (
    API_VERSION,
    LogLevel,
    ObjectMeta,
    Problems,
    meta_to_dict,
    read_meta,
    valid_dns_label,
)
from numaplane.operator.errors import SpecError
from numaplane.placement.model.strategies import ScoringStrategy, StrategyType
from numaplane.resources.duration import format_duration

__all__ = [
    "DEFAULT_KUBE_SCHEDULER_IMAGE",
    "KIND",
    "SINGLETON_NAME",
    "InformerMode",
    "KubeSchedulerClient",
    "NUMAResourcesScheduler",
    "ResourceWeight",
    "SchedulerMode",
    "ScoringStrategySpec",
    "ScoringType",
]

KIND = "NUMAResourcesScheduler"
PLURAL = "numaresourcesschedulers"
SINGLETON_NAME = "numaresourcesscheduler"
DEFAULT_SCHEDULER_NAME = "numaplane-scheduler"
DEFAULT_KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.35.0"
#: The only repository ``kubeSchedulerImage`` may name: the image runs with a ServiceAccount that can
#: bind and delete every pod, so a CR editor must not be able to run an image of their choosing.
KUBE_SCHEDULER_REPOSITORY = "registry.k8s.io/kube-scheduler"
#: ``kubeSchedulerImage``: the upstream repository with a release tag (``v1.36.2``), a digest
#: (``@sha256:`` and 64 hex digits), or both. Checked by the CRD (``pattern``) and by :meth:`from_dict`.
KUBE_SCHEDULER_IMAGE_PATTERN = (
    r"^registry\.k8s\.io/kube-scheduler"
    r"(:v[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}(-[0-9A-Za-z.]{1,40})?(@sha256:[0-9a-f]{64})?|@sha256:[0-9a-f]{64})$"
)
MAX_REPLICAS = 5
#: ``kubeSchedulerClient`` defaults and bounds (requests per second; burst in requests).
DEFAULT_CLIENT_QPS = 200
DEFAULT_CLIENT_BURST = 2 * DEFAULT_CLIENT_QPS  # burst defaults to twice qps
MAX_CLIENT_QPS = 5000
MAX_CLIENT_BURST = 10000
MAX_WEIGHT = 100


class SchedulerMode(enum.StrEnum):
    STANDALONE = "standalone"
    EXTENDER = "extender"


class SchedulerDRA(enum.StrEnum):
    """Enabled: ``scheduler run --dra`` allocates pods' claims in the zone of their CPUs (standalone), or
    ``scheduler extender --dra`` filters out nodes where no zone holds a pod's CPUs and memory with a free
    device of each claim (extender mode)."""

    DISABLED = "Disabled"
    ENABLED = "Enabled"


class InformerMode(enum.StrEnum):
    """Pod informer of the scheduler's cache: the shared one, or a dedicated one that also sees
    pods the kubelet has not yet reported terminated (upstream's ``Dedicated``, the default)."""

    SHARED = "Shared"
    DEDICATED = "Dedicated"


#: The CRD's ``scoringStrategy.type``: the one table of scoring strategies (its enum, in table order).
ScoringType = StrategyType


@dataclass(frozen=True, slots=True)
class ResourceWeight:
    name: str
    weight: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "weight": self.weight}


@dataclass(frozen=True, slots=True)
class ScoringStrategySpec:
    """``spec.scoringStrategy`` as written (the resources in the order given, none when omitted); the
    strategy it means is :attr:`strategy`, the scheduler's one :class:`ScoringStrategy`."""

    type: ScoringType = ScoringType.LEAST_ALLOCATED
    resources: tuple[ResourceWeight, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type.value}
        if self.resources:
            out["resources"] = [r.to_dict() for r in self.resources]
        return out

    @property
    def strategy(self) -> ScoringStrategy:
        """The scheduler's scoring strategy (no resources: its default weights, cpu=1 and memory=1)."""
        if not self.resources:
            return ScoringStrategy(self.type)
        return ScoringStrategy(self.type, {r.name: r.weight for r in self.resources})

    @property
    def flag_values(self) -> list[str]:
        """``--resource-weight`` values (``name=weight``); the default pair when none are given."""
        return [f"{name}={weight}" for name, weight in self.strategy.weights.items()]


@dataclass(frozen=True, slots=True)
class KubeSchedulerClient:
    """``spec.kubeSchedulerClient``: kube-scheduler's ``clientConnection`` rate limit (extender mode).
    ``qps`` in requests per second, ``burst`` in requests (twice ``qps`` when omitted); ``burst >= qps``."""

    qps: int = DEFAULT_CLIENT_QPS
    burst: int = DEFAULT_CLIENT_BURST

    def to_dict(self) -> dict[str, Any]:
        return {"qps": self.qps, "burst": self.burst}


@dataclass(frozen=True, slots=True)
class NUMAResourcesScheduler:
    """The parsed, validated custom resource. ``cache_resync_period_seconds`` is in seconds."""

    metadata: ObjectMeta
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    mode: SchedulerMode = SchedulerMode.STANDALONE
    cache_resync_period_seconds: float = 5.0
    scoring_strategy: ScoringStrategySpec = field(default_factory=ScoringStrategySpec)
    scheduler_informer: InformerMode = InformerMode.DEDICATED
    replicas: int = 1
    log_level: LogLevel = LogLevel.NORMAL
    kube_scheduler_image: str = DEFAULT_KUBE_SCHEDULER_IMAGE
    dra: SchedulerDRA = SchedulerDRA.DISABLED
    kube_scheduler_client: KubeSchedulerClient = field(default_factory=KubeSchedulerClient)

    @property
    def leader_elect(self) -> bool:
        return self.replicas > 1

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": self.scheduler_name,
            "mode": self.mode.value,
            "cacheResyncPeriod": format_duration(self.cache_resync_period_seconds),
            "scoringStrategy": self.scoring_strategy.to_dict(),
            "schedulerInformer": self.scheduler_informer.value,
            "replicas": self.replicas,
            "logLevel": self.log_level.value,
        }
        if self.mode is SchedulerMode.EXTENDER:
            spec["kubeSchedulerImage"] = self.kube_scheduler_image
            spec["kubeSchedulerClient"] = self.kube_scheduler_client.to_dict()
        if self.dra is SchedulerDRA.ENABLED:
            spec["dra"] = self.dra.value
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta_to_dict(self.metadata), "spec": spec}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NUMAResourcesScheduler:
        """Parse and validate; raises :class:`SpecError` listing every problem."""
        meta = read_meta(obj)
        if meta.name != SINGLETON_NAME:
            raise SpecError(
                [f"metadata.name: must be {SINGLETON_NAME!r} (the resource is a singleton), not {meta.name!r}"],
                reason="IncorrectName",
            )
        p = Problems()
        spec = p.mapping(obj, "spec", "")
        p.unknown_fields(
            spec,
            {
                "schedulerName",
                "mode",
                "cacheResyncPeriod",
                "scoringStrategy",
                "schedulerInformer",
                "replicas",
                "logLevel",
                "kubeSchedulerImage",
                "kubeSchedulerClient",
                "dra",
            },
            "spec",
        )
        d = cls(meta)
        name = p.string(spec, "schedulerName", "spec", d.scheduler_name)
        if not valid_dns_label(name):
            p.add("spec.schedulerName", f"{name!r} must be a DNS label")
        raw_scoring = p.mapping(spec, "scoringStrategy", "spec")
        p.unknown_fields(raw_scoring, {"type", "resources"}, "spec.scoringStrategy")
        weights: list[ResourceWeight] = []
        for i, raw in enumerate(p.sequence(raw_scoring, "resources", "spec.scoringStrategy")):
            where = f"spec.scoringStrategy.resources[{i}]"
            if not isinstance(raw, Mapping):
                p.add(where, "must be an object")
                continue
            p.unknown_fields(raw, {"name", "weight"}, where)
            rname = p.string(raw, "name", where)
            if not rname:
                p.add(f"{where}.name", "is required")
            elif any(w.name == rname for w in weights):
                p.add(f"{where}.name", f"duplicate resource {rname!r}")
            weights.append(ResourceWeight(rname, p.integer(raw, "weight", where, 1, 1, MAX_WEIGHT)))
        image = p.string(spec, "kubeSchedulerImage", "spec", d.kube_scheduler_image)
        if not image:
            p.add("spec.kubeSchedulerImage", "must not be empty")
        elif len(image) > 256 or re.fullmatch(KUBE_SCHEDULER_IMAGE_PATTERN, image) is None:
            p.add(
                "spec.kubeSchedulerImage",
                f"{image[:80]!r} is not {KUBE_SCHEDULER_REPOSITORY} with a release tag (:vX.Y.Z) or a digest (@sha256:...)",
            )
        raw_client = p.mapping(spec, "kubeSchedulerClient", "spec")
        p.unknown_fields(raw_client, {"qps", "burst"}, "spec.kubeSchedulerClient")
        qps = p.integer(raw_client, "qps", "spec.kubeSchedulerClient", DEFAULT_CLIENT_QPS, 1, MAX_CLIENT_QPS)
        burst = p.integer(raw_client, "burst", "spec.kubeSchedulerClient", 2 * qps, 1, MAX_CLIENT_BURST)
        if burst < qps:
            p.add("spec.kubeSchedulerClient.burst", f"must be at least qps ({qps}), not {burst}")
        result = cls(
            metadata=meta,
            scheduler_name=name,
            mode=p.choice(spec, "mode", "spec", SchedulerMode, d.mode),
            dra=p.choice(spec, "dra", "spec", SchedulerDRA, d.dra),
            cache_resync_period_seconds=p.duration(spec, "cacheResyncPeriod", "spec", d.cache_resync_period_seconds),
            scoring_strategy=ScoringStrategySpec(
                p.choice(raw_scoring, "type", "spec.scoringStrategy", ScoringType, ScoringType.LEAST_ALLOCATED),
                tuple(weights),
            ),
            scheduler_informer=p.choice(spec, "schedulerInformer", "spec", InformerMode, d.scheduler_informer),
            replicas=p.integer(spec, "replicas", "spec", d.replicas, 1, MAX_REPLICAS),
            log_level=p.choice(spec, "logLevel", "spec", LogLevel, d.log_level),
            kube_scheduler_image=image,
            kube_scheduler_client=KubeSchedulerClient(qps, burst),
        )
        if name == "default-scheduler" and result.mode is not SchedulerMode.EXTENDER:
            p.add(
                "spec.schedulerName",
                "must not be default-scheduler unless mode is extender (numaplane scheduler run is a secondary"
                " scheduler with the basic predicates only)",
            )
        if "kubeSchedulerClient" in spec and result.mode is not SchedulerMode.EXTENDER:
            p.add(
                "spec.kubeSchedulerClient",
                "applies to mode extender only (kube-scheduler's API client; numaplane scheduler run has no"
                " client-side rate limit)",
            )
        p.raise_if_any()
        return result

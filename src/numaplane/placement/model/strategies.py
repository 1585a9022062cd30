"""The one table of NUMA scoring strategies, and the ``scoringStrategy`` value built on it.

:class:`StrategyType` lists every ``ScoringStrategyType`` of the NodeResourceTopologyMatch plugin args
once; :data:`STRATEGIES` says what each does. Everything that names a strategy is derived from it: the
CLI choices (``--scoring-strategy``), the operator's CRD enum and parsed type, the scheduler config's
and the simulator spec's validation (:class:`ScoringStrategy` refuses any other name), and the docs.
The per-zone formulas live with the code that evaluates them (:func:`numaplane.placement.explain.score.zone_score`
per node, :func:`numaplane.placement.arrays.kernels.unit_score` vectorised): a new per-zone strategy is
one row here and its formula in those two modules.

Pure: no I/O, no numpy (light users import it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.limits import MAX_CONFIG_INTEGER
from numaplane.placement.model.errors import PlacementConfigError

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "STRATEGY_TYPES", "ScoringStrategy", "StrategyInfo", "StrategyType"]


class StrategyType(enum.StrEnum):
    """Every scoring strategy's name, as the plugin args spell it (members compare equal to the names)."""

    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"
    BALANCED_ALLOCATION = "BalancedAllocation"
    LEAST_NUMA_NODES = "LeastNUMANodes"


@dataclass(frozen=True)
class StrategyInfo:
    """What a strategy does. ``per_zone``: it scores each zone and the node takes the smallest non-zero
    zone score (it then applies to ``single-numa-node`` nodes only, 0 elsewhere); otherwise it scores the
    node as a whole (LeastNUMANodes, every policy). ``weighted``: it reads the per-resource weights."""

    summary: str
    per_zone: bool = True
    weighted: bool = True


#: The table (in the order the CLI and the CRD list the names; the default first).
STRATEGIES: Mapping[StrategyType, StrategyInfo] = {
    StrategyType.LEAST_ALLOCATED: StrategyInfo("prefer the zones with the most left after the pod (spreading)"),
    StrategyType.MOST_ALLOCATED: StrategyInfo("prefer the zones with the least left after the pod (bin packing)"),
    StrategyType.BALANCED_ALLOCATION: StrategyInfo(
        "prefer the zones whose resources the pod uses most evenly", weighted=False
    ),
    StrategyType.LEAST_NUMA_NODES: StrategyInfo(
        "prefer the nodes where the pod needs the fewest NUMA zones", per_zone=False, weighted=False
    ),
}

#: Every strategy name, in table order.
STRATEGY_TYPES: tuple[str, ...] = tuple(kind.value for kind in STRATEGIES)
DEFAULT_STRATEGY = StrategyType.LEAST_ALLOCATED


def strategy_type(name: object) -> StrategyType:
    """The :class:`StrategyType` called ``name``; raise :class:`PlacementConfigError` naming it."""
    if isinstance(name, str) and name in STRATEGY_TYPES:
        return StrategyType(name)
    raise PlacementConfigError(f"invalid ScoringStrategyType {name!r}")


@dataclass(frozen=True)
class ScoringStrategy:
    """``scoringStrategy`` of the plugin args: a type and per-resource weights (default cpu=1, memory=1).
    ``type`` is the name (a :class:`StrategyType` given is kept as its plain string value; an unknown name
    raises :class:`PlacementConfigError`)."""

    type: str = DEFAULT_STRATEGY.value
    weights: Mapping[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1}, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", strategy_type(self.type).value)

    @property
    def kind(self) -> StrategyType:
        """:attr:`type` as its :class:`StrategyType`."""
        return StrategyType(self.type)

    def weight(self, resource: str) -> int:
        """Configured weight when >= 1, else 1 (unlisted resources count with weight 1)."""
        w = self.weights.get(resource)
        return w if w is not None and w >= 1 else 1

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> ScoringStrategy:
        """From ``{"type": ..., "resources": [{"name", "weight"}]}``; raise :class:`PlacementConfigError`."""
        kind = strategy_type(doc.get("type", DEFAULT_STRATEGY.value)).value
        resources = doc.get("resources")
        if resources is None:
            return ScoringStrategy(kind)
        weights: dict[str, int] = {}
        if not isinstance(resources, list):
            raise PlacementConfigError("scoringStrategy.resources must be a list")
        for item in resources:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise PlacementConfigError(f"invalid scoringStrategy resource {item!r}")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise PlacementConfigError(f"invalid weight {weight!r} for {item['name']!r}")
            if not -MAX_CONFIG_INTEGER <= weight <= MAX_CONFIG_INTEGER:
                raise PlacementConfigError(f"the weight for {item['name']!r} must be within ±{MAX_CONFIG_INTEGER}")
            weights[item["name"]] = weight
        return ScoringStrategy(kind, weights)

"""The NUMA score: rank feasible nodes for a pod (0..100, higher is better, not normalized across nodes).

:func:`score` reproduces the NodeResourceTopologyMatch Score (scheduler-nrt.md B):

* a pod that is not Guaranteed scores 100 everywhere, without reading any NRT;
* no NRT object, untrusted data (``fresh=False``) or unusable data: 0;
* LeastNUMANodes applies to every policy (:mod:`numaplane.placement.explain.least_numa`); MostAllocated,
  LeastAllocated and BalancedAllocation only to ``single-numa-node`` nodes (0 otherwise).

Per-zone functions use integer values rounded up (upstream ``Value()``: 500m cpu counts as 1, memory
in bytes) and integer division. ``avail`` is the zone's NRT ``available``. Every requested resource takes
part, in name order, with its configured weight when that is >= 1, else 1:

* MostAllocated: ``req * 100 // avail`` (0 when ``avail`` is 0/missing or ``req > avail``);
* LeastAllocated: ``(avail - req) * 100 // avail`` (same 0 cases);
  zone score = ``sum(score_r * w_r) // sum(w_r)``. The two 0 cases compare the *exact* quantities
  (upstream ``CmpInt64(0)`` and ``Cmp``), the formula uses the rounded-up values: a 300m request does
  not fit 200m available (0) although both values are 1. This matters on nodes where the pod fits no
  zone, which the extender's prioritize verb and ``explain`` are asked about too;
* BalancedAllocation (weights ignored): fractions ``req / avail`` as floats (1 when ``avail`` is 0 or
  missing); any fraction > 1 → 0; else ``int((1 - sample variance) * 100)`` (variance divides by n-1).

Node score = the smallest non-zero zone score (0 if all are 0). Pod scope scores the plugin's pod
request; container scope scores each init then app container against the untouched zones and takes
the integer mean.

Requests the API server never admits (negative quantities: Kubernetes API validation requires
requests, limits and overhead to be non-negative; not in scheduler-nrt.md) can make a zone score
negative or above 100; kube-scheduler's framework would then fail the cycle (it rejects a plugin score
outside 0..100). Here :func:`score` clamps the node score to
0..100 instead, so such a pod is ranked, never raises. Quantities beyond int64 (upstream ``Value()`` is
an int64; the parser here keeps any magnitude up to ``1e1000``) enter BalancedAllocation's float
fractions clamped to the int64 range, as upstream could never see more; every other rule uses exact
integers. Neither case changes a result for non-negative requests and values inside int64.

Deviations where upstream divides by zero (none reachable from a well-formed Guaranteed pod with
cpu and memory requests): an empty request list scores a zone 0; a single-resource BalancedAllocation
list has variance 0; a container-scope pod without containers scores 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from numaplane.placement.explain.filter import NRTInput, as_topology
from numaplane.placement.explain.least_numa import least_numa_score
from numaplane.placement.model.effective import judged_policy, judged_scope
from numaplane.placement.model.requests import pod_request
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.placement.model.view import NodeTopology, NUMAZone
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = [
    "MAX_SCORE",
    "balanced_allocation",
    "node_score_from_zones",
    "score",
    "zone_score",
]

MAX_SCORE = 100
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _value(q: Quantity | None) -> int:
    return 0 if q is None else math.ceil(q.amount)


def zone_score(kind: str, requests: Sequence[tuple[str, Quantity]], zone: NUMAZone, strategy: ScoringStrategy) -> int:
    """Most/LeastAllocated score of one zone for ``(resource, requested quantity)`` pairs."""
    total = 0
    weights = 0
    for name, quantity in requests:
        available = zone.available.get(name)
        if available is None or available.is_zero() or quantity.amount > available.amount:
            part = 0
        else:
            req, avail = quantity.value(), available.value()
            if kind == "MostAllocated":
                part = req * MAX_SCORE // avail
            else:
                part = (avail - req) * MAX_SCORE // avail
        w = strategy.weight(name)
        total += part * w
        weights += w
    return total // weights if weights else 0


def _float(value: int) -> float:
    """``float(value)`` with the value clamped to the int64 range (upstream ``Value()`` is an int64),
    so huge quantities never overflow the float conversion or the variance."""
    return float(min(max(value, _INT64_MIN), _INT64_MAX))


def balanced_allocation(requests: Sequence[tuple[str, int]], zone: NUMAZone) -> int:
    """BalancedAllocation score of one zone (module docstring)."""
    fractions = []
    for name, req in requests:
        avail = _value(zone.available.get(name))
        fraction = 1.0 if avail == 0 else _float(req) / _float(avail)
        if fraction > 1:
            return 0
        fractions.append(fraction)
    n = len(fractions)
    if n == 0:
        return 0
    if n == 1:
        return MAX_SCORE
    mean = 0.0
    for f in fractions:
        mean += f
    mean /= n
    squares = 0.0
    compensation = 0.0
    for f in fractions:
        d = f - mean
        squares += d * d
        compensation += d
    variance = (squares - compensation * compensation / n) / (n - 1)
    return int((1 - variance) * MAX_SCORE)


def node_score_from_zones(scores: Sequence[int]) -> int:
    """The smallest non-zero zone score, 0 when every zone scored 0."""
    non_zero = [s for s in scores if s != 0]
    return min(non_zero) if non_zero else 0


def _unit_score(requests: Mapping[str, Quantity], topology: NodeTopology, strategy: ScoringStrategy) -> int:
    if strategy.type == "BalancedAllocation":
        values = [(name, _value(requests[name])) for name in sorted(requests)]
        return node_score_from_zones([balanced_allocation(values, z) for z in topology.zones])
    exact = [(name, requests[name]) for name in sorted(requests)]
    return node_score_from_zones([zone_score(strategy.type, exact, z, strategy) for z in topology.zones])


def score(
    pod: Pod,
    nrt: NRTInput | None,
    node: object,
    strategy: ScoringStrategy,
    *,
    fresh: bool = True,
) -> int:
    """The node's score for ``pod`` (module docstring). ``node`` is accepted for symmetry and unused."""
    del node
    if pod.qos_class != "Guaranteed":
        return MAX_SCORE
    if nrt is None or not fresh:
        return 0
    topology = as_topology(nrt)
    if topology.problem is not None:
        return 0
    if strategy.type == "LeastNUMANodes":
        return least_numa_score(pod, topology)
    if judged_policy(pod, topology.config.policy) != "single-numa-node":
        return 0
    if judged_scope(pod, topology.config.scope) == "pod":
        return _clamp(_unit_score(pod_request(pod), topology, strategy))
    containers = pod.all_containers()
    if not containers:
        return 0
    return _clamp(sum(_unit_score(c.requests, topology, strategy) for c in containers) // len(containers))


def _clamp(value: int) -> int:
    """0..100; only negative requests (never admitted upstream) score outside it (module docstring)."""
    return min(max(value, 0), MAX_SCORE)

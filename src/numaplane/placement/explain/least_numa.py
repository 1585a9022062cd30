"""The LeastNUMANodes scoring strategy: prefer nodes where the pod needs the fewest NUMA zones.

Rules (scheduler-nrt.md B.5), for Guaranteed pods (others score 100 before reaching this module):

* Minimal zone set for a request list: for k = 1 .. number of usable zones, look at every
  k-combination of zone *list positions* in lexicographic order. A combination is valid only if every
  zone in it lists every requested resource name — zero-quantity requests included (upstream
  ``isValidCombineResources`` walks every request key, so a ``example.com/nic: 0`` request that no zone
  lists means no combination, and the node scores 0); it fits if, for each non-zero request, the
  combined ``available`` passes the filter's suitability rule. The optimal average distance
  for k is the minimum over *all* k-combinations (fitting or not). The first fitting combination with
  that optimal distance wins (``optimal=True``); otherwise the fitting one with the smallest distance
  (first on ties, ``optimal=False``). The first k with any fit ends the search.
* Average distance of a combination: the sum over ordered pairs (i, j), i = j included, of zone i's cost
  to zone j's NUMA id (255 when missing), divided by k². Sums are compared exactly (same k² divisor).
* Score: ``step = 100 // maxNUMANodes``; ``100 - count * step``, plus ``step // 2`` when optimal.
* Pod scope: the plugin's pod request; 100 if no requested name is listed by any zone; 0 if nothing fits.
* Container scope: init containers then app containers; a container whose requested names no zone lists
  is skipped; any container that fits nowhere makes the node score 0. After each container, its
  requests are taken from the chosen zones in NUMA id order, as much as possible from each in turn
  (init containers included). The score uses the largest set size and whether *every* container got
  a distance-optimal set; 100 if no container needed NUMA resources.

Deviation: upstream's container-scope subtraction indexes the zone list by NUMA id, which is only
right for sorted, contiguous ids; here zones are matched by id, so unsorted or sparse ids work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from numaplane.placement.explain.filter import WorkZone, suitable, work_zones
from numaplane.placement.model.effective import judged_scope
from numaplane.placement.model.requests import pod_request
from numaplane.placement.model.view import NodeTopology
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import ZERO, Quantity

__all__ = ["MAX_DISTANCE", "least_numa_score", "normalize_score", "numa_nodes_required"]

MAX_DISTANCE = 255  # ACPI SLIT "unknown / unreachable"
MAX_SCORE = 100


def normalize_score(count: int, optimal: bool, max_numa_nodes: int) -> int:
    """``100 - count * step (+ step // 2 if optimal)`` with ``step = 100 // max_numa_nodes``."""
    step = MAX_SCORE // max_numa_nodes
    score = MAX_SCORE - count * step
    return score + step // 2 if optimal else score


def only_non_numa(zones: Sequence[WorkZone], requests: Mapping[str, Quantity]) -> bool:
    """No requested name (any quantity) is listed by any usable zone."""
    return not any(name in z.available for name in requests for z in zones)


def _distance_sum(zones: Sequence[WorkZone], costs: Sequence[Mapping[int, int]], combo: Sequence[int]) -> int:
    return sum(costs[i].get(zones[j].numa_id, MAX_DISTANCE) for i in combo for j in combo)


def numa_nodes_required(
    zones: Sequence[WorkZone],
    costs: Sequence[Mapping[int, int]],
    requests: Mapping[str, Quantity],
    guaranteed: bool,
) -> tuple[tuple[int, ...], bool] | None:
    """``(zone positions, optimal)`` of the minimal fitting zone set, or ``None`` (module docstring)."""
    wanted = [(name, qty) for name, qty in requests.items() if not qty.is_zero()]
    names = list(requests)
    for k in range(1, len(zones) + 1):
        combos = list(combinations(range(len(zones)), k))
        distances = [_distance_sum(zones, costs, combo) for combo in combos]
        best = min(distances)
        fallback: tuple[tuple[int, ...], int] | None = None
        for combo, distance in zip(combos, distances, strict=True):
            if not all(name in zones[i].available for i in combo for name in names):
                continue
            if not _fits(zones, combo, wanted, guaranteed):
                continue
            if distance == best:
                return combo, True
            if fallback is None or distance < fallback[1]:
                fallback = (combo, distance)
        if fallback is not None:
            return fallback[0], False
    return None


def _fits(
    zones: Sequence[WorkZone], combo: Sequence[int], wanted: Sequence[tuple[str, Quantity]], guaranteed: bool
) -> bool:
    for name, qty in wanted:
        total = ZERO
        for i in combo:
            avail = zones[i].available.get(name)
            if avail is None:
                return False
            total = total + avail
        if not suitable(guaranteed, name, qty, total):
            return False
    return True


def _take(zones: Sequence[WorkZone], chosen: Sequence[int], requests: Mapping[str, Quantity]) -> None:
    """Take each request from the chosen zones in NUMA id order, as much as possible from each."""
    ordered = sorted(chosen, key=lambda i: zones[i].numa_id)
    for name, qty in requests.items():
        left = qty.amount
        for i in ordered:
            if left <= 0:
                break
            avail = zones[i].available.get(name)
            if avail is None:
                continue
            taken = min(avail.amount, left)
            if taken <= 0:
                continue
            zones[i].available[name] = Quantity(avail.amount - taken, avail.binary)
            left -= taken


def _count(zones: Sequence[WorkZone], chosen: Sequence[int]) -> int:
    """Distinct NUMA ids in the chosen set (the size of upstream's NUMA mask)."""
    return len({zones[i].numa_id for i in chosen})


def least_numa_score(pod: Pod, topology: NodeTopology) -> int:
    """LeastNUMANodes score (0..100) of a Guaranteed ``pod`` on the node described by ``topology``."""
    zones = work_zones(topology)
    costs = [z.costs for z in topology.zones]
    max_numa = topology.config.max_numa_nodes
    guaranteed = pod.qos_class == "Guaranteed"
    if judged_scope(pod, topology.config.scope) == "pod":
        reqs = pod_request(pod)
        if only_non_numa(zones, reqs):
            return MAX_SCORE
        found = numa_nodes_required(zones, costs, reqs, guaranteed)
        if found is None:
            return 0
        return normalize_score(_count(zones, found[0]), found[1], max_numa)
    largest = 0
    all_optimal = True
    for container in pod.all_containers():
        if only_non_numa(zones, container.requests):
            continue
        found = numa_nodes_required(zones, costs, container.requests, guaranteed)
        if found is None:
            return 0
        chosen, optimal = found
        all_optimal = all_optimal and optimal
        largest = max(largest, _count(zones, chosen))
        _take(zones, chosen, container.requests)
    if largest == 0:
        return MAX_SCORE
    return normalize_score(largest, all_optimal, max_numa)

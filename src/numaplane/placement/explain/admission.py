"""Opt-in filtering of ``restricted`` and ``best-effort`` nodes, approximating kubelet admission.

Upstream filters only ``single-numa-node`` nodes and lets every other node pass
(kubernetes-sigs/scheduler-plugins#885). With ``FilterOptions(kubelet_admission=True)`` the filter
also checks nodes whose policy is ``restricted`` or ``best-effort``, by predicting from the NRT what the
kubelet's Topology Manager and resource managers would do. What is checked, per *unit* (the plugin's
pod request in pod scope; each init container alone, then each app container with accounting, in
container scope):

* Which requests count: non-zero requests; for pods that are not Guaranteed, cpu / memory / hugepages
  are not NUMA-managed by the kubelet and are skipped (devices still count). A resource the node does
  not advertise rejects the node (as in the upstream filter). A resource no usable zone lists carries
  no NUMA data and is not constrained.
* ``best-effort``: the kubelet admits whatever the alignment, but its managers must still allocate:
  each counted resource must fit in the sum of ``available`` over the zones listing it.
* ``restricted``: the kubelet admits only when the merged hint is *preferred*. For each counted resource
  r, ``k_r`` is the size of the smallest zone set whose ``allocatable`` sum holds the request (none →
  reject); r's preferred sets are the k_r-zone sets whose ``available`` sum holds it. Merged hints are
  intersections of one set per resource, so the unit is admitted iff some NUMA id belongs to a
  preferred set of every counted resource.
* Accounting (container scope, app containers): the unit goes to the lowest NUMA id satisfying the rule
  above; each resource is taken from its chosen set (that id first, then by id; for best-effort every
  zone listing it), as much as possible from each zone in turn.

Known approximations: the kubelet's CPU manager sizes preferred hints from the CPUs of the machine,
the memory manager from NUMA groups and the device manager from healthy devices; NRT ``allocatable``
stands for all three. Memory-manager cross-NUMA groups and device preferred allocations are not
modelled. Rejections use the upstream messages (``cannot align pod`` ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from itertools import combinations

from numaplane.placement.explain.filter import WorkZone, shortfalls, work_zones
from numaplane.placement.model.node import NodeInfo
from numaplane.placement.model.requests import is_numa_affine, pod_request
from numaplane.placement.model.result import MSG_APP, MSG_INIT, MSG_POD, MSG_SIDECAR, Fit, Reject
from numaplane.placement.model.view import NodeTopology
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["admit"]

# Per unit: lowest chosen NUMA id and, per resource, the zone positions to take it from.
_Plan = tuple[int, dict[str, list[int]]]


def _counted(requests: Mapping[str, Quantity], guaranteed: bool) -> dict[str, Fraction]:
    return {
        name: q.amount for name, q in requests.items() if not q.is_zero() and (guaranteed or not is_numa_affine(name))
    }


def _sum(
    zones: Sequence[WorkZone], combo: Sequence[int], name: str, allocatable: Sequence[Mapping[str, Quantity]] | None
) -> Fraction:
    source = [allocatable[i] for i in combo] if allocatable is not None else [zones[i].available for i in combo]
    return sum((m[name].amount for m in source if name in m), Fraction(0))


def _plan(
    zones: Sequence[WorkZone],
    allocatable: Sequence[Mapping[str, Quantity]],
    wanted: Mapping[str, Fraction],
    policy: str,
) -> _Plan | None:
    sets: dict[str, list[tuple[int, ...]]] = {}
    for name, qty in wanted.items():
        listing = [i for i, z in enumerate(zones) if name in z.available]
        if not listing:
            continue  # no NUMA data for this resource: not constrained
        if policy == "best-effort":
            if _sum(zones, listing, name, None) < qty:
                return None
            sets[name] = [tuple(listing)]
            continue
        k_min = next(
            (
                k
                for k in range(1, len(listing) + 1)
                for c in combinations(listing, k)
                if _sum(zones, c, name, allocatable) >= qty
            ),
            None,
        )
        if k_min is None:
            return None
        fitting = [c for c in combinations(listing, k_min) if _sum(zones, c, name, None) >= qty]
        if not fitting:
            return None
        sets[name] = fitting
    ids = sorted({z.numa_id for z in zones})
    if not sets:
        return (ids[0] if ids else 0), {}
    for numa in ids:
        chosen: dict[str, list[int]] = {}
        for name, candidates in sets.items():
            match = next((c for c in candidates if any(zones[i].numa_id == numa for i in c)), None)
            if match is None and policy == "restricted":
                break
            combo = match if match is not None else candidates[0]
            chosen[name] = sorted(combo, key=lambda i: (zones[i].numa_id != numa, zones[i].numa_id))
        else:
            return numa, chosen
    return None


def _take(zones: Sequence[WorkZone], plan: Mapping[str, list[int]], wanted: Mapping[str, Fraction]) -> None:
    for name, order in plan.items():
        left = wanted[name]
        for i in order:
            avail = zones[i].available[name]
            taken = min(max(avail.amount, Fraction(0)), left)
            zones[i].available[name] = Quantity(avail.amount - taken, avail.binary)
            left -= taken


def admit(pod: Pod, topology: NodeTopology, node: NodeInfo) -> Fit | Reject:
    """Kubelet-style admission check of ``pod`` on a ``restricted`` or ``best-effort`` node."""
    policy = topology.config.policy
    guaranteed = pod.qos_class == "Guaranteed"
    zones = work_zones(topology)
    allocatable = [z.allocatable for z in topology.zones]
    if topology.config.scope == "pod":
        units = [("pod", pod_request(pod), MSG_POD, True)]
    else:
        units = [(c.name, dict(c.requests), MSG_SIDECAR if c.sidecar else MSG_INIT, False) for c in pod.init_containers]
        units += [(c.name, dict(c.requests), MSG_APP, True) for c in pod.containers]
    placements: list[tuple[str, int]] = []
    for unit, requests, message, charge in units:
        missing = next((n for n, q in requests.items() if not q.is_zero() and not node.advertises(n)), None)
        if missing is not None:
            return Reject(message, "Unschedulable", unit, missing)
        wanted = _counted(requests, guaranteed)
        plan = _plan(zones, allocatable, wanted, policy)
        if plan is None:
            notes = (f"topology manager policy {policy!r} (kubelet admission mode)",)
            return Reject(message, "Unschedulable", unit, None, shortfalls(zones, requests, guaranteed), notes)
        if charge:
            placements.append((unit, plan[0]))
            _take(zones, plan[1], wanted)
    return Fit(True, tuple(placements), (f"topology manager policy {policy!r} checked (kubelet admission mode)",))

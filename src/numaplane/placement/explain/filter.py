"""The NUMA filter: can the kubelet align this pod on one NUMA zone of this node?

:func:`filter` reproduces the NodeResourceTopologyMatch Filter (scheduler-nrt.md A), in this order:

1. no node → ``Error`` ``node not found``; a pod whose ``numaplane.io/`` preferences are invalid, or
   would relax the node's policy, → ``invalid pod preference: <the admission's message>`` (the node
   rejects it with ``InvalidPreference``; the same text on every node, so kube-scheduler's summary and
   the standalone scheduler's event carry it); the pod's own ``topology-scope``/``topology-policy`` replace the NRT's
   (:mod:`numaplane.placement.model.effective`) in the steps below, and the verdict's notes say so;
2. a BestEffort pod that names no non-native resource in any container passes unchecked;
3. data the cache does not trust (``fresh=False``) → ``Unschedulable`` ``invalid node topology data``;
4. no NRT object → pass (partial coverage is allowed); a pod asking ``memory-pinning: true`` on a
   node whose readable NRT lists no memory in any zone (memory manager not ``Static``) → ``pod
   preference not met: ...`` (the reason in the text, the explanation in the notes);
5. only policy ``single-numa-node`` is checked; other policies pass (unless
   :attr:`FilterOptions.kubelet_admission` is on, see :mod:`numaplane.placement.explain.admission`);
6. pod scope: the plugin's pod request (:func:`~numaplane.placement.model.requests.pod_request`) must fit one
   zone (``cannot align pod``); container scope: each init container (sidecars included) must fit one
   zone on its own (``cannot align init container`` / ``cannot align sidecar container``), then app
   containers in order must each fit one zone, and each is charged to the lowest feasible NUMA id
   before the next one is checked (``cannot align container``).

Per request (A.5): zero quantities are skipped; a resource the node does not advertise fails at once;
a zone is feasible for a resource if it lists it and, unless the pod is not Guaranteed and the resource
is NUMA-affine (cpu, memory, hugepages), ``available >= requested``; a host-level resource that no zone
lists is ignored; all other resources narrow the set of feasible zones, and an empty set fails.

Beyond upstream (documented deviations, none changes a conformance case):

* a malformed NRT document (given as a dict, or with a negative quantity in a NUMA zone) or a node
  object that does not parse is a rejection (``malformed node topology data`` / ``malformed node
  object``), never an exception;
* with policy ``single-numa-node``, a node whose NRT has no usable NUMA zone is rejected with
  ``no usable NUMA zone in node topology data`` even for a pod upstream would pass (one that requests
  only host-level resources): the node publishes topology data we cannot read, so alignment cannot be
  predicted (disable with ``FilterOptions(reject_without_zones=False)``);
* a verdict carries explanations (:mod:`numaplane.placement.model.result`).

Pure: no I/O, no clock; the input objects are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.placement.model.effective import (
    MSG_INVALID_PREFERENCE,
    MSG_PREFERENCE_UNMET,
    PINNING_UNMET_SHORT,
    effective_placement,
    judged_policy,
    judged_scope,
    pinning_note,
    relaxes,
)
from numaplane.placement.model.errors import NodeDataError
from numaplane.placement.model.node import NodeInfo, node_info
from numaplane.placement.model.requests import include_non_native, is_host_level, is_numa_affine, pod_request
from numaplane.placement.model.result import (
    MSG_APP,
    MSG_INCONSISTENT,
    MSG_INIT,
    MSG_INVALID_DATA,
    MSG_MALFORMED,
    MSG_NO_USABLE_ZONE,
    MSG_NODE_NOT_FOUND,
    MSG_POD,
    MSG_SIDECAR,
    Fit,
    Reject,
    ZoneShortfall,
)
from numaplane.placement.model.view import NodeTopology, malformed, node_topology
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["DEFAULT_OPTIONS", "FilterOptions", "NRTInput", "WorkZone", "align", "as_topology", "filter", "suitable"]

NRTInput = NodeTopology | NodeResourceTopology | Mapping[str, Any]
_FULL_MASK = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class FilterOptions:
    """Filter switches. Defaults give upstream behaviour plus the documented deviations."""

    kubelet_admission: bool = False  # also check restricted / best-effort nodes (admission.py)
    reject_without_zones: bool = True


DEFAULT_OPTIONS = FilterOptions()


@dataclass(slots=True)
class WorkZone:
    """A mutable copy of a zone's ``available`` map, for container-scope accounting."""

    numa_id: int
    name: str
    available: dict[str, Quantity]


def suitable(guaranteed: bool, resource: str, requested: Quantity, available: Quantity) -> bool:
    """Upstream ``isResourceSetSuitable``: non-Guaranteed NUMA-affine requests need presence only."""
    if not guaranteed and is_numa_affine(resource):
        return True
    return available.amount >= requested.amount


def align(
    zones: Sequence[WorkZone], requests: Mapping[str, Quantity], guaranteed: bool, node: NodeInfo
) -> tuple[int | None, str | None]:
    """``(lowest feasible NUMA id, None)`` or ``(None, failing resource)`` for one request list."""
    mask = _FULL_MASK
    for name in sorted(requests):
        qty = requests[name]
        if qty.is_zero():
            continue
        if not node.advertises(name):
            return None, name
        listed = False
        resource_mask = 0
        for zone in zones:
            avail = zone.available.get(name)
            if avail is None:
                continue
            listed = True
            if suitable(guaranteed, name, qty, avail):
                resource_mask |= 1 << zone.numa_id
        if not listed and is_host_level(name):
            continue
        mask &= resource_mask
        if mask == 0:
            return None, name
    return (mask & -mask).bit_length() - 1, None


def shortfalls(
    zones: Sequence[WorkZone], requests: Mapping[str, Quantity], guaranteed: bool
) -> tuple[ZoneShortfall, ...]:
    """What each zone lacks for ``requests`` (explanation only; host-level resources no zone lists skipped)."""
    out: list[ZoneShortfall] = []
    for name in sorted(requests):
        qty = requests[name]
        if qty.is_zero() or (is_host_level(name) and all(name not in z.available for z in zones)):
            continue
        for zone in zones:
            avail = zone.available.get(name)
            if avail is None or not suitable(guaranteed, name, qty, avail):
                out.append(ZoneShortfall(zone.name, zone.numa_id, name, qty, avail))
    return tuple(out)


def work_zones(topology: NodeTopology) -> list[WorkZone]:
    return [WorkZone(z.numa_id, z.name, dict(z.available)) for z in topology.zones]


def as_topology(nrt: NRTInput) -> NodeTopology:
    """The scheduler's view of ``nrt``; a dict is parsed strictly, a malformed one gives a view with
    :attr:`NodeTopology.problem` set (see :func:`numaplane.placement.model.view.malformed`)."""
    if isinstance(nrt, NodeTopology):
        return nrt
    if isinstance(nrt, NodeResourceTopology):
        return node_topology(nrt)
    try:
        return node_topology(parse_strict(nrt))
    except NRTFormatError as exc:
        meta = nrt.get("metadata") if isinstance(nrt, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        return malformed(name if isinstance(name, str) else "?", str(exc))


def _reject(
    reason: str, unit: str, resource: str | None, zones: Sequence[WorkZone], reqs: Mapping[str, Quantity], g: bool
) -> Reject:
    return Reject(reason, "Unschedulable", unit, resource, shortfalls(zones, reqs, g))


def _pod_scope(pod: Pod, topology: NodeTopology, node: NodeInfo, guaranteed: bool) -> Fit | Reject:
    zones = work_zones(topology)
    reqs = pod_request(pod)
    numa, resource = align(zones, reqs, guaranteed, node)
    if numa is None:
        return _reject(MSG_POD, "pod", resource, zones, reqs, guaranteed)
    return Fit(True, (("pod", numa),))


def _container_scope(pod: Pod, topology: NodeTopology, node: NodeInfo, guaranteed: bool) -> Fit | Reject:
    zones = work_zones(topology)
    for init in pod.init_containers:
        numa, resource = align(zones, init.requests, guaranteed, node)
        if numa is None:
            return _reject(
                MSG_SIDECAR if init.sidecar else MSG_INIT, init.name, resource, zones, init.requests, guaranteed
            )
    placements: list[tuple[str, int]] = []
    for app in pod.containers:
        numa, resource = align(zones, app.requests, guaranteed, node)
        if numa is None:
            return _reject(MSG_APP, app.name, resource, zones, app.requests, guaranteed)
        placements.append((app.name, numa))
        for name, qty in app.requests.items():
            if qty.is_zero() or (not guaranteed and is_numa_affine(name)):
                continue
            for zone in zones:
                if zone.numa_id != numa or name not in zone.available:
                    continue
                left = zone.available[name] - qty
                if left.amount < 0:  # unreachable when align() chose this zone; kept as upstream's guard
                    return Reject(MSG_INCONSISTENT, "Error", app.name, name, notes=(f"{zone.name}: {name} {left}",))
                zone.available[name] = left
    return Fit(True, tuple(placements))


def filter(
    pod: Pod,
    nrt: NRTInput | None,
    node: NodeInfo | Mapping[str, Any] | None,
    *,
    fresh: bool = True,
    options: FilterOptions = DEFAULT_OPTIONS,
) -> Fit | Reject:
    """The NUMA filter verdict for ``pod`` on ``node`` given the node's NRT (module docstring).

    ``nrt`` is ``None`` when the node has no NRT object; ``fresh=False`` when the cache says its data
    must not be trusted now. Never raises for bad per-node data.
    """
    if node is None:
        return Reject(MSG_NODE_NOT_FOUND, "Error")
    wanted = effective_placement(pod)
    if wanted.invalid is not None:  # the node rejects it with InvalidPreference, whatever its state
        return Reject(f"{MSG_INVALID_PREFERENCE}: {wanted.invalid}")
    if wanted.preferences.topology_policy is not None and nrt is not None and fresh:
        seen = as_topology(nrt)
        relaxing = None if seen.problem is not None else relaxes(pod, seen.config.policy)
        if relaxing is not None:
            return Reject(f"{MSG_INVALID_PREFERENCE}: {relaxing}")
    qos = pod.qos_class
    if qos == "BestEffort" and not include_non_native(pod):
        return Fit(False, notes=("BestEffort pod without devices is not NUMA-checked",))
    try:
        info = node_info(node)
    except NodeDataError as exc:
        return Reject("malformed node object", "Error", notes=(str(exc),))
    if not fresh:
        return Reject(MSG_INVALID_DATA)
    if nrt is None:
        return Fit(False, notes=("node has no NodeResourceTopology object",))
    topology = as_topology(nrt)
    if topology.problem is not None:
        return Reject(MSG_MALFORMED, notes=(topology.problem,))
    unmet = pinning_note(pod, any("memory" in z.available for z in topology.zones))
    if unmet is not None:
        return Reject(f"{MSG_PREFERENCE_UNMET}: {PINNING_UNMET_SHORT}", resource="memory", notes=(unmet,))
    policy = judged_policy(pod, topology.config.policy)
    if policy != "single-numa-node":
        if options.kubelet_admission and policy in ("restricted", "best-effort"):
            from numaplane.placement.explain.admission import admit

            return admit(pod, topology, info)
        return Fit(False, notes=(f"topology manager policy {policy!r} is not filtered",))
    guaranteed = qos == "Guaranteed"
    if judged_scope(pod, topology.config.scope) == "pod":
        verdict = _pod_scope(pod, topology, info, guaranteed)
    else:
        verdict = _container_scope(pod, topology, info, guaranteed)
    own = (wanted.policy_note(topology.config.policy), wanted.scope_note(topology.config.scope))
    notes = tuple(note for note in own if note is not None) + wanted.unjudged
    if topology.ignored:
        notes += (f"ignored zones: {topology.describe_ignored()}",)
    if isinstance(verdict, Fit):
        if not topology.zones and options.reject_without_zones:
            return Reject(MSG_NO_USABLE_ZONE, notes=notes)
        return Fit(verdict.checked, verdict.placements, verdict.notes + notes)
    if not topology.zones:
        notes = ("no usable NUMA zone", *notes)
    return Reject(
        verdict.reason, verdict.code, verdict.unit, verdict.resource, verdict.shortfalls, verdict.notes + notes
    )

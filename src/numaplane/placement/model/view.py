"""The scheduler's reading of one NodeResourceTopology: topology manager config and NUMA zones.

:func:`node_topology` turns an NRT object (:class:`numaplane.nrt.model.NodeResourceTopology`) into a
:class:`NodeTopology`, the only input the filter and score functions read. It follows the plugin's
rules (scheduler-nrt.md A.2, A.3):

* Topology manager config: defaults ``none`` / ``container`` / 8 NUMA nodes. The first entry of the
  legacy ``topologyPolicies`` list maps ``SingleNUMANode{Pod,Container}Level``,
  ``BestEffort{Pod,Container}Level`` and ``Restricted{Pod,Container}Level``; other values are ignored.
  Then the top-level attributes override, one by one: ``topologyManagerScope`` (exactly ``container``
  or ``pod``), ``topologyManagerPolicy`` (exactly ``none``, ``best-effort``, ``restricted`` or
  ``single-numa-node``), ``topologyManagerMaxNUMANodes`` (an integer > 1, clamped to 1024). The first
  attribute of a name wins.
* NUMA zones: zones of type exactly ``Node`` named ``node-<id>``. Other zones are skipped and reported
  in :attr:`NodeTopology.ignored`. Ids above 63 are skipped as well: upstream skips ids above 64 and
  can never select id 64 because its NUMA mask has 64 bits, so dropping 64 too only differs in a
  corner that upstream itself mishandles. Zone order is document order (not sorted by id).
* A zone's resources map each row name to its ``available`` quantity (a later duplicate row wins, as
  upstream's map assignment does); ``allocatable`` is kept for the opt-in kubelet admission mode.
  Costs map the peer's NUMA id (parsed with the same ``node-<id>`` rule, ids up to 64) to the distance.
* A negative ``available`` or ``allocatable`` in a usable zone makes the whole object unusable (a
  :func:`malformed` view: the node fails the filter and scores 0). The CRD pattern admits a sign, but
  no exporter publishes negative amounts and upstream's arithmetic on them is meaningless (a
  BalancedAllocation score far below 0, for instance).

Invariants: a :class:`NodeTopology` is immutable (:meth:`NodeTopology.charged` returns a new one); one
with :attr:`NodeTopology.problem` set stands for an object that could not be parsed (see
:func:`malformed`), has no zones, fails the filter and scores 0.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from numaplane.nrt.model import ZONE_TYPE_NODE, NodeResourceTopology, Zone, zone_numa_id
from numaplane.resources.quantity import ZERO, Quantity

__all__ = [
    "DEFAULT_MAX_NUMA_NODES",
    "MAX_NUMA_ID",
    "SHARED_READINGS",
    "IgnoredZone",
    "NUMAZone",
    "NodeTopology",
    "Policy",
    "Scope",
    "TopologyManagerConfig",
    "ZoneMemo",
    "ZoneReading",
    "ZoneReadings",
    "malformed",
    "node_topology",
    "topology_manager_config",
]

Policy = Literal["none", "best-effort", "restricted", "single-numa-node"]
Scope = Literal["container", "pod"]

DEFAULT_MAX_NUMA_NODES = 8
LIMIT_MAX_NUMA_NODES = 1024
MAX_NUMA_ID = 63  # highest id the 64-bit NUMA mask can hold
_MAX_COST_ID = 64  # upstream skips cost entries above this id

_LEGACY: dict[str, tuple[Policy, Scope]] = {
    "SingleNUMANodePodLevel": ("single-numa-node", "pod"),
    "SingleNUMANodeContainerLevel": ("single-numa-node", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "RestrictedContainerLevel": ("restricted", "container"),
}
_POLICIES: tuple[Policy, ...] = ("none", "best-effort", "restricted", "single-numa-node")
_SCOPES: tuple[Scope, ...] = ("container", "pod")


@dataclass(frozen=True, slots=True)
class TopologyManagerConfig:
    """The node's topology manager policy and scope as published in its NRT."""

    policy: Policy = "none"
    scope: Scope = "container"
    max_numa_nodes: int = DEFAULT_MAX_NUMA_NODES


@dataclass(frozen=True, slots=True)
class NUMAZone:
    """One usable NUMA zone. Quantities are exact; ``costs`` maps peer NUMA id → distance."""

    numa_id: int
    name: str
    available: Mapping[str, Quantity] = field(default_factory=dict, hash=False)
    allocatable: Mapping[str, Quantity] = field(default_factory=dict, hash=False)
    costs: Mapping[int, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class IgnoredZone:
    """A zone the plugin does not treat as a NUMA cell, and why."""

    name: str
    reason: str


#: Serial numbers of views: every :class:`NodeTopology` gets the next one (never reused in a process).
_SERIALS = itertools.count(1)

#: What a charged view was made of: ``(serial of the view charged, the requests charged, in order)``.
ChargedFrom = tuple[int, tuple[Mapping[str, Quantity], ...]]


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """What the scheduler reads from a node's NRT: config, usable NUMA zones, skipped zones.

    Bookkeeping outside equality (never read by the filter or the score): ``serial``, a number no
    other view of the process has (``dataclasses.replace`` gives the copy a new one), and
    ``charged_from``, set on a view made by :meth:`charged` only: the serial of the view charged and
    the requests, so that a consumer holding rows of that view can apply the charges to them instead
    of reading the new view whole (:meth:`~numaplane.placement.arrays.cluster.ClusterArrays.upsert`).
    A serial, not a reference: a chain of charged views would keep every earlier view alive."""

    node: str
    config: TopologyManagerConfig = TopologyManagerConfig()
    zones: tuple[NUMAZone, ...] = ()
    ignored: tuple[IgnoredZone, ...] = ()
    problem: str | None = None  # set when the object could not be read at all (no zones then)
    serial: int = field(default_factory=_SERIALS.__next__, init=False, compare=False, repr=False)
    charged_from: ChargedFrom | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def resource_names(self) -> frozenset[str]:
        """Names listed by at least one usable zone (everything else is non-NUMA for this node)."""
        return frozenset(name for z in self.zones for name in z.available)

    def charged(self, requests: Iterable[Mapping[str, Quantity]]) -> NodeTopology:
        """Every zone's ``available`` minus each request, clamped at 0 (over-reserve accounting).

        Each request is charged to *every* zone, for the resources the zone lists; unlisted requested
        resources are ignored (scheduler-nrt.md C.5).
        """
        reqs = list(requests)
        if not reqs:
            return self
        zones = []
        for zone in self.zones:
            avail = dict(zone.available)
            for req in reqs:
                for name, qty in req.items():
                    if name in avail:
                        left = avail[name] - qty
                        avail[name] = left if left.amount.numerator >= 0 else ZERO
            zones.append(NUMAZone(zone.numa_id, zone.name, avail, zone.allocatable, zone.costs))
        out = NodeTopology(self.node, self.config, tuple(zones), self.ignored, self.problem)
        object.__setattr__(out, "charged_from", (self.serial, tuple(reqs)))  # frozen: set once, here
        return out

    def describe_ignored(self) -> str:
        """``name (reason), ...`` for explanations; empty when nothing was skipped."""
        return ", ".join(f"{z.name} ({z.reason})" for z in self.ignored)


def _atoi(text: str) -> int | None:
    """Go ``strconv.Atoi`` syntax: optional sign then ASCII decimal digits."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit() or len(body) > 18:  # Atoi: int64 only
        return None
    return int(text)


def topology_manager_config(nrt: NodeResourceTopology) -> TopologyManagerConfig:
    """Policy, scope and max NUMA nodes from the legacy list then the attributes (module docstring)."""
    policy: Policy = "none"
    scope: Scope = "container"
    max_numa = DEFAULT_MAX_NUMA_NODES
    if nrt.topology_policies and nrt.topology_policies[0] in _LEGACY:
        policy, scope = _LEGACY[nrt.topology_policies[0]]
    attr_scope = nrt.attribute("topologyManagerScope")
    for candidate_scope in _SCOPES:
        if attr_scope == candidate_scope:
            scope = candidate_scope
    attr_policy = nrt.attribute("topologyManagerPolicy")
    for candidate_policy in _POLICIES:
        if attr_policy == candidate_policy:
            policy = candidate_policy
    attr_max = nrt.attribute("topologyManagerMaxNUMANodes")
    if attr_max is not None:
        value = _atoi(attr_max)
        if value is not None and value > 1:
            max_numa = min(value, LIMIT_MAX_NUMA_NODES)
    config = TopologyManagerConfig(policy, scope, max_numa)
    return _CONFIGS.setdefault(config, config)  # few distinct values: one object each (issue 30: memory)


_CONFIGS: dict[TopologyManagerConfig, TopologyManagerConfig] = {}  # at most 4 * 2 * LIMIT_MAX_NUMA_NODES


ZoneReading = NUMAZone | IgnoredZone | str  # how a zone reads: usable, ignored, or the problem
ZoneMemo = dict[int, tuple[Zone, ZoneReading]]  # id(zone) → (zone, how it reads)


class _ReadingRef(weakref.ref[Zone]):
    """A weak reference to a zone carrying its id and how it reads (one object per table entry)."""

    __slots__ = ("key", "reading")
    key: int
    reading: ZoneReading


class ZoneReadings:
    """How each live zone object reads, by identity, shared by every object holding the zone.

    Zones are immutable and shared between objects (publishers reuse them between a node's
    objects; :class:`numaplane.nrt.sharing.ZoneTable` shares equal zones between nodes), so the
    views of all those objects share one :class:`NUMAZone` per zone object and read it once. An
    entry goes when its zone is freed (weak reference): the table never outgrows the live zones,
    and an id is never reused while its entry exists.
    """

    def __init__(self) -> None:
        self._entries: dict[int, _ReadingRef] = {}
        self._forget = self._dropped  # one bound method shared by every reference

    def __len__(self) -> int:
        return len(self._entries)

    def read(self, zone: Zone) -> ZoneReading:
        entry = self._entries.get(id(zone))
        if entry is not None and entry() is zone:
            return entry.reading
        entry = _ReadingRef(zone, self._forget)
        entry.key, entry.reading = id(zone), _zone(zone)
        self._entries[entry.key] = entry
        return entry.reading

    def _dropped(self, ref: _ReadingRef) -> None:
        if self._entries.get(ref.key) is ref:
            del self._entries[ref.key]


#: The process's readings (pure memo: readings depend only on the zone object, which never changes).
SHARED_READINGS = ZoneReadings()


def node_topology(nrt: NodeResourceTopology, memo: ZoneMemo | None = None) -> NodeTopology:
    """The scheduler's view of ``nrt`` (module docstring). Never raises on well-typed input.

    ``memo`` (optional, the caller's) maps ``id(zone)`` to ``(zone, how it reads)``: Zone objects are
    immutable and publishers reuse them between objects, so a caller that keeps the memo of a node's
    previous object reads each reused zone once. On return it holds this object's zones (an entry
    holds its zone, so the id cannot be reused while it exists). Without ``memo``, zones are read
    through :data:`SHARED_READINGS` (equal results; views of objects sharing a zone share its
    :class:`NUMAZone`)."""
    zones: list[NUMAZone] = []
    ignored: list[IgnoredZone] = []
    seen: ZoneMemo = {}
    problem: str | None = None
    for zone in nrt.zones:
        if memo is None:
            parsed = SHARED_READINGS.read(zone)
        else:
            known = memo.get(id(zone))
            parsed = known[1] if known is not None and known[0] is zone else _zone(zone)
        if memo is not None:
            seen[id(zone)] = (zone, parsed)
        if isinstance(parsed, NUMAZone):
            zones.append(parsed)
        elif isinstance(parsed, IgnoredZone):
            ignored.append(parsed)
        else:
            problem = parsed
            break
    if memo is not None:
        memo.clear()
        memo.update(seen)
    if problem is not None:
        return malformed(nrt.name, problem)
    return NodeTopology(nrt.name, topology_manager_config(nrt), tuple(zones), tuple(ignored))


def _zone(zone: Zone) -> ZoneReading:
    """One zone as the view reads it: a usable NUMA zone, an ignored one, or the problem making the
    whole object unusable."""
    if zone.type != ZONE_TYPE_NODE:
        return IgnoredZone(zone.name, f"type {zone.type!r} is not {ZONE_TYPE_NODE!r}")
    numa = zone_numa_id(zone.name)
    if numa is None:
        return IgnoredZone(zone.name, "name is not node-<id>")
    if numa > MAX_NUMA_ID:
        return IgnoredZone(zone.name, f"NUMA id {numa} is above {MAX_NUMA_ID}")
    available: dict[str, Quantity] = {}
    allocatable: dict[str, Quantity] = {}
    for row in zone.resources:
        if row.available.amount < 0 or row.allocatable.amount < 0:
            return f"zone {zone.name}: {row.name} has a negative quantity"
        available[row.name] = row.available
        allocatable[row.name] = row.allocatable
    costs: dict[int, int] = {}
    for cost in zone.costs:
        peer = zone_numa_id(cost.name)
        if peer is not None and peer <= _MAX_COST_ID:
            costs[peer] = cost.value
    return NUMAZone(numa, zone.name, available, _shared(allocatable), _shared(costs))


# Equal maps of different zones held once (issue 30: memory with every zone distinct, the allocatable
# amounts and the distances of most zones are still alike). Views never modify their maps.
_SHARED_MAPS: dict[tuple[tuple[object, object], ...], Mapping[Any, Any]] = {}
_SHARED_LIMIT = 1 << 14
_M = TypeVar("_M", bound=Mapping[Any, Any])


def _shared(values: _M) -> _M:
    """The map equal to ``values`` (same items, same order) already held, else ``values`` itself."""
    key = tuple(values.items())
    if len(_SHARED_MAPS) >= _SHARED_LIMIT:
        _SHARED_MAPS.clear()
    known: _M = _SHARED_MAPS.setdefault(key, values)  # type: ignore[assignment]
    return known


def malformed(node: str, problem: str) -> NodeTopology:
    """The view of an NRT document that could not be parsed: no zones, ``problem`` says why."""
    return NodeTopology(node, problem=problem)

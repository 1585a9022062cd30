"""The ``topology.node.k8s.io`` NodeResourceTopology (NRT) object as frozen dataclasses.

Shape (v1alpha2, JSON field names as the upstream CRD defines them)::

    apiVersion: topology.node.k8s.io/v1alpha2      kind: NodeResourceTopology
    metadata: {name, labels, annotations, ownerReferences, ...}
    topologyPolicies: [str]        deprecated, optional (v1alpha1 required it)
    attributes: [{name, value}]    optional, node level
    zones: [{name, type, parent?, costs?: [{name, value:int64}], attributes?, resources?:
             [{name, capacity, allocatable, available}]}]

Invariants and conventions:

* Quantities are exact :class:`~numaplane.resources.quantity.Quantity` values; the text (or JSON
  integer) they were read from is kept in :attr:`ResourceInfo.raw` and re-emitted verbatim by
  :meth:`NodeResourceTopology.to_dict`, so a foreign object round-trips byte-for-byte in its resource
  rows. Computed rows (``raw`` is ``None``) are emitted as canonical quantity strings (plain integers
  for counts and bytes, like the upstream exporter's DecimalSI quantities).
* Optional lists are omitted from ``to_dict`` when empty, as Go's ``omitempty`` does; ``zones`` is
  always emitted. ``metadata`` is the product's one :class:`~numaplane.resources.meta.ObjectMeta`
  (re-exported here with :class:`OwnerReference`): keys without a typed field (``uid``,
  ``resourceVersion``, ``managedFields``...) are kept in :attr:`ObjectMeta.extra` and re-emitted.
* Zone names are free strings: a consumer decides what to do with zones that are not
  ``node-<id>`` (see :func:`zone_numa_id`) or whose ``type`` is not ``Node``.
* Parsing never raises anything but :class:`~numaplane.nrt.errors.NRTFormatError` (naming the field)
  for malformed input; :func:`~numaplane.nrt.parse.parse_lenient` drops malformed zones, rows and attributes instead and
  reports them, for consumers that must keep going on foreign objects.
* Dict-valued fields are excluded from hashing; everything else is hashable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from numaplane.resources.meta import ObjectMeta, OwnerReference
from numaplane.resources.quantity import Quantity, format_quantity

__all__ = [
    "API_VERSION",
    "API_VERSION_V1ALPHA1",
    "GROUP",
    "KIND",
    "ZONE_TYPE_NODE",
    "Attribute",
    "CostInfo",
    "NodeResourceTopology",
    "ObjectMeta",
    "OwnerReference",
    "ResourceInfo",
    "Zone",
    "find_attribute",
    "merge_attributes",
    "set_attribute",
    "zone_name",
    "zone_numa_id",
]

GROUP = "topology.node.k8s.io"
API_VERSION = f"{GROUP}/v1alpha2"
API_VERSION_V1ALPHA1 = f"{GROUP}/v1alpha1"
KIND = "NodeResourceTopology"
ZONE_TYPE_NODE = "Node"

# Go strconv.Atoi syntax (optional sign, decimal digits), as upstream numanode.NameToID uses it.
_NUMA_NAME = re.compile(r"node-([+-]?[0-9]+)\Z")
_MAX_ID_DIGITS = 18

QuantityText = str | int


@dataclass(frozen=True, slots=True)
class Attribute:
    """A ``{name, value}`` attribute (both strings)."""

    name: str
    value: str


@dataclass(frozen=True, slots=True)
class CostInfo:
    """A ``{name, value}`` cost: the distance (int64, ACPI SLIT scale) from this zone to zone ``name``."""

    name: str
    value: int


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ResourceInfo:
    """One resource row of a zone. Counts for CPUs/devices, bytes for memory/hugepages.

    Weakly referenceable: equal rows are shared between zones (:mod:`numaplane.nrt.sharing`).

    ``raw`` holds the original JSON values of (capacity, allocatable, available) when parsed; it is
    ignored by equality.
    """

    name: str
    capacity: Quantity
    allocatable: Quantity
    available: Quantity
    raw: tuple[QuantityText, QuantityText, QuantityText] | None = field(default=None, compare=False)

    @staticmethod
    def of_ints(name: str, capacity: int, allocatable: int, available: int) -> ResourceInfo:
        """A computed row from integer counts or byte sizes."""
        return ResourceInfo(
            name, Quantity.from_int(capacity), Quantity.from_int(allocatable), Quantity.from_int(available)
        )

    def to_dict(self) -> dict[str, Any]:
        values: tuple[QuantityText, ...] = self.raw or tuple(
            format_quantity(q.amount, binary=q.binary) for q in (self.capacity, self.allocatable, self.available)
        )
        return {"name": self.name, "capacity": values[0], "allocatable": values[1], "available": values[2]}


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Zone:
    """A topology zone; ``type == "Node"`` and name ``node-<id>`` for a NUMA node. ``parent`` "" = unset.

    Weakly referenceable: equal zones are shared between objects (:mod:`numaplane.nrt.sharing`).
    """

    name: str
    type: str = ZONE_TYPE_NODE
    parent: str = ""
    costs: tuple[CostInfo, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    resources: tuple[ResourceInfo, ...] = ()

    @property
    def numa_id(self) -> int | None:
        """The NUMA id if this is a ``Node`` zone named ``node-<id>``, else ``None``."""
        return zone_numa_id(self.name) if self.type == ZONE_TYPE_NODE else None

    def resource(self, name: str) -> ResourceInfo | None:
        """The first row named ``name`` (rows should be unique; the first one wins otherwise)."""
        for row in self.resources:
            if row.name == name:
                return row
        return None

    def attribute(self, name: str) -> str | None:
        return find_attribute(self.attributes, name)

    def cost_to(self, name: str) -> int | None:
        for cost in self.costs:
            if cost.name == name:
                return cost.value
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.parent:
            out["parent"] = self.parent
        if self.costs:
            out["costs"] = [{"name": c.name, "value": c.value} for c in self.costs]
        if self.attributes:
            out["attributes"] = _attrs_to_list(self.attributes)
        if self.resources:
            out["resources"] = [r.to_dict() for r in self.resources]
        return out


@dataclass(frozen=True, slots=True)
class NodeResourceTopology:
    """A NodeResourceTopology object. ``metadata.name`` is the node name (the object is cluster-scoped)."""

    metadata: ObjectMeta
    zones: tuple[Zone, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    topology_policies: tuple[str, ...] = ()
    api_version: str = API_VERSION

    @property
    def name(self) -> str:
        return self.metadata.name

    def attribute(self, name: str) -> str | None:
        """Top-level attribute value (first match wins, as upstream ``AttributeList.Get``)."""
        return find_attribute(self.attributes, name)

    def zone(self, name: str) -> Zone | None:
        for zone in self.zones:
            if zone.name == name:
                return zone
        return None

    def numa_zones(self) -> dict[int, Zone]:
        """``Node`` zones with a parseable ``node-<id>`` name, by NUMA id (first zone wins on duplicates)."""
        out: dict[int, Zone] = {}
        for zone in self.zones:
            numa = zone.numa_id
            if numa is not None and numa not in out:
                out[numa] = zone
        return out

    def with_attributes(self, attributes: Iterable[Attribute]) -> NodeResourceTopology:
        return replace(self, attributes=tuple(attributes))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": KIND, "metadata": self.metadata.to_dict()}
        if self.topology_policies:
            out["topologyPolicies"] = list(self.topology_policies)
        if self.attributes:
            out["attributes"] = _attrs_to_list(self.attributes)
        out["zones"] = [z.to_dict() for z in self.zones]
        return out


def zone_numa_id(name: str) -> int | None:
    """``node-<n>`` → ``n`` (``n`` ≥ 0, Go ``Atoi`` syntax as upstream ``NameToID``); anything else → None."""
    match = _NUMA_NAME.match(name)
    if match is None or len(match[1].lstrip("+-")) > _MAX_ID_DIGITS:  # beyond int64: Atoi fails too
        return None
    value = int(match[1])
    return value if value >= 0 else None


def zone_name(numa_id: int) -> str:
    """The canonical zone name of NUMA node ``numa_id`` (``node-<id>``); negative ids are an error."""
    if numa_id < 0:
        raise ValueError(f"NUMA id must be non-negative, got {numa_id}")
    return f"node-{numa_id}"


def find_attribute(attributes: Iterable[Attribute], name: str) -> str | None:
    """The value of the first attribute named ``name``, or ``None``."""
    for attr in attributes:
        if attr.name == name:
            return attr.value
    return None


def set_attribute(attributes: Sequence[Attribute], name: str, value: str) -> tuple[Attribute, ...]:
    """Update the first attribute named ``name`` in place, or append it (upstream ``Insert``)."""
    out = list(attributes)
    for i, attr in enumerate(out):
        if attr.name == name:
            out[i] = Attribute(name, value)
            return tuple(out)
    out.append(Attribute(name, value))
    return tuple(out)


def merge_attributes(existing: Sequence[Attribute], updated: Iterable[Attribute]) -> tuple[Attribute, ...]:
    """Existing order kept, values from ``updated`` win, new names appended (upstream ``Merge``)."""
    out: tuple[Attribute, ...] = tuple(existing)
    for attr in updated:
        out = set_attribute(out, attr.name, attr.value)
    return out


def _attrs_to_list(attributes: Iterable[Attribute]) -> list[dict[str, str]]:
    return [{"name": a.name, "value": a.value} for a in attributes]

"""Per-NUMA-zone capacity / allocatable / available, as the upstream exporter (RTE) computes them.

Inputs: the machine view (CPU → NUMA map, distances, MemTotal and hugepages per node) and a
:class:`ZoneConfig` (both in :mod:`numaplane.nrt.zone_inputs`, re-exported here), the kubelet
PodResources ``GetAllocatableResources`` and ``List`` responses (:mod:`numaplane.nrt.podresources`
values, or their JSON); :func:`zones_from_state` takes an abstract :class:`NodeAllocationState` instead.

The rules below are written once, in :class:`ZoneBasis` (the allocatable side, a :class:`ZoneTemplate`
per NUMA node), :class:`ZoneUsage` (exclusive use per NUMA node) and :meth:`ZoneTemplate.zone` (one
zone). :func:`compute_zones` drives them; so does :class:`~numaplane.nrt.from_manager.NRTPublisher`,
incrementally (it rebuilds only the zones whose use changed).

Rules (units: CPUs and devices are counts, memory and hugepages bytes):

* one zone per NUMA node of the machine (no holes), ``node-<id>``, type ``Node``; costs are the
  distance vector ``{node-<dst>: distance}`` in ascending id order;
* a zone reports exactly the resources that are allocatable on it: CPUs = allocatable CPU ids on the
  node (reserved CPUs are absent); devices = device ids whose topology lists the node (a device on
  several nodes counts on each; devices without topology are in no zone); memory / hugepages = the
  allocatable blocks of the node (the kubelet reports them only with the Static memory policy, so
  with policy ``None`` there are no memory rows at all);
* a node with no allocatable entry at all gets a single ``cpu`` row: capacity = its CPU count,
  allocatable 0, available 0 (all its CPUs are reserved);
* capacity: CPUs of the node, MemTotal, hugepages bytes; devices = allocatable. A missing (0)
  capacity becomes allocatable; an allocatable above capacity raises capacity ("trust the kubelet");
* used: only *exclusive* allocations, i.e. what ``List`` reports: CPU ids, device ids, memory
  blocks. Shared-pool, burstable and best-effort containers consume nothing. available =
  allocatable − used, clamped at 0;
* a resource listed in ``resource_exclude`` under ``"*"`` or under the node name is dropped from
  every zone (fallback ``cpu`` row included).

Decisions where upstream exporters disagree or are loose (kubelet-consistent choices):

* **Memory blocks spanning several NUMA nodes**: RTE adds the full block size to every node of the
  block (over-counting); NFD splits it. We charge the way the kubelet's Static memory policy does:
  blocks on a single node first, then each multi-node block walks its nodes in ascending id order and
  takes ``min(remaining, still available on the node)`` from each, any excess on the last node. The
  kubelet keeps a node either in single-node use or in exactly one multi-node group, so the per-group
  total is exact and the split equals the kubelet's after any sequence of admissions (removals may
  leave a different split inside a group; the group total stays exact).
* **CPUs** are counted as a set: a CPU listed by several containers (or by a pod and its containers,
  as pod-level ``cpu_ids`` intentionally overlap) counts once, and only CPUs that are allocatable
  count (RTE counts every occurrence; identical whenever the kubelet's exclusivity holds). A shared
  pool given in :attr:`ZoneConfig.shared_pool_cpus` (RTE's reference container, for kubelets
  without kubernetes/kubernetes#102190) is subtracted first.
* **Devices** are counted once per ``(resource, id, node)``.
* **Pod-level memory blocks** replace the containers' blocks of that pod when present (they overlap).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from numaplane.nrt import fingerprint as fp
from numaplane.nrt.model import (
    ZONE_TYPE_NODE,
    Attribute,
    CostInfo,
    NodeResourceTopology,
    ObjectMeta,
    OwnerReference,
    ResourceInfo,
    Zone,
    zone_name,
)
from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    PodResources,
    allocatable_from_dict,
    list_from_dict,
)
from numaplane.nrt.state import NodeAllocationState
from numaplane.nrt.zone_inputs import MachineView, NUMANodeView, ZoneConfig

__all__ = [
    "MachineView",
    "NUMANodeView",
    "ZoneBasis",
    "ZoneConfig",
    "ZoneTemplate",
    "ZoneUsage",
    "compute_zones",
    "make_nrt",
    "resource_row",
    "zones_from_dicts",
    "zones_from_state",
]


@dataclass(frozen=True, slots=True)
class ZoneTemplate:
    """The fixed part of one NUMA node's zone: name, costs, attributes and its rows
    ``(resource, capacity, allocatable)`` (sorted by name, excluded resources dropped).

    :meth:`zone` is the one per-zone rule: available = allocatable − used, clamped at 0.
    """

    numa: int
    name: str
    costs: tuple[CostInfo, ...]
    attributes: tuple[Attribute, ...]
    rows: tuple[tuple[str, int, int], ...]

    def zone(self, used: Mapping[str, int]) -> Zone:
        """This zone with ``used`` (resource → exclusive amount on this NUMA node) charged."""
        rows = [resource_row(name, cap, alloc, max(alloc - used.get(name, 0), 0)) for name, cap, alloc in self.rows]
        return Zone(self.name, ZONE_TYPE_NODE, "", self.costs, self.attributes, tuple(rows))


class ZoneBasis:
    """The allocatable side of one node's zones, from the machine view, the allocatable answer and
    the config: a :class:`ZoneTemplate` per NUMA node (machine order) and the tables
    :class:`ZoneUsage` charges against. Immutable after construction (``spans`` only memoises).

    ``allocatable``: NUMA id → resource → allocatable amount (CPUs and devices counts, memory bytes);
    ``cpu_mask``: the allocatable CPUs that are on a NUMA node of the machine.
    """

    __slots__ = ("allocatable", "cpu_mask", "node_masks", "numa_ids", "shared_pool_mask", "spans", "templates")

    def __init__(
        self, node_name: str, machine: MachineView, allocatable: AllocatableResources, config: ZoneConfig | None = None
    ) -> None:
        config = config or ZoneConfig()
        cpu_numa = {cpu: node.id for node in machine.numa_nodes for cpu in node.cpus}
        numa_ids = {node.id for node in machine.numa_nodes}
        alloc: dict[int, dict[str, int]] = {}
        alloc_cpu_mask = 0
        for cpu in allocatable.cpu_ids:
            numa = cpu_numa.get(cpu)
            if numa is not None and not alloc_cpu_mask >> cpu & 1:
                alloc_cpu_mask |= 1 << cpu
                row = alloc.setdefault(numa, {})
                row["cpu"] = row.get("cpu", 0) + 1
        self.numa_ids = frozenset(numa_ids)
        self.spans: dict[tuple[int, ...], tuple[int, ...]] = {}  # affinity → its machine nodes, ascending
        groups = ((d.resource_name, d.device_ids, d.numa_nodes) for d in allocatable.devices)
        _count_devices(alloc, set(), groups, self.spans, self.numa_ids)
        for block in allocatable.memory:
            for numa in set(block.numa_nodes):
                if numa in numa_ids:
                    row = alloc.setdefault(numa, {})
                    row[block.memory_type] = row.get(block.memory_type, 0) + block.size_bytes
        self.allocatable: Mapping[int, Mapping[str, int]] = alloc
        self.cpu_mask = alloc_cpu_mask
        self.node_masks = tuple((node.id, node.cpus.mask) for node in machine.numa_nodes)
        self.shared_pool_mask = config.shared_pool_cpus.mask if config.shared_pool_cpus is not None else 0
        excluded = config.excluded(node_name)
        self.templates = tuple(
            ZoneTemplate(
                node.id,
                zone_name(node.id),
                tuple(CostInfo(zone_name(dst), d) for dst, d in sorted(node.distances.items()) if dst >= 0),
                tuple(config.zone_attributes.get(node.id, ())),
                _template_rows(node, alloc.get(node.id), excluded),
            )
            for node in machine.numa_nodes
        )

    def usage(self) -> ZoneUsage:
        """An empty tally of exclusive use against this basis."""
        return ZoneUsage(self)

    def zones(self, used: Mapping[int, Mapping[str, int]]) -> tuple[Zone, ...]:
        """Every zone (machine order) with ``used`` (NUMA id → resource → amount) charged."""
        return tuple(t.zone(used.get(t.numa, _NOTHING)) for t in self.templates)


class ZoneUsage:
    """Exclusive use per NUMA node, accumulated under the module's rules: CPUs as a set (allocatable
    ones only, the shared pool subtracted), devices once per ``(resource, id, node)``, single-node
    memory blocks first and then the spanning blocks in the order given. Feed it, then read
    :meth:`totals` once."""

    __slots__ = ("_basis", "_cpu_mask", "_devices", "_spanning", "_used")

    def __init__(self, basis: ZoneBasis) -> None:
        self._basis = basis
        self._cpu_mask = 0
        self._used: dict[int, dict[str, int]] = {}
        self._devices: set[tuple[str, str, int]] = set()
        self._spanning: list[ContainerMemory] = []

    def add_cpu_ids(self, cpu_ids: Iterable[int]) -> None:
        mask = self._cpu_mask
        for cpu in cpu_ids:
            mask |= 1 << cpu
        self._cpu_mask = mask

    def add_cpu_mask(self, mask: int) -> None:
        self._cpu_mask |= mask

    def add_memory(self, blocks: Iterable[tuple[str, int, tuple[int, ...]]]) -> None:
        """Pinned blocks ``(resource, bytes, NUMA nodes)``; nodes outside the machine are ignored, a
        block on none of the machine's nodes is dropped."""
        spans = self._basis.spans
        numa_ids = self._basis.numa_ids
        used = self._used
        for resource, size_bytes, numa_nodes in blocks:
            nodes = spans.get(numa_nodes)
            if nodes is None:
                nodes = _span(spans, numa_ids, numa_nodes)
            if len(nodes) == 1:
                row = used.get(nodes[0])
                if row is None:
                    row = used[nodes[0]] = {}
                row[resource] = row.get(resource, 0) + size_bytes
            elif nodes:
                self._spanning.append(ContainerMemory(resource, size_bytes, nodes))

    def add_devices(self, groups: Iterable[tuple[str, Iterable[str], tuple[int, ...]]]) -> None:
        """Allocated devices, as groups ``(resource, device ids, NUMA nodes)``."""
        _count_devices(self._used, self._devices, groups, self._basis.spans, self._basis.numa_ids)

    def totals(self) -> dict[int, dict[str, int]]:
        """NUMA id → resource → exclusive amount used (only nodes with some use)."""
        basis = self._basis
        used = self._used
        mask = self._cpu_mask & ~basis.shared_pool_mask & basis.cpu_mask
        if mask:
            for numa, node_mask in basis.node_masks:
                count = (mask & node_mask).bit_count()
                if count:
                    used.setdefault(numa, {})["cpu"] = count
        for block in self._spanning:
            _charge_spanning(block, basis.allocatable, used)
        return used


def compute_zones(
    node_name: str,
    machine: MachineView,
    allocatable: AllocatableResources,
    pods: Iterable[PodResources],
    config: ZoneConfig | None = None,
    devices_used: Iterable[ContainerDevices] = (),
) -> tuple[Zone, ...]:
    """The zones of ``node_name`` (ascending NUMA id; resources sorted by name). See the module rules.

    ``devices_used``: devices in use that no pod of ``pods`` lists (the exporter's DRA devices named
    in allocated ResourceClaims, :mod:`numaplane.exporter.dra`)."""
    config = config or ZoneConfig()
    basis = ZoneBasis(node_name, machine, allocatable, config)
    usage = basis.usage()
    usage.add_devices([(d.resource_name, d.device_ids, d.numa_nodes) for d in devices_used])
    for pod in pods:
        if config.namespace is not None and pod.namespace != config.namespace:
            continue
        usage.add_cpu_ids(pod.cpu_ids)
        blocks: list[ContainerMemory] = list(pod.memory)
        for container in pod.containers:
            usage.add_cpu_ids(container.cpu_ids)
            if container.devices:
                usage.add_devices([(d.resource_name, d.device_ids, d.numa_nodes) for d in container.devices])
            if not pod.memory:
                blocks.extend(container.memory)
        if blocks:
            usage.add_memory([(b.memory_type, b.size_bytes, b.numa_nodes) for b in blocks])
    return basis.zones(usage.totals())


def zones_from_dicts(
    node_name: str, machine: Any, allocatable: Any, list_response: Any, config: Any = None
) -> tuple[Zone, ...]:
    """:func:`compute_zones` on JSON inputs (snake_case or proto3 JSON mapping; see SCHEMA.md §4.8)."""
    return compute_zones(
        node_name,
        MachineView.from_dict(machine),
        allocatable_from_dict(allocatable, "$.allocatable"),
        list_from_dict(list_response, "$.list"),
        ZoneConfig.from_dict(config),
    )


_NOTHING: Mapping[str, int] = {}


def _template_rows(
    node: NUMANodeView, alloc: Mapping[str, int] | None, excluded: frozenset[str]
) -> tuple[tuple[str, int, int], ...]:
    """``(resource, capacity, allocatable)`` per resource of the node; a node with no allocatable
    entry gets the single ``cpu`` row (all its CPUs, none allocatable)."""
    if alloc is None:
        return () if "cpu" in excluded else (("cpu", len(node.cpus), 0),)
    rows = []
    for name in sorted(alloc):
        if name not in excluded:
            amount = alloc[name]
            rows.append((name, max(_capacity(node, name) or amount, amount), amount))
    return tuple(rows)


@lru_cache(maxsize=65536)
def resource_row(name: str, capacity: int, allocatable: int, available: int) -> ResourceInfo:
    """``ResourceInfo.of_ints`` memoised (rows are immutable and repeat across zones and publishes)."""
    return ResourceInfo.of_ints(name, capacity, allocatable, available)


def _capacity(node: NUMANodeView, name: str) -> int:
    if name == "cpu":
        return len(node.cpus)
    if name == "memory":
        return node.memory_bytes
    if name.startswith("hugepages-"):
        return node.hugepages_bytes.get(name, 0)
    return 0  # devices: no independent source, capacity = allocatable


def _span(
    spans: dict[tuple[int, ...], tuple[int, ...]], numa_ids: frozenset[int], affinity: tuple[int, ...]
) -> tuple[int, ...]:
    """The machine's nodes of ``affinity``, ascending and once each (remembered in ``spans``)."""
    spans[affinity] = nodes = tuple(sorted({n for n in affinity if n in numa_ids}))
    return nodes


def _count_devices(
    table: dict[int, dict[str, int]],
    seen: set[tuple[str, str, int]],
    groups: Iterable[tuple[str, Iterable[str], tuple[int, ...]]],
    spans: dict[tuple[int, ...], tuple[int, ...]],
    numa_ids: frozenset[int],
) -> None:
    """Count each ``(resource, device id, machine NUMA node)`` once into ``table`` (``seen`` carries
    the keys already counted)."""
    for resource, device_ids, affinity in groups:
        nodes = spans.get(affinity)
        if nodes is None:
            nodes = _span(spans, numa_ids, affinity)
        for device_id in device_ids:
            for numa in nodes:
                key = (resource, device_id, numa)
                if key not in seen:
                    seen.add(key)
                    row = table.get(numa)
                    if row is None:
                        row = table[numa] = {}
                    row[resource] = row.get(resource, 0) + 1


def _charge_spanning(
    block: ContainerMemory, alloc: Mapping[int, Mapping[str, int]], used: dict[int, dict[str, int]]
) -> None:
    """Charge a multi-node block in ascending node order, as the kubelet's Static memory policy does."""
    remaining = block.size_bytes
    nodes = block.numa_nodes
    for i, numa in enumerate(nodes):
        row = used.setdefault(numa, {})
        taken = row.get(block.memory_type, 0)
        free = max(alloc.get(numa, {}).get(block.memory_type, 0) - taken, 0)
        charge = remaining if i == len(nodes) - 1 else min(remaining, free)
        row[block.memory_type] = taken + charge
        remaining -= charge
        if remaining == 0:
            break


def zones_from_state(
    node_name: str, machine: MachineView, state: NodeAllocationState, config: ZoneConfig | None = None
) -> tuple[Zone, ...]:
    """:func:`compute_zones` for an abstract allocation state (same rules, same results as the
    PodResources responses the state would produce)."""
    allocatable, pods = state.to_podresources()
    return compute_zones(node_name, machine, allocatable, pods, config)


def make_nrt(
    node_name: str,
    zones: Sequence[Zone],
    *,
    topology_manager_policy: str | None = None,
    topology_manager_scope: str | None = None,
    fingerprint: str | None = None,
    fingerprint_method: str | None = None,
    owner_node_uid: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> NodeResourceTopology:
    """The NRT object the exporter writes for ``node_name`` (v1alpha2, ``topologyPolicies`` unset).

    Attributes in RTE's order: the fingerprint and its method, then ``topologyManagerScope`` and
    ``topologyManagerPolicy`` (kubelet spelling, published as given). The fingerprint is also put in
    the legacy annotation; ``owner_node_uid`` adds an owner reference to the Node.
    """
    attributes: list[Attribute] = []
    notes = dict(annotations or {})
    if fingerprint is not None:
        attributes.append(Attribute(fp.ATTRIBUTE, fingerprint))
        notes[fp.ANNOTATION] = fingerprint
        if fingerprint_method is not None:
            attributes.append(Attribute(fp.ATTRIBUTE_METHOD, fingerprint_method))
    if topology_manager_scope is not None:
        attributes.append(Attribute("topologyManagerScope", topology_manager_scope))
    if topology_manager_policy is not None:
        attributes.append(Attribute("topologyManagerPolicy", topology_manager_policy))
    owners = () if owner_node_uid is None else (OwnerReference("v1", "Node", node_name, owner_node_uid),)
    return NodeResourceTopology(
        ObjectMeta(node_name, annotations=notes, owner_references=owners), tuple(zones), tuple(attributes)
    )

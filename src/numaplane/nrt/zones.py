"""Per-NUMA-zone capacity / allocatable / available, as the upstream exporter (RTE) computes them.

Inputs: the machine view (CPU → NUMA map, distances, MemTotal and hugepages per node), the kubelet
PodResources ``GetAllocatableResources`` and ``List`` responses (:mod:`numaplane.nrt.podresources`
values, or their JSON), and a :class:`ZoneConfig`. A second entry point, :func:`zones_from_state`,
takes an abstract :class:`NodeAllocationState` (what our resource manager holds).

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
from dataclasses import dataclass, field
from typing import Any

from numaplane.nrt import fingerprint as fp
from numaplane.nrt.errors import ZoneInputError
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
    ContainerMemory,
    PodResources,
    allocatable_from_dict,
    list_from_dict,
)
from numaplane.nrt.state import NodeAllocationState
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology

__all__ = [
    "MachineView",
    "NUMANodeView",
    "ZoneConfig",
    "compute_zones",
    "make_nrt",
    "zones_from_dicts",
    "zones_from_state",
]


@dataclass(frozen=True, slots=True)
class NUMANodeView:
    """What the exporter reads from sysfs for one NUMA node (bytes; 0 = unknown)."""

    id: int
    cpus: CPUSet = field(default_factory=CPUSet)
    distances: Mapping[int, int] = field(default_factory=dict, hash=False)
    memory_bytes: int = 0
    hugepages_bytes: Mapping[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class MachineView:
    """The NUMA nodes of the machine, ascending by id."""

    numa_nodes: tuple[NUMANodeView, ...]

    @staticmethod
    def from_topology(topology: Topology) -> MachineView:
        """From the machine model (online CPUs, MemTotal, hugepages totals, SLIT distances)."""
        nodes = []
        for node in sorted(topology.numa_nodes, key=lambda n: n.id):
            pages: dict[str, int] = {}
            for hp in node.hugepages:
                pages[hp.resource_name] = pages.get(hp.resource_name, 0) + hp.total_bytes
            nodes.append(NUMANodeView(node.id, node.cpus, dict(node.distances), node.memory_total_bytes, pages))
        return MachineView(tuple(nodes))

    @staticmethod
    def from_dict(doc: Any) -> MachineView:
        """``{"numa_nodes": [{"id", "cpus": "<set>", "distances": {"<id>": d}, "memory"?, "hugepages"?}]}``."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("numa_nodes"), list):
            raise ZoneInputError("$.machine.numa_nodes", "expected a list")
        nodes = []
        for i, item in enumerate(doc["numa_nodes"]):
            where = f"$.machine.numa_nodes[{i}]"
            try:
                nodes.append(
                    NUMANodeView(
                        int(item["id"]),
                        CPUSet.parse(str(item.get("cpus", ""))),
                        {int(k): int(v) for k, v in (item.get("distances") or {}).items()},
                        int(item.get("memory") or 0),
                        {str(k): int(v) for k, v in (item.get("hugepages") or {}).items()},
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                raise ZoneInputError(where, str(error)) from error
        return MachineView(tuple(sorted(nodes, key=lambda n: n.id)))


@dataclass(frozen=True, slots=True)
class ZoneConfig:
    """Exporter options that change the zones.

    ``resource_exclude``: ``{node name or "*": [resource names]}``. ``namespace``: only pods of this
    namespace are charged (RTE ``--watch-namespace``). ``shared_pool_cpus``: subtracted from every
    reported CPU set (RTE's reference container). ``zone_attributes``: attributes per NUMA id.
    """

    resource_exclude: Mapping[str, Sequence[str]] = field(default_factory=dict, hash=False)
    namespace: str | None = None
    shared_pool_cpus: CPUSet | None = None
    zone_attributes: Mapping[int, Sequence[Attribute]] = field(default_factory=dict, hash=False)

    def excluded(self, node_name: str) -> frozenset[str]:
        return frozenset(self.resource_exclude.get("*", ())) | frozenset(self.resource_exclude.get(node_name, ()))

    @staticmethod
    def from_dict(doc: Any) -> ZoneConfig:
        """``{"resource_exclude": {...}, "namespace"?: str}`` (other keys are ignored)."""
        if doc is None:
            return ZoneConfig()
        if not isinstance(doc, Mapping):
            raise ZoneInputError("$.config", "expected an object")
        excludes = doc.get("resource_exclude") or {}
        if not isinstance(excludes, Mapping) or not all(isinstance(v, list) for v in excludes.values()):
            raise ZoneInputError("$.config.resource_exclude", "expected {node: [resource names]}")
        return ZoneConfig({str(k): tuple(str(x) for x in v) for k, v in excludes.items()}, doc.get("namespace"))


def compute_zones(
    node_name: str,
    machine: MachineView,
    allocatable: AllocatableResources,
    pods: Iterable[PodResources],
    config: ZoneConfig | None = None,
) -> tuple[Zone, ...]:
    """The zones of ``node_name`` (ascending NUMA id; resources sorted by name). See the module rules."""
    config = config or ZoneConfig()
    cpu_numa = {cpu: node.id for node in machine.numa_nodes for cpu in node.cpus}
    numa_ids = {node.id for node in machine.numa_nodes}

    # allocatable per NUMA node
    alloc: dict[int, dict[str, int]] = {}
    alloc_cpu_mask = 0
    for cpu in allocatable.cpu_ids:
        numa = cpu_numa.get(cpu)
        if numa is not None and not alloc_cpu_mask >> cpu & 1:
            alloc_cpu_mask |= 1 << cpu
            row = alloc.setdefault(numa, {})
            row["cpu"] = row.get("cpu", 0) + 1
    seen_devices: set[tuple[str, str, int]] = set()
    for dev in allocatable.devices:
        _count_devices(alloc, seen_devices, dev.resource_name, dev.device_ids, dev.numa_nodes, numa_ids)
    for block in allocatable.memory:
        for numa in set(block.numa_nodes):
            if numa in numa_ids:
                row = alloc.setdefault(numa, {})
                row[block.memory_type] = row.get(block.memory_type, 0) + block.size_bytes

    # used (exclusive allocations only)
    used: dict[int, dict[str, int]] = {}
    used_cpu_mask = 0
    used_devices: set[tuple[str, str, int]] = set()
    multi_blocks: list[ContainerMemory] = []
    for pod in pods:
        if config.namespace is not None and pod.namespace != config.namespace:
            continue
        for cpu in pod.cpu_ids:
            used_cpu_mask |= 1 << cpu
        blocks: list[ContainerMemory] = list(pod.memory)
        for container in pod.containers:
            for cpu in container.cpu_ids:
                used_cpu_mask |= 1 << cpu
            for dev in container.devices:
                _count_devices(used, used_devices, dev.resource_name, dev.device_ids, dev.numa_nodes, numa_ids)
            if not pod.memory:
                blocks.extend(container.memory)
        for block in blocks:
            nodes = sorted({n for n in block.numa_nodes if n in numa_ids})
            if len(nodes) == 1:
                row = used.setdefault(nodes[0], {})
                row[block.memory_type] = row.get(block.memory_type, 0) + block.size_bytes
            elif nodes:
                multi_blocks.append(ContainerMemory(block.memory_type, block.size_bytes, tuple(nodes)))
    if config.shared_pool_cpus is not None:
        used_cpu_mask &= ~config.shared_pool_cpus.mask
    used_cpu_mask &= alloc_cpu_mask
    for node in machine.numa_nodes:
        count = (used_cpu_mask & node.cpus.mask).bit_count()
        if count:
            used.setdefault(node.id, {})["cpu"] = count
    for block in multi_blocks:
        charge_spanning(block, alloc, used)

    excluded = config.excluded(node_name)
    zones = []
    for node in machine.numa_nodes:
        resources = []
        node_alloc = alloc.get(node.id)
        if node_alloc is None:
            if "cpu" not in excluded:
                resources.append(ResourceInfo.of_ints("cpu", len(node.cpus), 0, 0))
        else:
            node_used = used.get(node.id, {})
            for name in sorted(node_alloc):
                if name in excluded:
                    continue
                allocatable_amount = node_alloc[name]
                capacity = _capacity(node, name) or allocatable_amount
                capacity = max(capacity, allocatable_amount)
                available = max(allocatable_amount - node_used.get(name, 0), 0)
                resources.append(ResourceInfo.of_ints(name, capacity, allocatable_amount, available))
        costs = tuple(CostInfo(zone_name(dst), d) for dst, d in sorted(node.distances.items()) if dst >= 0)
        attributes = tuple(config.zone_attributes.get(node.id, ()))
        zones.append(Zone(zone_name(node.id), ZONE_TYPE_NODE, "", costs, attributes, tuple(resources)))
    return tuple(zones)


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


def _capacity(node: NUMANodeView, name: str) -> int:
    if name == "cpu":
        return len(node.cpus)
    if name == "memory":
        return node.memory_bytes
    if name.startswith("hugepages-"):
        return node.hugepages_bytes.get(name, 0)
    return 0  # devices: no independent source, capacity = allocatable


def _count_devices(
    table: dict[int, dict[str, int]],
    seen: set[tuple[str, str, int]],
    resource: str,
    device_ids: Iterable[str],
    numa_nodes: Iterable[int],
    numa_ids: set[int],
) -> None:
    nodes = [n for n in numa_nodes if n in numa_ids]
    for device_id in device_ids:
        for numa in nodes:
            key = (resource, device_id, numa)
            if key not in seen:
                seen.add(key)
                row = table.setdefault(numa, {})
                row[resource] = row.get(resource, 0) + 1


def charge_spanning(
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

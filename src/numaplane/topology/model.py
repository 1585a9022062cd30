"""The machine model: logical CPUs, cores, sockets, NUMA nodes, caches, memory and PCI devices.

Pure data (no I/O). A :class:`Topology` is built from a sysfs tree (``topology/sysfs.py``), from a
topology JSON document (:func:`numaplane.topology.document.topology_from_dict`; the format, a superset of the conformance fixture
format of ``shared/conformance/SCHEMA.md`` §3, is in :mod:`numaplane.topology.document`) or
synthetically (:func:`synthetic`).

Identity rules (the kubelet's, via cAdvisor):

* a *core* is identified by its thread siblings; its id (``CPUInfo.core``) is the lowest logical CPU
  id among them. The raw sysfs ``core_id`` (unique only per package/die/cluster on many machines) is
  kept in ``raw_core_id``;
* a *socket* id is the raw ``physical_package_id``; where that is ``-1`` discovery groups packages by
  ``core_siblings_list`` as hwloc does and numbers them from 0 (``raw_socket_id`` keeps ``-1``);
* an *uncore cache* id is the L3 cache id (``cache/index3/id``), 0 where the machine has none;
* only *online* CPUs take part in allocation: the ``num_*`` counts and the index maps below cover
  online CPUs only, exactly as cAdvisor's ``MachineInfo`` does. Offline CPUs stay in ``cpus`` with
  ``online=False`` so that pictures and reports can show them.

Units: memory sizes are bytes; hugepage sizes are bytes per page; distances are the ACPI SLIT
values as sysfs prints them (10 = local).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from numaplane.topology.cpuset import CPUSet

__all__ = [
    "CPUInfo",
    "HugePages",
    "NUMANode",
    "PCIDevice",
    "Topology",
    "synthetic",
]


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """One logical CPU.

    ``core`` is the kubelet core id (lowest CPU id among the thread siblings, or the fixture's id);
    ``socket``/``numa``/``uncore``/``die`` are ids as described in the module docstring.
    ``core_type`` is ``"P"``/``"E"`` on hybrid parts, ``None`` elsewhere.
    """

    cpu: int
    core: int
    socket: int
    numa: int
    uncore: int = 0
    die: int = 0
    online: bool = True
    raw_core_id: int | None = None
    raw_socket_id: int | None = None
    core_type: str | None = None


@dataclass(frozen=True, slots=True)
class HugePages:
    """Hugepages of one page size on one NUMA node (counts are pages, size is bytes per page)."""

    page_size_bytes: int
    total: int
    free: int | None = None

    @property
    def total_bytes(self) -> int:
        return self.page_size_bytes * self.total

    @property
    def resource_name(self) -> str:
        """The Kubernetes resource name, e.g. ``hugepages-2Mi`` or ``hugepages-1Gi``."""
        return hugepage_resource_name(self.page_size_bytes)


@dataclass(frozen=True)
class NUMANode:
    """One NUMA node. ``cpus`` lists its online CPUs (may be empty: memory-only / GPU-memory nodes).

    ``distances`` maps node id → SLIT distance (``{}`` when sysfs gives none). ``online`` is false for
    a node that exists (possible) but is offline.
    """

    id: int
    cpus: CPUSet = field(default_factory=CPUSet)
    memory_total_bytes: int = 0
    memory_free_bytes: int | None = None
    hugepages: tuple[HugePages, ...] = ()
    distances: Mapping[int, int] = field(default_factory=dict)
    online: bool = True

    @property
    def cpu_less(self) -> bool:
        return self.cpus.is_empty()

    def distance_to(self, other: int) -> int | None:
        return self.distances.get(other)


@dataclass(frozen=True, slots=True)
class PCIDevice:
    """A PCI device as sysfs shows it. ``numa_node`` is -1 when the device reports no affinity."""

    address: str
    vendor: str = ""
    device: str = ""
    class_code: str = ""
    numa_node: int = -1
    driver: str | None = None
    sriov_totalvfs: int | None = None
    physfn: str | None = None

    @property
    def numa_affine(self) -> bool:
        return self.numa_node >= 0


def hugepage_resource_name(page_size_bytes: int) -> str:
    """``hugepages-<size>`` with the size in the largest binary suffix that divides it exactly."""
    for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if page_size_bytes % factor == 0:
            return f"hugepages-{page_size_bytes // factor}{suffix}"
    return f"hugepages-{page_size_bytes}"


@dataclass(frozen=True)
class Topology:
    """A whole machine. ``cpus`` is sorted by CPU id; ``numa_nodes`` by node id.

    The ``num_*`` fields, when given, override the computed counts; they carry the literal values of
    upstream test fixtures (e.g. ``NumCores`` with arbitrary core ids). ``None`` means "computed from
    the online CPUs". ``upstream`` keeps further literal fixture values (``upstream_num_*``).
    """

    cpus: tuple[CPUInfo, ...]
    numa_nodes: tuple[NUMANode, ...] = ()
    pci_devices: tuple[PCIDevice, ...] = ()
    isolated_cpus: CPUSet = field(default_factory=CPUSet)
    name: str = ""
    source: str = ""
    note: str = ""
    num_cpus_override: int | None = None
    num_cores_override: int | None = None
    num_sockets_override: int | None = None
    num_numa_nodes_override: int | None = None
    num_uncore_caches_override: int | None = None
    upstream: Mapping[str, int] = field(default_factory=dict)
    attributes: Mapping[str, Any] = field(default_factory=dict)

    # -- online CPU views -----------------------------------------------------------------------
    @cached_property
    def online_cpus(self) -> tuple[CPUInfo, ...]:
        return tuple(c for c in self.cpus if c.online)

    @cached_property
    def cpu_info(self) -> Mapping[int, CPUInfo]:
        """CPU id → info, online CPUs only (the kubelet's ``CPUDetails``)."""
        return {c.cpu: c for c in self.online_cpus}

    @cached_property
    def all_cpus(self) -> CPUSet:
        """Every online CPU."""
        return CPUSet(c.cpu for c in self.online_cpus)

    @cached_property
    def offline_cpus(self) -> CPUSet:
        return CPUSet(c.cpu for c in self.cpus if not c.online)

    @cached_property
    def cpus_by_numa(self) -> Mapping[int, CPUSet]:
        return _group(self.online_cpus, lambda c: c.numa)

    @cached_property
    def cpus_by_socket(self) -> Mapping[int, CPUSet]:
        return _group(self.online_cpus, lambda c: c.socket)

    @cached_property
    def cpus_by_core(self) -> Mapping[int, CPUSet]:
        return _group(self.online_cpus, lambda c: c.core)

    @cached_property
    def cpus_by_uncore(self) -> Mapping[int, CPUSet]:
        return _group(self.online_cpus, lambda c: c.uncore)

    @cached_property
    def numa_ids(self) -> tuple[int, ...]:
        """Ids of NUMA nodes that have online CPUs, ascending (the kubelet's ``CPUDetails.NUMANodes``)."""
        return tuple(sorted(self.cpus_by_numa))

    @cached_property
    def memory_numa_ids(self) -> tuple[int, ...]:
        """Ids of every modelled NUMA node (with or without CPUs), ascending."""
        ids = {n.id for n in self.numa_nodes} | set(self.cpus_by_numa)
        return tuple(sorted(ids))

    @cached_property
    def socket_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.cpus_by_socket))

    @cached_property
    def numa_by_id(self) -> Mapping[int, NUMANode]:
        return {n.id: n for n in self.numa_nodes}

    # -- counts (kubelet CPUTopology fields) ------------------------------------------------------
    @property
    def num_cpus(self) -> int:
        return self.num_cpus_override if self.num_cpus_override is not None else len(self.online_cpus)

    @property
    def num_cores(self) -> int:
        if self.num_cores_override is not None:
            return self.num_cores_override
        return len(self.cpus_by_core)

    @property
    def num_sockets(self) -> int:
        if self.num_sockets_override is not None:
            return self.num_sockets_override
        return len(self.cpus_by_socket)

    @property
    def num_numa_nodes(self) -> int:
        if self.num_numa_nodes_override is not None:
            return self.num_numa_nodes_override
        return len(self.cpus_by_numa)

    @property
    def num_uncore_caches(self) -> int:
        if self.num_uncore_caches_override is not None:
            return self.num_uncore_caches_override
        return len(self.cpus_by_uncore)

    @property
    def cpus_per_core(self) -> int:
        """Integer average, as upstream ``CPUsPerCore()`` (0 when there are no cores)."""
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_uncore(self) -> int:
        return self.num_cpus // self.num_uncore_caches if self.num_uncore_caches else 0

    @property
    def threads_per_core(self) -> int:
        """Largest number of online threads found on one core."""
        return max((s.size() for s in self.cpus_by_core.values()), default=0)

    # -- memory -----------------------------------------------------------------------------------
    def memory_bytes(self, numa: int) -> int:
        node = self.numa_by_id.get(numa)
        return node.memory_total_bytes if node else 0

    def distance(self, a: int, b: int) -> int | None:
        node = self.numa_by_id.get(a)
        return node.distances.get(b) if node else None


def synthetic(
    *,
    sockets: int = 2,
    numa_per_socket: int = 1,
    cores_per_numa: int = 4,
    threads_per_core: int = 2,
    memory_per_numa_bytes: int = 64 << 30,
    hugepages_2m_per_numa: int = 0,
    hugepages_1g_per_numa: int = 0,
    uncore_per_numa: int = 1,
    name: str = "",
) -> Topology:
    """A regular machine with the kubelet's usual CPU numbering.

    Numbering follows Linux on x86: thread 0 of every core first (socket-major), then thread 1 of
    every core, and so on, so core *k*'s threads are ``k, k + cores, k + 2·cores …``.
    """
    if min(sockets, numa_per_socket, cores_per_numa, threads_per_core, uncore_per_numa) < 1:
        raise ValueError("every count of a synthetic topology must be at least 1")
    if cores_per_numa % uncore_per_numa:
        raise ValueError("cores_per_numa must be a multiple of uncore_per_numa")
    total_cores = sockets * numa_per_socket * cores_per_numa
    cpus: list[CPUInfo] = []
    for thread in range(threads_per_core):
        for core in range(total_cores):
            numa = core // cores_per_numa
            socket = numa // numa_per_socket
            uncore = numa * uncore_per_numa + (core % cores_per_numa) // (cores_per_numa // uncore_per_numa)
            cpus.append(CPUInfo(cpu=thread * total_cores + core, core=core, socket=socket, numa=numa, uncore=uncore))
    n_numa = sockets * numa_per_socket
    nodes = []
    for nid in range(n_numa):
        hp = []
        if hugepages_2m_per_numa:
            hp.append(HugePages(2 << 20, hugepages_2m_per_numa, hugepages_2m_per_numa))
        if hugepages_1g_per_numa:
            hp.append(HugePages(1 << 30, hugepages_1g_per_numa, hugepages_1g_per_numa))
        distances = {
            other: 10 if other == nid else (11 if other // numa_per_socket == nid // numa_per_socket else 21)
            for other in range(n_numa)
        }
        nodes.append(
            NUMANode(
                id=nid,
                cpus=CPUSet(c.cpu for c in cpus if c.numa == nid),
                memory_total_bytes=memory_per_numa_bytes,
                memory_free_bytes=memory_per_numa_bytes,
                hugepages=tuple(hp),
                distances=distances,
            )
        )
    label = name or f"synthetic-{sockets}s{n_numa}n-{total_cores * threads_per_core}t"
    return Topology(cpus=tuple(sorted(cpus, key=lambda c: c.cpu)), numa_nodes=tuple(nodes), name=label)


# -- helpers ------------------------------------------------------------------------------------
def _group(cpus: Iterable[CPUInfo], key: Any) -> Mapping[int, CPUSet]:
    masks: dict[int, int] = {}
    for c in cpus:
        k = key(c)
        masks[k] = masks.get(k, 0) | (1 << c.cpu)
    return {k: CPUSet.from_mask(masks[k]) for k in sorted(masks)}

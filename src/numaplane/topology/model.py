"""The machine model: logical CPUs, cores, sockets, NUMA nodes, caches, memory and PCI devices.

Pure data (no I/O). A :class:`Topology` is built from a sysfs tree (``topology/sysfs.py``), from a
topology JSON document (:func:`Topology.from_dict`, a superset of the conformance fixture format of
``shared/conformance/SCHEMA.md`` §3) or synthetically (:func:`synthetic`).

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
from numaplane.topology.errors import TopologyFormatError

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

    # -- serialisation ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The topology JSON document (superset of the conformance fixture format)."""
        doc: dict[str, Any] = {"name": self.name}
        if self.source:
            doc["source"] = self.source
        doc.update(
            num_cpus=self.num_cpus,
            num_cores=self.num_cores,
            num_sockets=self.num_sockets,
            num_numa_nodes=self.num_numa_nodes,
            num_uncore_caches=self.num_uncore_caches,
        )
        for key, value in sorted(self.upstream.items()):
            doc[f"upstream_{key}"] = value
        if self.note:
            doc["note"] = self.note
        cpus: list[dict[str, Any]] = []
        for c in self.cpus:
            entry: dict[str, Any] = {
                "cpu": c.cpu,
                "core": c.core,
                "socket": c.socket,
                "numa": c.numa,
                "uncore": c.uncore,
            }
            if c.die:
                entry["die"] = c.die
            if not c.online:
                entry["online"] = False
            if c.raw_core_id is not None:
                entry["raw_core_id"] = c.raw_core_id
            if c.raw_socket_id is not None:
                entry["raw_socket_id"] = c.raw_socket_id
            if c.core_type is not None:
                entry["core_type"] = c.core_type
            cpus.append(entry)
        doc["cpus"] = cpus
        if self.numa_nodes:
            doc["numa_nodes"] = [_numa_to_dict(n) for n in self.numa_nodes]
        if self.pci_devices:
            doc["pci_devices"] = [_pci_to_dict(d) for d in self.pci_devices]
        if self.isolated_cpus:
            doc["isolated_cpus"] = self.isolated_cpus.format()
        if self.attributes:
            doc["attributes"] = dict(self.attributes)
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Topology:
        """Build from a topology JSON document; raise :class:`TopologyFormatError` naming the field."""
        if not isinstance(doc, Mapping):
            raise TopologyFormatError("$", "a topology document must be a JSON object")
        raw_cpus = doc.get("cpus")
        if not isinstance(raw_cpus, list):
            raise TopologyFormatError("$.cpus", "missing or not a list")
        cpus: list[CPUInfo] = []
        seen: set[int] = set()
        for i, entry in enumerate(raw_cpus):
            where = f"$.cpus[{i}]"
            if not isinstance(entry, Mapping):
                raise TopologyFormatError(where, "not an object")
            cpu = _int(entry, "cpu", where)
            if cpu in seen:
                raise TopologyFormatError(where, f"CPU {cpu} listed twice")
            seen.add(cpu)
            cpus.append(
                CPUInfo(
                    cpu=cpu,
                    core=_int(entry, "core", where),
                    socket=_int(entry, "socket", where),
                    numa=_int(entry, "numa", where),
                    uncore=_int(entry, "uncore", where, default=0),
                    die=_int(entry, "die", where, default=0),
                    online=_bool(entry, "online", where, default=True),
                    raw_core_id=_opt_int(entry, "raw_core_id", where),
                    raw_socket_id=_opt_int(entry, "raw_socket_id", where),
                    core_type=_opt_str(entry, "core_type", where),
                )
            )
        cpus.sort(key=lambda c: c.cpu)
        nodes = [_numa_from_dict(n, f"$.numa_nodes[{i}]") for i, n in enumerate(_list(doc, "numa_nodes"))]
        node_ids = {n.id for n in nodes}
        # Fixtures carry no NUMA node list: derive one (CPUs only) so every consumer sees the nodes.
        by_numa: dict[int, int] = {}
        for c in cpus:
            if c.online:
                by_numa[c.numa] = by_numa.get(c.numa, 0) | (1 << c.cpu)
        for nid in sorted(set(by_numa) - node_ids):
            nodes.append(NUMANode(id=nid, cpus=CPUSet.from_mask(by_numa[nid])))
        nodes = [
            n if n.cpus.mask == by_numa.get(n.id, 0) else _with_cpus(n, CPUSet.from_mask(by_numa.get(n.id, 0)))
            for n in nodes
        ]
        nodes.sort(key=lambda n: n.id)
        devices = [_pci_from_dict(d, f"$.pci_devices[{i}]") for i, d in enumerate(_list(doc, "pci_devices"))]
        isolated_text = doc.get("isolated_cpus", "")
        if not isinstance(isolated_text, str):
            raise TopologyFormatError("$.isolated_cpus", "not a cpuset string")
        try:
            isolated = CPUSet.parse(isolated_text)
        except ValueError as exc:
            raise TopologyFormatError("$.isolated_cpus", str(exc)) from exc
        upstream = {
            key.removeprefix("upstream_"): _int(doc, key, "$")
            for key in doc
            if isinstance(key, str) and key.startswith("upstream_")
        }
        attributes = doc.get("attributes", {})
        if not isinstance(attributes, Mapping):
            raise TopologyFormatError("$.attributes", "not an object")
        return cls(
            cpus=tuple(cpus),
            numa_nodes=tuple(nodes),
            pci_devices=tuple(devices),
            isolated_cpus=isolated,
            name=str(doc.get("name", "")),
            source=str(doc.get("source", "")),
            note=str(doc.get("note", "")),
            num_cpus_override=_opt_int(doc, "num_cpus", "$"),
            num_cores_override=_opt_int(doc, "num_cores", "$"),
            num_sockets_override=_opt_int(doc, "num_sockets", "$"),
            num_numa_nodes_override=_opt_int(doc, "num_numa_nodes", "$"),
            num_uncore_caches_override=_opt_int(doc, "num_uncore_caches", "$"),
            upstream=upstream,
            attributes=dict(attributes),
        )


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


def _with_cpus(node: NUMANode, cpus: CPUSet) -> NUMANode:
    return NUMANode(
        id=node.id,
        cpus=cpus,
        memory_total_bytes=node.memory_total_bytes,
        memory_free_bytes=node.memory_free_bytes,
        hugepages=node.hugepages,
        distances=node.distances,
        online=node.online,
    )


def _numa_to_dict(n: NUMANode) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": n.id, "cpus": n.cpus.format(), "memory_total_bytes": n.memory_total_bytes}
    if n.memory_free_bytes is not None:
        doc["memory_free_bytes"] = n.memory_free_bytes
    if n.hugepages:
        doc["hugepages"] = [
            {"page_size_bytes": h.page_size_bytes, "total": h.total} | ({"free": h.free} if h.free is not None else {})
            for h in n.hugepages
        ]
    if n.distances:
        doc["distances"] = {str(k): v for k, v in sorted(n.distances.items())}
    if not n.online:
        doc["online"] = False
    return doc


def _numa_from_dict(doc: Any, where: str) -> NUMANode:
    if not isinstance(doc, Mapping):
        raise TopologyFormatError(where, "not an object")
    cpus_text = doc.get("cpus", "")
    if not isinstance(cpus_text, str):
        raise TopologyFormatError(f"{where}.cpus", "not a cpuset string")
    try:
        cpus = CPUSet.parse(cpus_text)
    except ValueError as exc:
        raise TopologyFormatError(f"{where}.cpus", str(exc)) from exc
    hugepages = []
    for i, h in enumerate(_list(doc, "hugepages", where)):
        hw = f"{where}.hugepages[{i}]"
        if not isinstance(h, Mapping):
            raise TopologyFormatError(hw, "not an object")
        hugepages.append(
            HugePages(
                page_size_bytes=_int(h, "page_size_bytes", hw),
                total=_int(h, "total", hw),
                free=_opt_int(h, "free", hw),
            )
        )
    raw_dist = doc.get("distances", {})
    if not isinstance(raw_dist, Mapping):
        raise TopologyFormatError(f"{where}.distances", "not an object")
    distances: dict[int, int] = {}
    for k, v in raw_dist.items():
        try:
            distances[int(k)] = int(v)
        except (TypeError, ValueError) as exc:
            raise TopologyFormatError(f"{where}.distances.{k}", "not an integer") from exc
    return NUMANode(
        id=_int(doc, "id", where),
        cpus=cpus,
        memory_total_bytes=_int(doc, "memory_total_bytes", where, default=0),
        memory_free_bytes=_opt_int(doc, "memory_free_bytes", where),
        hugepages=tuple(hugepages),
        distances=distances,
        online=_bool(doc, "online", where, default=True),
    )


def _pci_to_dict(d: PCIDevice) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "address": d.address,
        "vendor": d.vendor,
        "device": d.device,
        "class": d.class_code,
        "numa_node": d.numa_node,
    }
    if d.driver is not None:
        doc["driver"] = d.driver
    if d.sriov_totalvfs is not None:
        doc["sriov_totalvfs"] = d.sriov_totalvfs
    if d.physfn is not None:
        doc["physfn"] = d.physfn
    return doc


def _pci_from_dict(doc: Any, where: str) -> PCIDevice:
    if not isinstance(doc, Mapping):
        raise TopologyFormatError(where, "not an object")
    address = doc.get("address")
    if not isinstance(address, str) or not address:
        raise TopologyFormatError(f"{where}.address", "missing or not a string")
    return PCIDevice(
        address=address,
        vendor=str(doc.get("vendor", "")),
        device=str(doc.get("device", "")),
        class_code=str(doc.get("class", "")),
        numa_node=_int(doc, "numa_node", where, default=-1),
        driver=_opt_str(doc, "driver", where),
        sriov_totalvfs=_opt_int(doc, "sriov_totalvfs", where),
        physfn=_opt_str(doc, "physfn", where),
    )


_MISSING = object()


def _int(doc: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> int:
    value = doc.get(key, default)
    if value is _MISSING:
        raise TopologyFormatError(f"{where}.{key}", "missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyFormatError(f"{where}.{key}", f"expected an integer, got {value!r}")
    return value


def _opt_int(doc: Mapping[str, Any], key: str, where: str) -> int | None:
    if doc.get(key) is None:
        return None
    return _int(doc, key, where)


def _opt_str(doc: Mapping[str, Any], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TopologyFormatError(f"{where}.{key}", f"expected a string, got {value!r}")
    return value


def _bool(doc: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise TopologyFormatError(f"{where}.{key}", f"expected true or false, got {value!r}")
    return value


def _list(doc: Mapping[str, Any], key: str, where: str = "$") -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise TopologyFormatError(f"{where}.{key}", "not a list")
    return value

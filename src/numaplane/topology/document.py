"""The topology JSON document: :class:`~numaplane.topology.model.Topology` to and from plain JSON values.

The format is a superset of the conformance fixture format (``shared/conformance/SCHEMA.md`` §3):
``cpus`` (required: ``cpu``, ``core``, ``socket``, ``numa``; optional ``uncore``, ``die``, ``online``,
``raw_core_id``, ``raw_socket_id``, ``core_type``), ``numa_nodes``, ``pci_devices``, ``isolated_cpus``
(a cpuset string), ``upstream_*`` integers, ``attributes``, and the ``num_*`` counts, which override the
counts derived from ``cpus`` when present. Fixtures carry no NUMA node list: one is derived from the
online CPUs, and a listed node's CPUs are always the online CPUs naming it. Units are the model's
(bytes, bytes per page, SLIT distances). Reading raises :class:`TopologyFormatError` naming the field
(``$.cpus[3].core``); reading :func:`topology_to_dict`'s output back gives the same document.
:func:`topology_document` is the published form of the same document (``numaplane topology -o json``):
camelCase keys under ``apiVersion: numaplane.io/v1``, ``kind: Topology``; :func:`topology_from_dict`
reads both forms.
Every number is bounded before it is used (CPU and NUMA node ids are never negative, other ids
at least -1 (unknown, as sysfs reports for offline CPUs); CPU ids up to
:data:`~numaplane.limits.MAX_CPU_ID`, NUMA ids up to :data:`~numaplane.limits.MAX_NUMA_ID`, SLIT
distances 0-255 as the ACPI table stores them, sizes below 2**63), so a document costs work in
proportion to its size, never to the value of a number in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numaplane.limits import MAX_CPU_ID, MAX_NUMA_ID
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import TopologyFormatError
from numaplane.topology.model import CPUInfo, HugePages, NUMANode, PCIDevice, Topology

__all__ = ["TOPOLOGY_API_VERSION", "TOPOLOGY_KIND", "topology_document", "topology_from_dict", "topology_to_dict"]

#: The published form (``numaplane topology -o json|yaml``): camelCase keys under an apiVersion and kind.
TOPOLOGY_API_VERSION = "numaplane.io/v1"
TOPOLOGY_KIND = "Topology"
#: Keys whose values are free-form or keyed by ids: never renamed.
_OPAQUE = frozenset({"attributes", "distances"})


def topology_document(topology: Topology) -> dict[str, Any]:
    """The published document: :func:`topology_to_dict` with camelCase keys (``numNumaNodes``,
    ``memoryTotalBytes``, ``pciDevices``), under ``apiVersion`` / ``kind``, as the project's other
    outputs. :func:`topology_from_dict` reads it back (and the snake_case fixture form)."""
    body = _renamed(topology_to_dict(topology), _camel)
    return {"apiVersion": TOPOLOGY_API_VERSION, "kind": TOPOLOGY_KIND, **body}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def _renamed(value: Any, rename: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            (rename(k) if isinstance(k, str) else k): (v if k in _OPAQUE else _renamed(v, rename))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_renamed(v, rename) for v in value]
    return value


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    """The topology JSON document (superset of the conformance fixture format)."""
    doc: dict[str, Any] = {"name": topology.name}
    if topology.source:
        doc["source"] = topology.source
    doc.update(
        num_cpus=topology.num_cpus,
        num_cores=topology.num_cores,
        num_sockets=topology.num_sockets,
        num_numa_nodes=topology.num_numa_nodes,
        num_uncore_caches=topology.num_uncore_caches,
    )
    for key, value in sorted(topology.upstream.items()):
        doc[f"upstream_{key}"] = value
    if topology.note:
        doc["note"] = topology.note
    cpus: list[dict[str, Any]] = []
    for c in topology.cpus:
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
    if topology.numa_nodes:
        doc["numa_nodes"] = [_numa_to_dict(n) for n in topology.numa_nodes]
    if topology.pci_devices:
        doc["pci_devices"] = [_pci_to_dict(d) for d in topology.pci_devices]
    if topology.isolated_cpus:
        doc["isolated_cpus"] = topology.isolated_cpus.format()
    if topology.attributes:
        doc["attributes"] = dict(topology.attributes)
    return doc


def topology_from_dict(doc: Mapping[str, Any]) -> Topology:
    """Build from a topology JSON document; raise :class:`TopologyFormatError` naming the field."""
    if not isinstance(doc, Mapping):
        raise TopologyFormatError("$", "a topology document must be a JSON object")
    if "kind" in doc or "apiVersion" in doc:  # the published form (topology_document)
        if doc.get("kind") != TOPOLOGY_KIND or doc.get("apiVersion") != TOPOLOGY_API_VERSION:
            raise TopologyFormatError(
                "$.kind",
                f"kind {doc.get('kind')!r}, apiVersion {doc.get('apiVersion')!r}: expected {TOPOLOGY_KIND!r}, "
                f"{TOPOLOGY_API_VERSION!r}",
            )
        doc = _renamed({k: v for k, v in doc.items() if k not in ("kind", "apiVersion")}, _snake)
    raw_cpus = doc.get("cpus")
    if not isinstance(raw_cpus, list):
        raise TopologyFormatError("$.cpus", "missing or not a list")
    cpus: list[CPUInfo] = []
    seen: set[int] = set()
    for i, entry in enumerate(raw_cpus):
        where = f"$.cpus[{i}]"
        if not isinstance(entry, Mapping):
            raise TopologyFormatError(where, "not an object")
        cpu = _int(entry, "cpu", where, maximum=MAX_CPU_ID)
        if cpu in seen:
            raise TopologyFormatError(where, f"CPU {cpu} listed twice")
        seen.add(cpu)
        cpus.append(
            CPUInfo(
                cpu=cpu,
                core=_int(entry, "core", where, minimum=-1, maximum=MAX_CPU_ID),
                socket=_int(entry, "socket", where, minimum=-1, maximum=MAX_CPU_ID),
                numa=_int(entry, "numa", where, minimum=-1, maximum=MAX_NUMA_ID),
                uncore=_int(entry, "uncore", where, default=0, minimum=-1, maximum=MAX_CPU_ID),
                die=_int(entry, "die", where, default=0, minimum=-1, maximum=MAX_CPU_ID),
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
    return Topology(
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
    if len(raw_dist) > MAX_NUMA_ID + 1:
        raise TopologyFormatError(f"{where}.distances", f"more than {MAX_NUMA_ID + 1} NUMA nodes")
    for k, v in raw_dist.items():
        key = str(k)
        if not (key.isdigit() and len(key) <= 4 and int(key) <= MAX_NUMA_ID) and not (
            isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= MAX_NUMA_ID
        ):
            raise TopologyFormatError(f"{where}.distances.{key[:20]}", f"not a NUMA node id (0-{MAX_NUMA_ID})")
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255:
            raise TopologyFormatError(f"{where}.distances.{key}", f"expected a SLIT distance 0-255, got {_show(v)}")
        distances[int(key)] = v
    return NUMANode(
        id=_int(doc, "id", where, maximum=MAX_NUMA_ID),
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
        numa_node=_int(doc, "numa_node", where, default=-1, minimum=-1, maximum=MAX_NUMA_ID),
        driver=_opt_str(doc, "driver", where),
        sriov_totalvfs=_opt_int(doc, "sriov_totalvfs", where),
        physfn=_opt_str(doc, "physfn", where),
    )


_MISSING = object()


#: Largest size, count or raw id accepted (int64, as sysfs and the kubelet keep them).
_MAX_VALUE = 2**63 - 1


def _show(value: Any) -> str:
    """``repr`` of a value, cut to 40 characters (a 5,000-digit number is not printed whole)."""
    text = (
        repr(value) if not isinstance(value, int) or abs(value) < 10**40 else f"an integer of {len(str(value))} digits"
    )
    return text if len(text) <= 40 else text[:37] + "..."


def _int(
    doc: Mapping[str, Any],
    key: str,
    where: str,
    default: Any = _MISSING,
    *,
    minimum: int = 0,
    maximum: int = _MAX_VALUE,
) -> int:
    value = doc.get(key, default)
    if value is _MISSING:
        raise TopologyFormatError(f"{where}.{key}", "missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyFormatError(f"{where}.{key}", f"expected an integer, got {_show(value)}")
    if not minimum <= value <= maximum:
        raise TopologyFormatError(f"{where}.{key}", f"{_show(value)} is out of range {minimum}-{maximum}")
    return value


def _opt_int(doc: Mapping[str, Any], key: str, where: str) -> int | None:
    if doc.get(key) is None:
        return None
    return _int(doc, key, where, minimum=-1)


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

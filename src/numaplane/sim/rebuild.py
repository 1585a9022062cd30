"""Rebuilding a node's resource manager from a cluster snapshot (no sysfs known).

Machine model from the node's NRT (:func:`machine_from_nrt`):

* one NUMA node per zone ``node-<id>`` (zones of another type or name are ignored); distances from
  the zone's ``costs``;
* CPUs: the zone's ``cpu`` capacity, numbered contiguously zone by zone; one socket per zone; one
  thread per core, or two when the Node carries NFD's ``cpu-hardware_multithreading=true`` label
  and every zone has an even CPU count (siblings ``k`` and ``k+1``). The first ``capacity −
  allocatable`` CPUs of each zone are the reserved CPUs (``reservedCPUs``), so every zone's
  allocatable CPU count is the NRT's;
* memory: ``memory`` capacity is the zone's MemTotal; ``hugepages-<size>`` capacity gives the pages;
  the reserved memory per zone is chosen so that the manager's allocatable equals the NRT's;
  the memory policy is ``Static`` when the zones have ``memory`` rows (the kubelet reports them only
  then), else ``None``, unless the NRT states ``memoryManagerPolicy``;
* every other resource row is a device resource: ``allocatable`` devices with the zone's NUMA
  affinity, named ``<zone>-<resource>-<i>``;
* the CPU policy is ``static`` unless the NRT states ``cpuManagerPolicy: none``; the topology
  manager policy and scope are the NRT's (``none`` / ``container`` when absent).

Bounds (data from a cluster is hostile data too): a node has at most :data:`MAX_NODE_CPUS` CPUs and
:data:`MAX_NODE_DEVICES` devices, checked before any per-unit object is made (an NRT row of capacity
``1e15`` is refused, not allocated). When the NRT reports no reserved memory at all (allocatable equal
to capacity), the Static memory policy still needs some (the kubelet refuses none): one byte is
reserved on the first NUMA node and ``notes`` says so (the zone then differs from the NRT by that byte). The model's config is built into a resource
manager before it is accepted, so whatever the manager refuses falls back as below.

A node without an NRT, or whose NRT the model cannot use (no ``node-<id>`` zone, inconsistent
rows, a bound exceeded: said in ``notes``), is modelled from its Node capacity as one NUMA zone with the ``none``
topology policy (``source == "capacity"``). :func:`check_model` compares the empty model's zones with
the NRT's allocatable and says where they differ.

Existing allocations: :func:`creation_order` sorts the node's bound pods (creation time, then
namespace and name); the simulation admits them in that order and reports any it cannot re-admit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.limits import MAX_CPU_ID
from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.from_manager import node_nrt
from numaplane.nrt.model import NodeResourceTopology, Zone, zone_numa_id
from numaplane.nrt.parse import parse_strict
from numaplane.policy.config import NodeResourceConfig, parse_config
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.resources.errors import QuantityError
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity, parse_quantity
from numaplane.sim.snapshot import policy_from_attributes
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import CPUInfo, HugePages, NUMANode, Topology

__all__ = [
    "MAX_NODE_CPUS",
    "MAX_NODE_DEVICES",
    "NodeModel",
    "NodeRebuildError",
    "check_model",
    "creation_order",
    "machine_from_nrt",
    "model_node",
    "zone_available",
]

#: Most CPUs a rebuilt node has (CPU ids are at most ``MAX_CPU_ID``).
MAX_NODE_CPUS = MAX_CPU_ID + 1
#: Most devices a rebuilt node has (one object is made per device).
MAX_NODE_DEVICES = 16_384


class NodeRebuildError(ValueError):
    """Node ``node`` of a snapshot cannot be modelled at all (not even from its capacity): ``reason``."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"node {node}: {reason}")
        self.node = node
        self.reason = reason


SMT_LABEL = "feature.node.kubernetes.io/cpu-hardware_multithreading"
_HUGEPAGES = "hugepages-"


@dataclass(frozen=True)
class NodeModel:
    """A snapshot node rebuilt: machine model, resource-manager config (as a document, so scenario
    changes can be merged in), node allocatable, the NRT as captured and how the model was made."""

    name: str
    topology: Topology
    config_doc: Mapping[str, Any]
    allocatable: Mapping[str, Quantity]
    labels: Mapping[str, str]
    nrt: NodeResourceTopology | None
    source: str  # "nrt" | "capacity"
    notes: tuple[str, ...] = ()

    def config(self, overrides: Mapping[str, Any] | None = None) -> NodeResourceConfig:
        """The node's config, with ``overrides`` (a partial config document) merged section by section."""
        doc = {k: dict(v) if isinstance(v, Mapping) else v for k, v in self.config_doc.items()}
        for section, value in (overrides or {}).items():
            if isinstance(value, Mapping) and isinstance(doc.get(section), dict):
                doc[section].update(value)
            else:
                doc[section] = value
        return parse_config(doc)


def _int(text: Any) -> int:
    return int(parse_quantity(str(text)).value())


def _page_size(resource: str) -> int:
    return _int(resource.removeprefix(_HUGEPAGES))


def machine_from_nrt(
    nrt: NodeResourceTopology, *, smt: bool = False, name: str = ""
) -> tuple[Topology, dict[str, Any], dict[int, dict[str, int]]]:
    """(topology, config document without reserved memory, NRT allocatable per NUMA id and resource)."""
    zones = sorted(((z.numa_id, z) for z in nrt.zones if z.numa_id is not None), key=lambda p: p[0])
    if not zones:
        raise NRTFormatError("zones", "no zone named node-<id>")
    counts = []
    for _, zone in zones:
        row = zone.resource("cpu")
        counts.append(int(row.capacity.value()) if row is not None else 0)
    if sum(max(c, 0) for c in counts) > MAX_NODE_CPUS:
        raise NRTFormatError("zones", f"{sum(counts)} CPUs: a node has at most {MAX_NODE_CPUS}")
    rows = [
        (max(int(r.allocatable.value()), 0), zone.name, r.name)
        for _, zone in zones
        for r in zone.resources
        if r.name not in ("cpu", "memory") and not r.name.startswith(_HUGEPAGES)
    ]
    device_count = sum(n for n, _, _ in rows)
    if device_count > MAX_NODE_DEVICES:
        _, zone_name, resource = max(rows)  # the row that counts most, named
        raise NRTFormatError(
            f"zone {zone_name}, resource {resource}",
            f"{device_count} devices: a node has at most {MAX_NODE_DEVICES}",
        )
    smt = smt and all(c % 2 == 0 for c in counts)
    cpus: list[CPUInfo] = []
    nodes: list[NUMANode] = []
    reserved: list[int] = []
    devices: dict[str, list[dict[str, Any]]] = {}
    allocatable: dict[int, dict[str, int]] = {}
    memory_rows = False
    first = 0
    for (numa, zone), count in zip(zones, counts, strict=True):
        ids = list(range(first, first + count))
        for cpu in ids:
            core = first + (cpu - first) // 2 if smt else cpu
            cpus.append(CPUInfo(cpu=cpu, core=core, socket=numa, numa=numa, uncore=numa))
        first += count
        alloc = allocatable.setdefault(numa, {})
        memory_total = 0
        pages: list[HugePages] = []
        for row in zone.resources:
            amount = int(row.allocatable.value())
            alloc[row.name] = amount
            if row.name == "cpu":
                reserved.extend(ids[: max(count - amount, 0)])
            elif row.name == "memory":
                memory_rows = True
                memory_total = int(row.capacity.value())
            elif row.name.startswith(_HUGEPAGES):
                size = _page_size(row.name)
                pages.append(HugePages(size, int(row.capacity.value()) // size, int(row.capacity.value()) // size))
            else:
                for i in range(amount):
                    devices.setdefault(row.name, []).append(
                        {"id": f"{zone.name}-{row.name.rsplit('/', 1)[-1]}-{i}", "numa": [numa]}
                    )
        distances = {c.numa_id: int(c.value) for c in _costs(zone) if c.numa_id is not None}
        nodes.append(
            NUMANode(
                id=numa,
                cpus=CPUSet(ids),
                memory_total_bytes=memory_total,
                memory_free_bytes=memory_total,
                hugepages=tuple(pages),
                distances=distances,
            )
        )
    topology = Topology(cpus=tuple(cpus), numa_nodes=tuple(nodes), name=name or nrt.name, source="nrt")
    policy = _policy(nrt)
    cpu_policy = "none" if policy.get("cpuManagerPolicy", "").lower() == "none" else "static"
    memory_policy = policy.get("memoryManagerPolicy") or ("Static" if memory_rows else "None")
    doc: dict[str, Any] = {
        "topologyManager": {
            "policy": policy.get("topologyManagerPolicy", "none"),
            "scope": policy.get("topologyManagerScope", "container"),
        },
        "cpuManager": {"policy": cpu_policy, "reservedCPUs": CPUSet(reserved).format()},
        "memoryManager": {"policy": "Static" if memory_policy.lower() == "static" else "None"},
        "devices": devices,
    }
    return topology, doc, allocatable


@dataclass(frozen=True)
class _Cost:
    numa_id: int | None
    value: int


def _costs(zone: Zone) -> list[_Cost]:
    return [_Cost(zone_numa_id(c.name), c.value) for c in zone.costs]


def _policy(nrt: NodeResourceTopology) -> dict[str, str]:
    return policy_from_attributes(
        [{"name": a.name, "value": a.value} for a in nrt.attributes], list(nrt.topology_policies)
    )


def _reserved_memory(
    topology: Topology, doc: Mapping[str, Any], wanted: Mapping[int, Mapping[str, int]]
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """``reservedMemory`` making the Static memory policy's allocatable equal ``wanted``, and a note
    when that is none at all (then one byte is reserved on the first node: the policy needs some)."""
    if doc["memoryManager"]["policy"] != "Static":
        return [], ()
    if not any(n.memory_total_bytes > 0 for n in topology.numa_nodes):
        raise NRTFormatError("zones", "the Static memory policy with no memory capacity in any zone")
    # the Static policy refuses a config without reserved memory: probe with one byte reserved
    first = min(n.id for n in topology.numa_nodes if n.memory_total_bytes > 0)
    probe_doc = dict(
        doc, memoryManager={"policy": "Static", "reservedMemory": [{"numaNode": first, "limits": {"memory": "1"}}]}
    )
    have = ResourceManager(topology, parse_config(probe_doc)).memory.allocatable()
    out = []
    for numa, resources in sorted(have.items()):
        limits = {}
        for resource, amount in sorted(resources.items()):
            amount += 1 if (numa, resource) == (first, "memory") else 0
            diff = amount - wanted.get(numa, {}).get(resource, amount)
            if diff > 0:
                limits[resource] = str(diff)
        if limits:
            out.append({"numaNode": numa, "limits": limits})
    if not out:
        note = (
            "the NRT reports no reserved memory (allocatable equals capacity); the Static memory policy "
            f"needs some: 1 byte reserved on NUMA node {first}"
        )
        return [{"numaNode": first, "limits": {"memory": "1"}}], (note,)
    return out, ()


def _quantities(doc: Mapping[str, str]) -> dict[str, Quantity]:
    out = {}
    for key, text in doc.items():
        try:
            out[key] = parse_quantity(str(text))
        except QuantityError:
            continue
    return out


def _capacity_model(node: Mapping[str, Any]) -> tuple[Topology, dict[str, Any]]:
    capacity = _quantities(node.get("capacity") or node.get("allocatable") or {})
    cpus = max(int(capacity["cpu"].value()) if "cpu" in capacity else 1, 1)
    if cpus > MAX_NODE_CPUS:
        raise NodeRebuildError(str(node.get("name", "")), f"capacity cpu {cpus}: a node has at most {MAX_NODE_CPUS}")
    memory = int(capacity["memory"].value()) if "memory" in capacity else 0
    ids = list(range(cpus))
    topology = Topology(
        cpus=tuple(CPUInfo(cpu=i, core=i, socket=0, numa=0) for i in ids),
        numa_nodes=(NUMANode(0, CPUSet(ids), memory, memory, (), {0: 10}),),
        name=str(node.get("name", "")),
        source="node-capacity",
    )
    doc = {"topologyManager": {"policy": "none", "scope": "container"}, "cpuManager": {"policy": "none"}}
    return topology, doc


def model_node(node: Mapping[str, Any], nrt_doc: Mapping[str, Any] | None) -> NodeModel:
    """The model of one reduced snapshot node (and its reduced NRT, if any)."""
    name = str(node.get("name", ""))
    labels = {str(k): str(v) for k, v in (node.get("labels") or {}).items()}
    allocatable = _quantities(node.get("allocatable") or node.get("capacity") or {})
    if nrt_doc is None:
        topology, doc = _capacity_model(node)
        return NodeModel(name, topology, doc, allocatable, labels, None, "capacity")
    body = {k: v for k, v in nrt_doc.items() if k not in ("name", "policy")}
    body["metadata"] = {"name": name}
    try:
        nrt = parse_strict(body)
        topology, doc, wanted = machine_from_nrt(nrt, smt=labels.get(SMT_LABEL) == "true", name=name)
        reserved, notes = _reserved_memory(topology, doc, wanted)
        doc["memoryManager"]["reservedMemory"] = reserved
        ResourceManager(topology, parse_config(doc))  # what the manager refuses falls back below
    except (NRTFormatError, PolicyConfigError, QuantityError, ValueError) as exc:
        # an NRT the model cannot use (foreign zone layout, inconsistent rows): say so, keep the node
        topology, doc = _capacity_model(node)
        note = f"NRT not usable ({exc}); modelled from the Node's capacity"
        return NodeModel(name, topology, doc, allocatable, labels, None, "capacity", (note,))
    return NodeModel(name, topology, doc, allocatable, labels, nrt, "nrt", notes)


def zone_available(nrt: NodeResourceTopology) -> dict[str, dict[str, int]]:
    """``{zone: {resource: available}}`` of NUMA zones (the per-zone headroom)."""
    return {z.name: {r.name: int(r.available.value()) for r in z.resources} for z in nrt.zones if z.numa_id is not None}


def zone_allocatable(nrt: NodeResourceTopology) -> dict[str, dict[str, int]]:
    return {
        z.name: {r.name: int(r.allocatable.value()) for r in z.resources} for z in nrt.zones if z.numa_id is not None
    }


def check_model(model: NodeModel) -> list[str]:
    """Where the empty model's per-zone allocatable differs from the captured NRT (empty: identical)."""
    if model.nrt is None:
        return []
    manager = ResourceManager(model.topology, model.config())
    got = zone_allocatable(node_nrt(manager, model.name))
    want = zone_allocatable(model.nrt)
    return [
        f"{zone} {resource}: model {got.get(zone, {}).get(resource)} vs NRT {amount}"
        for zone, rows in sorted(want.items())
        for resource, amount in sorted(rows.items())
        if got.get(zone, {}).get(resource) != amount
    ]


def creation_order(pods: Sequence[Pod]) -> list[Pod]:
    """Pods in creation order (``metadata.creationTimestamp``, then namespace and name)."""

    def key(pod: Pod) -> tuple[str, str, str]:
        meta = pod.raw.get("metadata") or {}
        return (str(meta.get("creationTimestamp") or ""), pod.namespace, pod.name)

    return sorted(pods, key=key)

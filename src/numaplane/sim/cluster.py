"""Simulated nodes: a machine topology, its node configuration and a running :class:`ResourceManager`.

A :class:`NodeTemplate` says what a node is (topology, resource-manager config, extra hugepages, device
inventory); :func:`instantiate` makes a fresh :class:`SimNode` from it for every scheduler run so that
all schedulers start from identical clusters.

Built-in topologies are JSON files shipped in ``numaplane/sim/data/topologies`` (derived from 25 real
machines' sysfs snapshots by numaplane's own discovery; ``scripts/gen_sim_topologies.py``). A built-in
name means one machine in every command (``simulate``, ``admit``): :func:`load_topology` returns the
machine *as modelled*, i.e. with the two additions below.

Modelling choices (documented because they shape results):

* memory: four snapshots carry no memory data (``amd-epyc7451-2s8n-96t``, ``amd-ryzen5-1600-1s1n-12t``,
  ``intel-xeon-x7550-4s-64t-3nodes``, ``riscv-sophgo-sg2042-1s4n-64c``); their NUMA nodes with CPUs
  get :data:`ASSUMED_MEMORY_PER_CPU` (4 GiB) per CPU, a common server ratio, instead of 0 bytes
  (:func:`assumed_memory` names them);
* hugepages: ``hugepages_1g_per_numa`` pages of 1 GiB are added on every NUMA node with memory
  (:data:`BUILTIN_HUGEPAGES_1G` = 8 for built-in machines; ``simulate --hugepages-1g`` overrides the
  count; the snapshots' pools are mostly empty; a production node would pre-allocate them at boot);
* devices: every NUMA-affine network PCI function of the real machine becomes one
  ``example.com/nic`` device on its NUMA node (an SR-IOV-like inventory);
* node allocatable (what the default scheduler sees) = capacity − reserved CPUs − reserved memory −
  hugepages, plus hugepages and devices; ``pods`` = 110.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cache, partial
from importlib import resources
from typing import Any

from numaplane.limits import MAX_SIMULATED_NODES
from numaplane.policy.config import DeviceSpec, NodeResourceConfig, parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.policy.plugin import ResourcePlugin
from numaplane.resources.quantity import Quantity
from numaplane.sim.errors import ClusterSpecError
from numaplane.topology.document import topology_from_dict
from numaplane.topology.errors import TopologyError
from numaplane.topology.model import HugePages, NUMANode, Topology

__all__ = [
    "DEFAULT_CLUSTER",
    "NodeTemplate",
    "SimNode",
    "builtin_topologies",
    "instantiate",
    "load_topology",
    "node_config",
]

NIC_RESOURCE = "example.com/nic"
MAX_PODS = 110
ASSUMED_MEMORY_PER_CPU = 4 << 30
BUILTIN_HUGEPAGES_1G = 8

# (built-in topology, node count): 36 multi-NUMA servers, 3,328 CPUs in all
DEFAULT_CLUSTER: tuple[tuple[str, int], ...] = (
    ("intel-xeon-gold6330-2s2n-112t-pci", 8),
    ("intel-xeon-gold6230-2s-snc2-4n-80t-msc", 8),
    ("arm64-kunpeng920-2s4n-128c", 6),
    ("intel-xeon-4s4n-144t", 6),
    ("intel-xeon-2s-snc2-4n-80t-hugepages", 4),
    ("intel-xeon-gold6230-2s2n-80t-pci", 4),
)


@cache
def builtin_topologies() -> tuple[str, ...]:
    """Names of the shipped topologies."""
    folder = resources.files("numaplane.sim") / "data" / "topologies"
    return tuple(sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json")))


@cache
def _raw_builtin(name: str) -> Topology:
    path = resources.files("numaplane.sim") / "data" / "topologies" / f"{name}.json"
    return topology_from_dict(json.loads(path.read_text(encoding="utf-8")))


def assumed_memory(name: str) -> bool:
    """Whether the built-in machine ``name`` had no memory data, so its memory is assumed (module docstring)."""
    return all(n.memory_total_bytes == 0 for n in _raw_builtin(name).numa_nodes)


@cache
def _load_builtin(name: str, hugepages_1g_per_numa: int) -> Topology:
    """The built-in machine as modelled: assumed memory where the snapshot has none, 1 GiB hugepages."""
    topology = _raw_builtin(name)
    if assumed_memory(name):
        nodes = tuple(
            replace(
                n,
                memory_total_bytes=n.cpus.size() * ASSUMED_MEMORY_PER_CPU,
                memory_free_bytes=n.cpus.size() * ASSUMED_MEMORY_PER_CPU,
            )
            for n in topology.numa_nodes
        )
        topology = replace(topology, numa_nodes=nodes)
    return with_hugepages(topology, hugepages_1g_per_numa)


def load_topology(spec: str, *, hugepages_1g_per_numa: int = BUILTIN_HUGEPAGES_1G) -> Topology:
    """A built-in name (the machine as modelled, see the module docstring; ``hugepages_1g_per_numa``
    sets its 1 GiB pools), a topology JSON/YAML file, or a sysfs folder / ``.tar.gz`` snapshot (as read)."""
    from numaplane.topology import load  # adapter (reads files); imported only when a spec is loaded

    builtins = {name: partial(_load_builtin, name, hugepages_1g_per_numa) for name in builtin_topologies()}
    try:
        return load.load_topology(spec, builtins=builtins)
    except TopologyError as exc:
        raise ClusterSpecError(f"topology {exc}") from exc


def with_hugepages(topology: Topology, pages_1g: int) -> Topology:
    """``topology`` with ``pages_1g`` 1 GiB hugepages on every NUMA node that has memory."""
    if pages_1g <= 0:
        return topology
    nodes = []
    for node in topology.numa_nodes:
        hp = tuple(h for h in node.hugepages if h.page_size_bytes != 1 << 30)
        if node.memory_total_bytes >= (pages_1g + 4) << 30:
            hp = (*hp, HugePages(1 << 30, pages_1g, pages_1g))
        nodes.append(
            NUMANode(
                id=node.id,
                cpus=node.cpus,
                memory_total_bytes=node.memory_total_bytes,
                memory_free_bytes=node.memory_free_bytes,
                hugepages=tuple(h for h in hp if h.total > 0),
                distances=node.distances,
                online=node.online,
            )
        )
    return replace(topology, numa_nodes=tuple(nodes))


def nic_inventory(topology: Topology) -> tuple[DeviceSpec, ...]:
    """One device per NUMA-affine network PCI function (class 02xxxx)."""
    return tuple(
        DeviceSpec(id=f"nic-{d.address}", numa=(d.numa_node,))
        for d in topology.pci_devices
        if d.numa_node >= 0 and d.class_code.removeprefix("0x").startswith("02")
    )


def node_config(
    topology: Topology, *, policy: str, scope: str, reserved_cpus: int, reserved_memory_per_numa: int
) -> NodeResourceConfig:
    """The resource-manager config of a simulated node (static CPU and memory policies)."""
    memory_nodes = [n.id for n in topology.numa_nodes if n.memory_total_bytes > 0]
    return parse_config(
        {
            "topologyManager": {"policy": policy, "scope": scope},
            "cpuManager": {"policy": "static", "reservedCPUCount": reserved_cpus},
            "memoryManager": {
                "policy": "Static" if memory_nodes else "None",
                "reservedMemory": [
                    {"numaNode": n, "limits": {"memory": str(reserved_memory_per_numa)}} for n in memory_nodes
                ],
            },
            "devices": {NIC_RESOURCE: [{"id": d.id, "numa": list(d.numa or ())} for d in nic_inventory(topology)]},
        }
    )


PluginFactory = Callable[[Topology, NodeResourceConfig], ResourcePlugin]


@dataclass(frozen=True)
class NodeTemplate:
    """What a simulated node is. ``config`` is the node's resource-manager configuration; ``plugins``
    build the node's vendor plugins (``simulate --plugin``), one instance per node."""

    name: str
    topology: Topology
    config: NodeResourceConfig
    plugins: tuple[PluginFactory, ...] = ()


@dataclass
class SimNode:
    """A live simulated node: its manager, its allocatable, the pods bound to it and their requests."""

    name: str
    topology: Topology
    manager: ResourceManager
    allocatable: dict[str, Quantity]
    node_doc: dict[str, Any]
    used: dict[str, Fraction] = field(default_factory=dict)
    bound: dict[str, Any] = field(default_factory=dict)
    dirty: bool = True


def allocatable_of(topology: Topology, manager: ResourceManager) -> dict[str, Quantity]:
    """Node allocatable as the kubelet reports it (see module docstring)."""
    cpus = manager.cpu.policy.allocatable.size() if manager.cpu.policy is not None else topology.num_cpus
    reserved_mem = sum(sum(v.get("memory", 0) for v in [r]) for r in manager.config.reserved_memory.values())
    hugepages: dict[str, int] = {}
    for node in topology.numa_nodes:
        for h in node.hugepages:
            hugepages[h.resource_name] = hugepages.get(h.resource_name, 0) + h.total_bytes
    memory = sum(n.memory_total_bytes for n in topology.numa_nodes) - reserved_mem - sum(hugepages.values())
    out = {
        "cpu": Quantity.from_int(cpus),
        "memory": Quantity.from_int(max(memory, 0), binary=True),
        "pods": Quantity.from_int(MAX_PODS),
    }
    for name, size in hugepages.items():
        out[name] = Quantity.from_int(size, binary=True)
    for resource, devices in manager.config.devices.items():
        if devices:
            out[resource] = Quantity.from_int(len(devices))
    builtin = {id(manager.cpu), id(manager.memory), id(manager.devices)}
    for plugin in manager.plugins:
        if id(plugin) in builtin:
            continue
        totals: dict[str, int] = {}
        for amounts in plugin.allocatable().values():
            for resource, amount in amounts.items():
                if resource in plugin.resources:
                    totals[resource] = totals.get(resource, 0) + amount
        for resource, total in totals.items():
            out[resource] = Quantity.from_int(total)  # the vendor's device plugin advertises them
    return out


def instantiate(template: NodeTemplate) -> SimNode:
    """A fresh node (empty manager) from its template."""
    plugins = [make(template.topology, template.config) for make in template.plugins]
    manager = ResourceManager(template.topology, template.config, extra_plugins=plugins)
    allocatable = allocatable_of(template.topology, manager)
    doc = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": template.name, "labels": {"kubernetes.io/hostname": template.name}},
        "status": {
            "capacity": {k: str(v) for k, v in allocatable.items()},
            "allocatable": {k: str(v) for k, v in allocatable.items()},
        },
    }
    return SimNode(template.name, template.topology, manager, allocatable, doc)


def build_templates(
    spec: Sequence[tuple[str, int]],
    *,
    policy: str,
    scope: str,
    hugepages_1g_per_numa: int = 8,
    reserved_cpus: int = 2,
    reserved_memory_per_numa: int = 512 << 20,
    topology_loader: Any = load_topology,
) -> list[NodeTemplate]:
    """Templates for ``[(topology, count), ...]``, named ``<short>-<n>`` in order."""
    templates: list[NodeTemplate] = []
    for topo_spec, count in spec:
        if count < 1:
            raise ClusterSpecError(f"topology {topo_spec!r}: node count must be at least 1, got {count}")
        loaded = (
            load_topology(topo_spec, hugepages_1g_per_numa=hugepages_1g_per_numa)
            if topology_loader is load_topology
            else topology_loader(topo_spec)
        )
        topology = with_hugepages(loaded, hugepages_1g_per_numa)
        config = node_config(
            topology,
            policy=policy,
            scope=scope,
            reserved_cpus=reserved_cpus,
            reserved_memory_per_numa=reserved_memory_per_numa,
        )
        short = (topology.name or "node").split("-")[0:3]
        for _ in range(count):
            templates.append(NodeTemplate(f"{'-'.join(short)}-{len(templates):03d}", topology, config))
    return templates


def parse_cluster_spec(items: Sequence[str], default_count: int | None = None) -> list[tuple[str, int]]:
    """``NAME``, ``NAME=COUNT`` or ``NAME:COUNT`` items (repeatable ``--topology``)."""
    out: list[tuple[str, int]] = []
    for item in items:
        name, sep, count_text = (
            item.replace(":", "=").rpartition("=") if "=" in item.replace(":", "=") else (item, "", "")
        )
        if not sep:
            name, count_text = item, ""
        try:
            count = int(count_text) if count_text else (default_count or 1)
        except ValueError as exc:
            raise ClusterSpecError(f"--topology {item!r}: count {count_text!r} is not an integer") from exc
        if not 1 <= count <= MAX_SIMULATED_NODES:
            raise ClusterSpecError(f"--topology {item!r}: count {count} is not between 1 and {MAX_SIMULATED_NODES}")
        out.append((name, count))
    total = sum(count for _, count in out)
    if total > MAX_SIMULATED_NODES:
        raise ClusterSpecError(f"--topology: {total} nodes in all, more than {MAX_SIMULATED_NODES}")
    return out


def scale_cluster(spec: Sequence[tuple[str, int]], nodes: int) -> list[tuple[str, int]]:
    """Scale counts proportionally so they add up to ``nodes`` (each kind keeps at least one node)."""
    total = sum(c for _, c in spec)
    if nodes <= 0:
        raise ClusterSpecError(f"--nodes must be positive, got {nodes}")
    if nodes < len(spec):
        return [(name, 1) for name, _ in spec[:nodes]]
    scaled = [(name, max(1, c * nodes // total)) for name, c in spec]
    missing = nodes - sum(c for _, c in scaled)
    i = 0
    while missing != 0:
        name, c = scaled[i % len(scaled)]
        if missing > 0:
            scaled[i % len(scaled)] = (name, c + 1)
            missing -= 1
        elif c > 1:
            scaled[i % len(scaled)] = (name, c - 1)
            missing += 1
        i += 1
    return scaled


def describe(templates: Sequence[NodeTemplate]) -> Mapping[str, int]:
    counts: dict[str, int] = {}
    for t in templates:
        counts[t.topology.name] = counts.get(t.topology.name, 0) + 1
    return counts

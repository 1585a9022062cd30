"""From a :class:`~numaplane.policy.manager.ResourceManager` to the NRT accounting inputs.

:func:`allocation_state` converts the manager's allocations into the exporter's abstract
:class:`NodeAllocationState` (exclusive CPUs, pinned memory blocks, devices with their NUMA
nodes); :func:`node_nrt` computes the NodeResourceTopology object a node running that manager
publishes. The simulator, the agent's PodResources server and tests all use this one conversion, so
what the scheduler reads is exactly what the node manager holds.

Allocatable memory is reported per NUMA node only when the static memory policy runs (the kubelet's
``GetAllocatableResources`` lists memory only then), matching the upstream exporter's semantics.

Every plugin — the built-in cpu, memory and devices ones and vendor plugins, in process or out of
process — is seen through the plugin protocol alone (``inventory()``, ``allocations()``; an
out-of-process plugin answers them from the cache its driver keeps, see ``grpcapi/pluginapi``).
Vendor plugins' ``allocatable()`` / ``available()`` per-NUMA amounts become rows of the NRT zones
(:func:`vendor_amounts`); their devices (inventory and allocations) are in the PodResources answers
(``allocation_state(..., vendor_devices=True)``), the zone computation leaves them out.
:class:`NRTPublisher` is an incremental driver of the same zone rules (:mod:`numaplane.nrt.zones`):
only its reading of what is in use differs — it reads the built-in plugins' states directly (it is
checked equal to :func:`node_nrt`).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

from numaplane.nrt.fingerprint import METHOD_ALL, compute_fingerprint, pod_hash, sign_sorted
from numaplane.nrt.model import NodeResourceTopology, Zone
from numaplane.nrt.state import ContainerAllocation, DeviceAssignment, MemoryBlock, NodeAllocationState
from numaplane.nrt.zones import MachineView, ZoneBasis, ZoneConfig, make_nrt, resource_row, zones_from_state
from numaplane.policy.manager import ResourceManager
from numaplane.policy.plugin import PluginAllocation, ResourcePlugin, inventory_of
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = ["NRTPublisher", "allocation_state", "node_nrt", "vendor_amounts", "vendor_plugins"]


def vendor_plugins(manager: ResourceManager) -> list[ResourcePlugin]:
    """The manager's plugins other than its built-in cpu, memory and devices plugins."""
    builtin = {id(manager.cpu), id(manager.memory), id(manager.devices)}
    return [p for p in manager.plugins if id(p) not in builtin]


def vendor_amounts(manager: ResourceManager) -> dict[int, dict[str, tuple[int, int]]]:
    """Per NUMA node: resource → ``(allocatable, available)`` from the vendor plugins' protocol answers
    (``available`` clamped to ``0 .. allocatable``; resources the plugin does not declare are ignored)."""
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for plugin in vendor_plugins(manager):
        declared = plugin.resources
        free = plugin.available()
        for numa, amounts in plugin.allocatable().items():
            for resource, amount in amounts.items():
                if resource in declared:
                    left = free.get(numa, {}).get(resource, 0)
                    out.setdefault(numa, {})[resource] = (amount, min(max(left, 0), amount))
    return out


def _with_vendor_rows(zones: Sequence[Zone], rows: Mapping[int, Mapping[str, tuple[int, int]]]) -> list[Zone]:
    """``zones`` with the vendor rows of their NUMA node added (a row replaces one of the same name)."""
    if not rows:
        return list(zones)
    out = []
    for zone in zones:
        extra = rows.get(zone.numa_id) if zone.numa_id is not None else None
        if not extra:
            out.append(zone)
            continue
        kept = [r for r in zone.resources if r.name not in extra]
        added = [resource_row(name, alloc, alloc, free) for name, (alloc, free) in extra.items()]
        out.append(replace(zone, resources=tuple(sorted([*kept, *added], key=lambda r: r.name))))
    return out


def allocation_state(manager: ResourceManager, *, vendor_devices: bool = False) -> NodeAllocationState:
    """The manager's exclusive allocations as an abstract node allocation state, from the plugin
    protocol alone (built-in and vendor plugins, in process or out of process, alike).

    Allocatable: the CPUs every plugin that reports CPU ids may hand out (the intersection), the
    pinned memory and the devices of every plugin's ``inventory()``. Per admitted container: the CPUs,
    memory blocks and devices of every plugin's ``allocations()`` entry for it; a device's NUMA nodes
    come from its plugin's inventory (else from the allocation's affinity).

    ``vendor_devices`` adds the vendor plugins' devices (allocatable and held: the PodResources view);
    the zone computation leaves them out, it takes vendor amounts from :func:`vendor_amounts`."""
    vendor = {id(p) for p in vendor_plugins(manager)}
    cpu_mask: int | None = None
    memory: list[MemoryBlock] = []
    devices: list[DeviceAssignment] = []
    numa_of: dict[tuple[str, str], tuple[int, ...]] = {}
    held: list[tuple[bool, Mapping[tuple[str, str], PluginAllocation]]] = []
    for plugin in manager.plugins:
        listed = id(plugin) not in vendor or vendor_devices
        inventory = inventory_of(plugin)
        if inventory.cpus is not None:
            cpu_mask = inventory.cpus.mask if cpu_mask is None else cpu_mask & inventory.cpus.mask
        for numa, resources in sorted(inventory.memory.items()):
            for resource, size in sorted(resources.items()):
                memory.append(MemoryBlock(resource, size, (numa,)))
        for dev in inventory.devices:
            numa_of[(dev.resource, dev.id)] = dev.numa
            if listed:
                devices.append(DeviceAssignment(dev.resource, (dev.id,), dev.numa))
        held.append((listed, plugin.allocations()))
    containers: list[ContainerAllocation] = []
    for uid, admission in manager.admissions.items():
        pod = manager.pods[uid]
        for c in admission.containers:
            key = (uid, c.name)
            mask = 0
            blocks: list[MemoryBlock] = []
            devs: list[DeviceAssignment] = []
            for listed, allocations in held:
                alloc = allocations.get(key)
                if alloc is None:
                    continue
                if alloc.cpus is not None:
                    mask |= alloc.cpus.mask
                blocks.extend(MemoryBlock(b.resource, b.size_bytes, b.numa) for b in alloc.memory)
                if listed:
                    affinity = tuple(alloc.numa.ids()) if alloc.numa is not None else ()
                    for resource, ids in sorted(alloc.devices.items()):
                        devs.extend(DeviceAssignment(resource, (i,), numa_of.get((resource, i), affinity)) for i in ids)
            if not mask and not blocks and not devs:
                continue
            containers.append(
                ContainerAllocation(
                    namespace=pod.namespace,
                    pod=pod.name,
                    container=c.name,
                    exclusive_cpus=CPUSet.from_mask(mask),
                    memory=tuple(blocks),
                    devices=tuple(devs),
                )
            )
    return NodeAllocationState(
        allocatable_cpus=manager.topology.all_cpus if cpu_mask is None else CPUSet.from_mask(cpu_mask),
        allocatable_memory=tuple(memory),
        allocatable_devices=tuple(devices),
        containers=tuple(containers),
    )


def node_nrt(
    manager: ResourceManager,
    node_name: str,
    *,
    machine: MachineView | None = None,
    config: ZoneConfig | None = None,
    extra_pods: Sequence[tuple[str, str]] = (),
) -> NodeResourceTopology:
    """The NRT a node running ``manager`` publishes (zones, policy attributes, pod fingerprint).

    The fingerprint covers every admitted pod plus ``extra_pods`` (``(namespace, name)`` of pods the
    node runs outside the manager's view), with method ``all``.
    """
    view = machine if machine is not None else MachineView.from_topology(manager.topology)
    zones = _with_vendor_rows(
        zones_from_state(node_name, view, allocation_state(manager), config), vendor_amounts(manager)
    )
    pods = [(p.namespace, p.name) for p in manager.pods.values()] + list(extra_pods)
    return make_nrt(
        node_name,
        zones,
        topology_manager_policy=manager.config.topology_policy,
        topology_manager_scope=manager.config.topology_scope,
        fingerprint=compute_fingerprint(pods),
        fingerprint_method=METHOD_ALL,
    )


class NRTPublisher:
    """Fast, incremental :func:`node_nrt` for one node: same object, a fraction of the cost.

    It drives the zone rules of :mod:`numaplane.nrt.zones` (no rule of its own): the
    :class:`~numaplane.nrt.zones.ZoneBasis` (per-zone allocatable, capacity, costs) is built from
    :func:`allocation_state`'s allocatable side and kept while the manager's configuration object is
    unchanged; each :meth:`publish` feeds a fresh :class:`~numaplane.nrt.zones.ZoneUsage` what is in
    use — the cpu plugin's exclusive CPUs, the memory plugin's pinned blocks, the devices plugin's
    healthy allocated devices, read from their states (cheaper than their ``allocations()`` records)
    — and calls :meth:`~numaplane.nrt.zones.ZoneTemplate.zone` only for a zone whose used amounts it
    has not seen, then adds the vendor rows and the pod fingerprint. Tests check that it equals
    :func:`node_nrt` on random allocation streams.

    Between publishes it keeps: per NUMA node the used amounts and zone of the last publish, each zone
    object per set of used amounts (zones are immutable; at most ``_ZONE_MEMO``; both dropped with
    the basis when the configuration changes), and the sorted hashes of the pods it last saw (per uid: the
    pod object and its hash), updated by the pods that are new and the uids that went.
    """

    def __init__(self, manager: ResourceManager, node_name: str) -> None:
        self.manager = manager
        self.node_name = node_name
        self._config: object = None
        self._machine = MachineView.from_topology(manager.topology)
        self._basis: ZoneBasis | None = None
        self._zones: dict[tuple[int, tuple[tuple[str, int], ...]], Zone] = {}  # (numa, used) → zone
        self._last: list[tuple[Mapping[str, int], Zone] | None] = []  # per template: last used amounts, zone
        self._known: dict[str, tuple[Pod, int]] = {}  # uid → (pod, hash) as last published
        self._hashes: list[int] = []  # the hashes of ``_known``, sorted

    def _prepare(self) -> ZoneBasis:
        manager = self.manager
        if self._basis is None or self._config is not manager.config:
            self._config = manager.config
            allocatable, _ = allocation_state(manager).to_podresources()
            self._basis = ZoneBasis(self.node_name, self._machine, allocatable)
            self._zones = {}
            self._last = [None] * len(self._basis.templates)
        return self._basis

    def publish(self) -> NodeResourceTopology:
        """The node's NRT now (equal to ``node_nrt(manager, node_name)``)."""
        basis = self._prepare()
        manager = self.manager
        usage = basis.usage()
        usage.add_cpu_mask(manager.cpu.state.assigned().mask)
        memory = manager.memory.policy
        if memory is not None:
            usage.add_memory(
                [(b.type, b.size, b.numa) for cs in memory.state.entries.values() for bs in cs.values() for b in bs]
            )
        devices = manager.devices.policy
        for resource in devices.resources:
            taken = devices.allocated(resource)
            if taken:
                usage.add_devices(
                    [
                        (resource, (dev.id,), dev.numa)
                        for dev in devices.devices(resource)
                        if dev.id in taken and dev.healthy and dev.numa
                    ]
                )
        used = usage.totals()
        memo = self._zones
        last = self._last
        zones = []
        for i, template in enumerate(basis.templates):
            node_used = used.get(template.numa, _NOTHING)
            previous = last[i]
            if previous is not None and previous[0] == node_used:  # this zone's use is unchanged
                zones.append(previous[1])
                continue
            key = (template.numa, tuple(node_used.items()))
            zone = memo.get(key)
            if zone is None:
                zone = template.zone(node_used)
                if len(memo) >= _ZONE_MEMO:
                    memo.clear()
                memo[key] = zone
            last[i] = (node_used, zone)
            zones.append(zone)
        if vendor_plugins(manager):
            zones = _with_vendor_rows(zones, vendor_amounts(manager))
        return make_nrt(
            self.node_name,
            zones,
            topology_manager_policy=manager.config.topology_policy,
            topology_manager_scope=manager.config.topology_scope,
            fingerprint=self._fingerprint(),
            fingerprint_method=METHOD_ALL,
        )

    def _fingerprint(self) -> str:
        """The fingerprint of the manager's pods (``compute_fingerprint`` of their namespace/name)."""
        pods = self.manager.pods
        known = self._known
        hashes = self._hashes
        for uid, pod in pods.items():
            seen = known.get(uid)
            if seen is None or seen[0] is not pod:
                if seen is not None:
                    del hashes[bisect_left(hashes, seen[1])]
                value = _pod_hash(pod.namespace, pod.name)
                known[uid] = (pod, value)
                insort(hashes, value)
        if len(known) > len(pods):  # every pod is known now: the extra uids are the ones that went
            for uid in known.keys() - pods.keys():
                del hashes[bisect_left(hashes, known.pop(uid)[1])]
        return sign_sorted(hashes)


_ZONE_MEMO = 4096  # zones remembered per publisher
_NOTHING: Mapping[str, int] = {}


@lru_cache(maxsize=262144)
def _pod_hash(namespace: str, name: str) -> int:
    return pod_hash(namespace, name)

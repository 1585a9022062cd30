"""From a :class:`~numaplane.policy.manager.ResourceManager` to the NRT accounting inputs.

:func:`allocation_state` converts the manager's allocations into the exporter's abstract
:class:`NodeAllocationState` (exclusive CPUs, pinned memory blocks, devices with their NUMA
nodes); :func:`node_nrt` computes the NodeResourceTopology object a node running that manager
publishes. The simulator, the agent's PodResources server and tests all use this one conversion, so
what the scheduler reads is exactly what the node manager holds.

Allocatable memory is reported per NUMA node only when the static memory policy runs (the kubelet's
``GetAllocatableResources`` lists memory only then), matching the upstream exporter's semantics.
"""

from __future__ import annotations

from collections.abc import Sequence

from numaplane.nrt.fingerprint import METHOD_ALL, compute_fingerprint
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.state import ContainerAllocation, DeviceAssignment, MemoryBlock, NodeAllocationState
from numaplane.nrt.zones import MachineView, ZoneConfig, make_nrt, zones_from_state
from numaplane.policy.manager import ResourceManager
from numaplane.topology.cpuset import CPUSet

__all__ = ["allocation_state", "node_nrt"]


def allocation_state(manager: ResourceManager) -> NodeAllocationState:
    """The manager's exclusive allocations as an abstract node allocation state."""
    cpu = manager.cpu
    allocatable_cpus = cpu.policy.allocatable if cpu.policy is not None else manager.topology.all_cpus
    memory: list[MemoryBlock] = []
    if manager.memory.policy is not None:
        for numa, resources in sorted(manager.memory.allocatable().items()):
            for resource, size in sorted(resources.items()):
                memory.append(MemoryBlock(resource, size, (numa,)))
    devices: list[DeviceAssignment] = []
    policy = manager.devices.policy
    for resource in sorted(policy.resources):
        for dev in policy.devices(resource):
            if dev.healthy:
                devices.append(DeviceAssignment(resource, (dev.id,), tuple(dev.numa or ())))
    containers: list[ContainerAllocation] = []
    for uid, admission in manager.admissions.items():
        pod = manager.pods[uid]
        for c in admission.containers:
            cpus = cpu.state.get(uid, c.name)
            blocks: list[MemoryBlock] = []
            devs: list[DeviceAssignment] = []
            for alloc in c.allocations:
                blocks.extend(MemoryBlock(b.resource, b.size_bytes, b.numa) for b in alloc.memory)
            held = policy.container_devices(uid, c.name)
            for resource, ids in sorted(held.items()):
                by_id = {d.id: d for d in policy.devices(resource)}
                for i in ids:
                    d = by_id.get(i)
                    devs.append(DeviceAssignment(resource, (i,), tuple(d.numa or ()) if d else ()))
            if cpus is None and not blocks and not devs:
                continue
            containers.append(
                ContainerAllocation(
                    namespace=pod.namespace,
                    pod=pod.name,
                    container=c.name,
                    exclusive_cpus=cpus if cpus is not None else CPUSet(),
                    memory=tuple(blocks),
                    devices=tuple(devs),
                )
            )
    return NodeAllocationState(
        allocatable_cpus=allocatable_cpus,
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
    zones = zones_from_state(node_name, view, allocation_state(manager), config)
    pods = [(p.namespace, p.name) for p in manager.pods.values()] + list(extra_pods)
    return make_nrt(
        node_name,
        zones,
        topology_manager_policy=manager.config.topology_policy,
        topology_manager_scope=manager.config.topology_scope,
        fingerprint=compute_fingerprint(pods),
        fingerprint_method=METHOD_ALL,
    )

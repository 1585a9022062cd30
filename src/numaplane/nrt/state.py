"""An abstract node allocation state: what a resource manager has allocated exclusively.

The resource manager converts its own state to :class:`NodeAllocationState`; from it the per-zone
computation (:func:`numaplane.nrt.zones.zones_from_state`) and the PodResources API
(:meth:`NodeAllocationState.to_podresources`, what the agent serves to upstream exporters) follow.

Invariants (the caller's, as the kubelet's): exclusive CPUs are allocatable and belong to one
container; device ids are unique per resource; memory blocks are bytes with the NUMA set they were
charged to (``memory`` or ``hugepages-<size>``). Only exclusive allocations are listed: a container
in the shared pool has an empty :attr:`ContainerAllocation.exclusive_cpus`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numaplane.nrt.podresources import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)
from numaplane.topology.cpuset import CPUSet

__all__ = ["ContainerAllocation", "DeviceAssignment", "MemoryBlock", "NodeAllocationState"]


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """``size_bytes`` of ``resource`` (``memory`` / ``hugepages-<size>``) on the NUMA set ``numa_nodes``."""

    resource: str
    size_bytes: int
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DeviceAssignment:
    """Device ids of one resource sharing one NUMA set (empty = no NUMA affinity)."""

    resource: str
    device_ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """One container's exclusive resources."""

    namespace: str
    pod: str
    container: str
    exclusive_cpus: CPUSet = field(default_factory=CPUSet)
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceAssignment, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeAllocationState:
    """Allocatable resources (reserved ones excluded) and the containers' exclusive allocations.

    ``allocatable_memory`` holds one block per NUMA node and resource (empty unless a NUMA-aware
    memory policy runs). ``containers`` are in admission order; containers of one pod need not be
    adjacent.
    """

    allocatable_cpus: CPUSet
    allocatable_memory: tuple[MemoryBlock, ...] = ()
    allocatable_devices: tuple[DeviceAssignment, ...] = ()
    containers: tuple[ContainerAllocation, ...] = ()

    def to_podresources(self) -> tuple[AllocatableResources, tuple[PodResources, ...]]:
        """The ``GetAllocatableResources`` and ``List`` responses the kubelet would give for this state.

        Pods appear in order of their first container; CPU ids ascending.
        """
        allocatable = AllocatableResources(
            tuple(_devices(d) for d in self.allocatable_devices),
            tuple(self.allocatable_cpus.sorted()),
            tuple(_memory(m) for m in self.allocatable_memory),
        )
        pods: dict[tuple[str, str], list[ContainerResources]] = {}
        for c in self.containers:
            pods.setdefault((c.namespace, c.pod), []).append(
                ContainerResources(
                    c.container,
                    tuple(_devices(d) for d in c.devices),
                    tuple(c.exclusive_cpus.sorted()),
                    tuple(_memory(m) for m in c.memory),
                )
            )
        listed = tuple(PodResources(name, ns, tuple(containers)) for (ns, name), containers in pods.items())
        return allocatable, listed


def _devices(d: DeviceAssignment) -> ContainerDevices:
    return ContainerDevices(d.resource, d.device_ids, d.numa_nodes)


def _memory(m: MemoryBlock) -> ContainerMemory:
    return ContainerMemory(m.resource, m.size_bytes, m.numa_nodes)

"""Protobuf ``v1`` PodResources messages ↔ the pure values of :mod:`numaplane.nrt.podresources`.

Lossless both ways for every field of the proto (order and duplicates of repeated fields kept;
``share_id`` presence kept). ``*_to_pb`` build new messages; ``*_from_pb`` never keep references to
the messages.
"""

from __future__ import annotations

from collections.abc import Iterable

from numaplane.grpcapi.podresources.v1 import api_pb2 as pb
from numaplane.nrt.podresources import (
    AllocatableResources,
    ClaimResource,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    DynamicResource,
    PodResources,
)

__all__ = [
    "allocatable_from_pb",
    "allocatable_to_pb",
    "list_from_pb",
    "list_to_pb",
    "pod_from_pb",
    "pod_to_pb",
]


def _topology(nodes: Iterable[int]) -> pb.TopologyInfo | None:
    ids = list(nodes)
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in ids]) if ids else None


def _numa(msg: pb.ContainerDevices | pb.ContainerMemory) -> tuple[int, ...]:
    return tuple(n.ID for n in msg.topology.nodes) if msg.HasField("topology") else ()


def _devices_to_pb(d: ContainerDevices) -> pb.ContainerDevices:
    return pb.ContainerDevices(resource_name=d.resource_name, device_ids=d.device_ids, topology=_topology(d.numa_nodes))


def _devices_from_pb(m: pb.ContainerDevices) -> ContainerDevices:
    return ContainerDevices(m.resource_name, tuple(m.device_ids), _numa(m))


def _memory_to_pb(b: ContainerMemory) -> pb.ContainerMemory:
    return pb.ContainerMemory(memory_type=b.memory_type, size=b.size_bytes, topology=_topology(b.numa_nodes))


def _memory_from_pb(m: pb.ContainerMemory) -> ContainerMemory:
    return ContainerMemory(m.memory_type, m.size, _numa(m))


def _dynamic_to_pb(d: DynamicResource) -> pb.DynamicResource:
    claims = []
    for c in d.claim_resources:
        claim = pb.ClaimResource(
            cdi_devices=[pb.CDIDevice(name=n) for n in c.cdi_devices],
            driver_name=c.driver_name,
            pool_name=c.pool_name,
            device_name=c.device_name,
        )
        if c.share_id is not None:
            claim.share_id = c.share_id
        claims.append(claim)
    return pb.DynamicResource(claim_name=d.claim_name, claim_namespace=d.claim_namespace, claim_resources=claims)


def _dynamic_from_pb(m: pb.DynamicResource) -> DynamicResource:
    claims = tuple(
        ClaimResource(
            tuple(x.name for x in c.cdi_devices),
            c.driver_name,
            c.pool_name,
            c.device_name,
            c.share_id if c.HasField("share_id") else None,
        )
        for c in m.claim_resources
    )
    return DynamicResource(m.claim_name, m.claim_namespace, claims)


def pod_to_pb(p: PodResources) -> pb.PodResources:
    containers = [
        pb.ContainerResources(
            name=c.name,
            devices=[_devices_to_pb(d) for d in c.devices],
            cpu_ids=c.cpu_ids,
            memory=[_memory_to_pb(b) for b in c.memory],
            dynamic_resources=[_dynamic_to_pb(d) for d in c.dynamic_resources],
        )
        for c in p.containers
    ]
    return pb.PodResources(
        name=p.name,
        namespace=p.namespace,
        containers=containers,
        cpu_ids=p.cpu_ids,
        memory=[_memory_to_pb(b) for b in p.memory],
    )


def pod_from_pb(m: pb.PodResources) -> PodResources:
    containers = tuple(
        ContainerResources(
            c.name,
            tuple(_devices_from_pb(d) for d in c.devices),
            tuple(c.cpu_ids),
            tuple(_memory_from_pb(b) for b in c.memory),
            tuple(_dynamic_from_pb(d) for d in c.dynamic_resources),
        )
        for c in m.containers
    )
    return PodResources(m.name, m.namespace, containers, tuple(m.cpu_ids), tuple(_memory_from_pb(b) for b in m.memory))


def list_to_pb(pods: Iterable[PodResources]) -> pb.ListPodResourcesResponse:
    return pb.ListPodResourcesResponse(pod_resources=[pod_to_pb(p) for p in pods])


def list_from_pb(m: pb.ListPodResourcesResponse) -> tuple[PodResources, ...]:
    return tuple(pod_from_pb(p) for p in m.pod_resources)


def allocatable_to_pb(a: AllocatableResources) -> pb.AllocatableResourcesResponse:
    return pb.AllocatableResourcesResponse(
        devices=[_devices_to_pb(d) for d in a.devices],
        cpu_ids=a.cpu_ids,
        memory=[_memory_to_pb(b) for b in a.memory],
    )


def allocatable_from_pb(m: pb.AllocatableResourcesResponse) -> AllocatableResources:
    return AllocatableResources(
        tuple(_devices_from_pb(d) for d in m.devices), tuple(m.cpu_ids), tuple(_memory_from_pb(b) for b in m.memory)
    )

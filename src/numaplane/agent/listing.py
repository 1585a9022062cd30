"""The agent's state as kubelet PodResources answers (``GetAllocatableResources`` and ``List``). No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from numaplane.agent.records import ContainerRecord
from numaplane.agent.wholepod import PodEntry
from numaplane.nrt.from_manager import allocation_state
from numaplane.nrt.podresources import (
    AllocatableResources,
    ClaimResource,
    ContainerResources,
    DynamicResource,
    PodResources,
)
from numaplane.policy.dra import ClaimDevice
from numaplane.policy.manager import ResourceManager

__all__ = ["pod_resources"]


def pod_resources(
    records: Mapping[str, ContainerRecord], entries: Mapping[str, PodEntry], manager: ResourceManager
) -> tuple[AllocatableResources, tuple[PodResources, ...]]:
    """The PodResources ``GetAllocatableResources`` and ``List`` answers for ``records`` (by container
    id), ``entries`` (pods admitted as a whole, by uid) and the manager that admitted them.

    A pod admitted as a whole is listed as the kubelet lists it: its app containers and sidecars,
    created yet or not, with what the manager gave them (not its regular init containers, whose
    CPUs later containers may reuse). Every other registered container is listed under its pod
    (shared-pool containers with no CPU ids, as the kubelet lists them); exclusive CPUs, pinned
    memory and devices come from the manager; DRA devices (``dynamic_resources``, one entry per
    ResourceClaim, as the kubelet lists them) from the DRA hint provider's allocation of the container.
    """
    allocatable, listed = allocation_state(manager, vendor_devices=True).to_podresources()
    by_container = {(p.namespace, p.name, c.name): c for p in listed for c in p.containers}
    for (ns, pod_name, name), dynamic in _dynamic_resources(manager).items():
        found = by_container.get((ns, pod_name, name)) or ContainerResources(name)
        by_container[(ns, pod_name, name)] = replace(found, dynamic_resources=dynamic)
    pods: dict[tuple[str, str], list[ContainerResources]] = {}
    for r in records.values():
        entry = entries.get(r.pod_uid)
        if entry is not None and entry.sandbox_id == r.sandbox_id:
            continue
        found = by_container.get((r.namespace, r.pod_name, r.name)) or ContainerResources(r.name)
        pods.setdefault((r.namespace, r.pod_name), []).append(found)
    for entry in entries.values():
        ns, name = entry.pod.namespace, entry.pod.name
        pods.setdefault((ns, name), []).extend(
            by_container.get((ns, name, c)) or ContainerResources(c) for c in entry.listed
        )
    return allocatable, tuple(PodResources(name, ns, tuple(cs)) for (ns, name), cs in pods.items())


def _dynamic_resources(manager: ResourceManager) -> dict[tuple[str, str, str], tuple[DynamicResource, ...]]:
    """The DRA devices the ``dra`` plugin recorded per admitted container, by claim (in claim order)."""
    out: dict[tuple[str, str, str], tuple[DynamicResource, ...]] = {}
    for uid, admission in manager.admissions.items():
        pod = manager.pods.get(uid)
        if pod is None:
            continue
        for container in admission.containers:
            by_claim: dict[tuple[str, str], list[ClaimResource]] = {}
            for allocation in container.allocations:
                if allocation.plugin != "dra":
                    continue
                for doc in allocation.extra.get("devices", ()):
                    device = ClaimDevice.from_dict(doc)
                    by_claim.setdefault((device.namespace, device.claim_name), []).append(
                        ClaimResource(device.cdi_devices, device.driver, device.pool, device.device)
                    )
            if by_claim:
                out[(pod.namespace, pod.name, container.name)] = tuple(
                    DynamicResource(claim, ns, tuple(resources)) for (ns, claim), resources in by_claim.items()
                )
    return out

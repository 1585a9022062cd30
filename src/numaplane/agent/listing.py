"""The agent's state as kubelet PodResources answers (``GetAllocatableResources`` and ``List``). No I/O."""

from __future__ import annotations

from collections.abc import Mapping

from numaplane.agent.records import ContainerRecord
from numaplane.agent.wholepod import PodEntry
from numaplane.nrt.from_manager import allocation_state
from numaplane.nrt.podresources import AllocatableResources, ContainerResources, PodResources
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
    memory and devices come from the manager.
    """
    allocatable, listed = allocation_state(manager, vendor_devices=True).to_podresources()
    by_container = {(p.namespace, p.name, c.name): c for p in listed for c in p.containers}
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

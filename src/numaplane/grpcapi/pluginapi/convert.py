"""Conversions between the plugin API's protobuf messages and the policy core's values (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from numaplane.grpcapi.pluginapi.v1 import api_pb2 as pb
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.plugin import DeviceInfo, Hints, Inventory, MemoryBlock, PluginAllocation
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "allocation_from_pb",
    "allocation_to_pb",
    "amounts_from_pb",
    "amounts_to_pb",
    "hint_from_pb",
    "hint_to_pb",
    "hints_from_pb",
    "hints_to_pb",
    "pod_from_json",
    "pod_to_json",
]


def pod_to_json(pod: Pod) -> str:
    """The pod's source document (``Pod.raw``) as JSON."""
    return json.dumps(dict(pod.raw), separators=(",", ":"))


def pod_from_json(text: str) -> Pod:
    return parse_pod(json.loads(text))


def hint_to_pb(hint: TopologyHint | None) -> pb.TopologyHint:
    if hint is None or hint.numa is None:
        return pb.TopologyHint(has_affinity=False, preferred=bool(hint and hint.preferred))
    return pb.TopologyHint(has_affinity=True, numa_nodes=list(hint.numa.ids()), preferred=hint.preferred)


def hint_from_pb(msg: pb.TopologyHint) -> TopologyHint:
    numa = NUMAMask.from_ids(int(n) for n in msg.numa_nodes) if msg.has_affinity else None
    return TopologyHint(numa, msg.preferred)


def hints_to_pb(hints: Hints | None) -> pb.HintsResponse:
    if hints is None:
        return pb.HintsResponse(no_preference=True)
    response = pb.HintsResponse()
    for resource, items in hints.items():
        response.hints[resource].hints.extend(hint_to_pb(h) for h in items)
    return response


def hints_from_pb(msg: pb.HintsResponse) -> Hints | None:
    if msg.no_preference:
        return None
    return {resource: [hint_from_pb(h) for h in items.hints] for resource, items in msg.hints.items()}


def allocation_to_pb(alloc: PluginAllocation) -> pb.Allocation:
    msg = pb.Allocation(has_cpus=alloc.cpus is not None)
    if alloc.cpus is not None:
        msg.cpus = alloc.cpus.format()
    for block in alloc.memory:
        msg.memory.append(
            pb.MemoryBlock(numa_nodes=list(block.numa), resource=block.resource, size_bytes=block.size_bytes)
        )
    for resource, ids in alloc.devices.items():
        msg.devices[resource].ids.extend(ids)
    if alloc.numa is not None:
        msg.numa.CopyFrom(pb.TopologyHint(has_affinity=True, numa_nodes=list(alloc.numa.ids())))
    if alloc.extra:
        msg.extra_json = json.dumps(dict(alloc.extra), sort_keys=True)
    return msg


def allocation_from_pb(plugin: str, msg: pb.Allocation) -> PluginAllocation:
    extra: dict[str, Any] = json.loads(msg.extra_json) if msg.extra_json else {}
    return PluginAllocation(
        plugin=plugin,
        cpus=CPUSet.parse(msg.cpus) if msg.has_cpus else None,
        memory=tuple(
            MemoryBlock(tuple(int(n) for n in b.numa_nodes), b.resource, int(b.size_bytes)) for b in msg.memory
        ),
        devices={k: tuple(v.ids) for k, v in msg.devices.items()},
        numa=NUMAMask.from_ids(int(n) for n in msg.numa.numa_nodes) if msg.numa.has_affinity else None,
        extra=extra,
    )


def amounts_to_pb(amounts: Mapping[int, Mapping[str, int]]) -> pb.NumaAmounts:
    msg = pb.NumaAmounts()
    for numa, resources in amounts.items():
        for name, value in resources.items():
            msg.numa[int(numa)].amounts[name] = int(value)
    return msg


def amounts_from_pb(msg: pb.NumaAmounts) -> dict[int, dict[str, int]]:
    return {int(numa): {k: int(v) for k, v in r.amounts.items()} for numa, r in sorted(msg.numa.items())}


def inventory_to_pb(inventory: Inventory) -> pb.Inventory:
    return pb.Inventory(
        has_cpus=inventory.cpus is not None,
        cpus="" if inventory.cpus is None else inventory.cpus.format(),
        devices=[pb.Device(resource=d.resource, id=d.id, numa_nodes=list(d.numa)) for d in inventory.devices],
        memory=amounts_to_pb(inventory.memory),
    )


def inventory_from_pb(msg: pb.Inventory) -> Inventory:
    return Inventory(
        cpus=CPUSet.parse(msg.cpus) if msg.has_cpus else None,
        devices=tuple(DeviceInfo(d.resource, d.id, tuple(int(n) for n in d.numa_nodes)) for d in msg.devices),
        memory=amounts_from_pb(msg.memory),
    )

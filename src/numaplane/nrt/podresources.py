"""The kubelet PodResources v1 messages as plain values (pure core; no protobuf import).

These mirror ``v1.PodResourcesLister`` messages field for field (see ``grpcapi/podresources/v1``), so
that the per-zone computation and the fingerprint can run on them without gRPC. The gRPC adapter
converts protobuf messages to and from these; :func:`list_from_dict` / :func:`allocatable_from_dict`
accept JSON in either spelling:

* snake_case field names (the conformance files, the proto field names), or
* proto3 JSON mapping (lowerCamelCase, ``int64`` as strings, default fields omitted), as
  ``json_format.MessageToJson`` writes it (the captures).

Invariants: CPU ids are non-negative ints; NUMA ids are ints (int64 on the wire: a device plugin may
report ``-1``, which consumers treat as "no NUMA affinity"); sizes are bytes; ``numa_nodes`` is empty when
the message has no topology (the device or block has no NUMA affinity). Order and duplicates of the
wire lists are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.nrt.errors import ZoneInputError

__all__ = [
    "AllocatableResources",
    "ClaimResource",
    "ContainerDevices",
    "ContainerMemory",
    "ContainerResources",
    "DynamicResource",
    "PodResources",
    "allocatable_from_dict",
    "list_from_dict",
    "pod_from_dict",
]


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """Devices of one resource; ``numa_nodes`` from ``topology.nodes[].ID``."""

    resource_name: str
    device_ids: tuple[str, ...] = ()
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerMemory:
    """A memory block: ``memory_type`` is ``memory`` or ``hugepages-<size>``; ``size_bytes`` in bytes."""

    memory_type: str
    size_bytes: int
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimResource:
    """One device of a DRA claim (``share_id`` is ``None`` when unset)."""

    cdi_devices: tuple[str, ...] = ()
    driver_name: str = ""
    pool_name: str = ""
    device_name: str = ""
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class DynamicResource:
    claim_name: str = ""
    claim_namespace: str = ""
    claim_resources: tuple[ClaimResource, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """One container's exclusively assigned resources (``cpu_ids`` are exclusive CPUs only on kubelets
    with kubernetes/kubernetes#102190; older ones list the shared pool too)."""

    name: str
    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()
    dynamic_resources: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True, slots=True)
class PodResources:
    """One pod. Pod-level ``cpu_ids``/``memory`` (kubelet main branch, 2026) overlap the containers'."""

    name: str
    namespace: str
    containers: tuple[ContainerResources, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatableResources:
    """``GetAllocatableResources``: reserved CPUs are absent; memory blocks only with the Static policy."""

    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()


# --- JSON (snake_case or proto3 JSON mapping) --------------------------------------------------------


def list_from_dict(doc: Any, where: str = "$") -> tuple[PodResources, ...]:
    """A ``ListPodResourcesResponse`` (``{"pod_resources": [...]}`` or ``{"podResources": [...]}``)."""
    obj = _obj(doc, where)
    return tuple(
        pod_from_dict(p, f"{where}.pod_resources[{i}]") for i, p in enumerate(_list(obj, "pod_resources", where))
    )


def pod_from_dict(doc: Any, where: str = "$") -> PodResources:
    obj = _obj(doc, where)
    return PodResources(
        name=_str(obj, "name", where),
        namespace=_str(obj, "namespace", where),
        containers=tuple(
            _container(c, f"{where}.containers[{i}]") for i, c in enumerate(_list(obj, "containers", where))
        ),
        cpu_ids=_ints(obj, "cpu_ids", where),
        memory=_memories(obj, where),
    )


def allocatable_from_dict(doc: Any, where: str = "$") -> AllocatableResources:
    """An ``AllocatableResourcesResponse``."""
    obj = _obj(doc, where)
    return AllocatableResources(_devices(obj, where), _ints(obj, "cpu_ids", where), _memories(obj, where))


def _container(doc: Any, where: str) -> ContainerResources:
    obj = _obj(doc, where)
    dynamic = tuple(
        _dynamic(d, f"{where}.dynamic_resources[{i}]") for i, d in enumerate(_list(obj, "dynamic_resources", where))
    )
    return ContainerResources(
        _str(obj, "name", where), _devices(obj, where), _ints(obj, "cpu_ids", where), _memories(obj, where), dynamic
    )


def _devices(obj: Mapping[str, Any], where: str) -> tuple[ContainerDevices, ...]:
    out = []
    for i, item in enumerate(_list(obj, "devices", where)):
        here = f"{where}.devices[{i}]"
        dev = _obj(item, here)
        ids = _list(dev, "device_ids", here)
        if not all(isinstance(x, str) for x in ids):
            raise ZoneInputError(f"{here}.device_ids", "expected a list of strings")
        out.append(ContainerDevices(_str(dev, "resource_name", here), tuple(ids), _topology(dev, here)))
    return tuple(out)


def _memories(obj: Mapping[str, Any], where: str) -> tuple[ContainerMemory, ...]:
    out = []
    for i, item in enumerate(_list(obj, "memory", where)):
        here = f"{where}.memory[{i}]"
        mem = _obj(item, here)
        out.append(ContainerMemory(_str(mem, "memory_type", here), _int(mem, "size", here), _topology(mem, here)))
    return tuple(out)


def _dynamic(doc: Any, where: str) -> DynamicResource:
    obj = _obj(doc, where)
    claims = []
    for i, item in enumerate(_list(obj, "claim_resources", where)):
        here = f"{where}.claim_resources[{i}]"
        claim = _obj(item, here)
        cdi = tuple(_str(_obj(c, here), "name", here) for c in _list(claim, "cdi_devices", here))
        share = _get(claim, "share_id")
        claims.append(
            ClaimResource(
                cdi,
                _str(claim, "driver_name", here),
                _str(claim, "pool_name", here),
                _str(claim, "device_name", here),
                None if share is None else str(share),
            )
        )
    return DynamicResource(_str(obj, "claim_name", where), _str(obj, "claim_namespace", where), tuple(claims))


def _topology(obj: Mapping[str, Any], where: str) -> tuple[int, ...]:
    topo = _get(obj, "topology")
    if topo is None:
        return ()
    nodes = _list(_obj(topo, f"{where}.topology"), "nodes", f"{where}.topology")
    out = []
    for i, node in enumerate(nodes):
        here = f"{where}.topology.nodes[{i}]"
        # proto field "ID": JSON name is "ID" in both mappings; accept "id" from hand-written files.
        key = "ID" if isinstance(node, Mapping) and "ID" in node else "id"
        value = _obj(node, here).get(key)
        out.append(0 if value is None else _to_int(value, f"{here}.{key}", signed=True))
    return tuple(out)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _get(obj: Mapping[str, Any], key: str) -> Any:
    if key in obj:
        return obj[key]
    return obj.get(_camel(key))


def _obj(doc: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ZoneInputError(where, f"expected an object, got {type(doc).__name__}")
    return doc


def _list(obj: Mapping[str, Any], key: str, where: str) -> Sequence[Any]:
    value = _get(obj, key)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ZoneInputError(f"{where}.{key}", "expected a list")
    return value


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = _get(obj, key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ZoneInputError(f"{where}.{key}", f"expected a string, got {value!r}")
    return value


def _to_int(value: Any, where: str, *, signed: bool = False) -> int:
    if isinstance(value, bool):
        raise ZoneInputError(where, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and value.lstrip("-").isdigit():
        result = int(value)  # proto3 JSON writes int64 / uint64 as strings
    else:
        raise ZoneInputError(where, f"expected an integer, got {value!r}")
    if result < 0 and not signed:
        raise ZoneInputError(where, f"expected a non-negative integer, got {result}")
    return result


def _int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = _get(obj, key)
    return 0 if value is None else _to_int(value, f"{where}.{key}")


def _ints(obj: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    return tuple(_to_int(v, f"{where}.{key}[{i}]") for i, v in enumerate(_list(obj, key, where)))

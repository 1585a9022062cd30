"""The resource plugin protocol: how the resource manager talks to CPU, memory, device and vendor policies.

A plugin owns the allocation state of the resources it manages. The manager drives it through a
fixed sequence per admission (the kubelet's topology manager sequence):

1. ``hints(pod, container)`` (container scope) or ``pod_hints(pod)`` (pod scope) for every plugin;
2. the topology manager merges the hints into one :class:`TopologyHint` and decides admission;
3. ``allocate(pod, container, hint)`` on every plugin, in registration order;
4. later ``release(pod_uid, container_name)`` when the container goes away.

Contract:

* ``hints`` returns ``None`` for "no preference", ``{resource: []}`` for "cannot be satisfied",
  otherwise ``{resource: [hints...]}``. It must not change state.
* ``allocate`` is all-or-nothing: it either records the allocation and returns it, or raises an
  :class:`~numaplane.policy.errors.AdmissionError` subclass and leaves state unchanged.
* ``snapshot()`` returns a JSON-ready dict; ``restore(snapshot())`` reproduces the state exactly.
* ``check_config(config)`` lists the problems a reconfiguration would cause against the *current*
  allocations (e.g. a newly reserved CPU already held exclusively) without changing anything;
  ``reconfigure(config)`` is only called when every plugin reported no problem, and must leave
  existing allocations untouched.

Scope: the built-in plugins see every container; a vendor plugin is only asked (hints, allocate,
release) about containers that request or limit one of its ``resources``, as the kubelet's Device
Manager only acts on containers requesting devices. So a slow or hung out-of-process plugin, whose
calls the gRPC adapter bounds with a deadline, delays only the pods that need it.

Optional: ``inventory()`` returns an :class:`Inventory`, what the plugin can hand out *by identity*
(CPU ids, device ids with their NUMA nodes, memory it pins per NUMA node) — the PodResources
``GetAllocatableResources`` answer is built from it. A plugin without it reports nothing there
(:func:`inventory_of`).

Built-in plugins implement this in process (``policy/builtin.py``); an out-of-process vendor plugin
is reached through the same protocol by a gRPC adapter (``grpcapi``), so the manager cannot tell them
apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.resources.pod import Container, Pod
from numaplane.topology.cpuset import CPUSet

__all__ = ["DeviceInfo", "Hints", "Inventory", "MemoryBlock", "PluginAllocation", "ResourcePlugin", "inventory_of"]

Hints = Mapping[str, list[TopologyHint]]


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """Memory of one type pinned to a set of NUMA nodes. ``size_bytes`` is exact."""

    numa: tuple[int, ...]
    resource: str
    size_bytes: int


@dataclass(frozen=True)
class PluginAllocation:
    """What one plugin gave one container.

    ``cpus`` is an exclusive CPU set (``None``: the container runs in the shared pool); ``memory``
    lists pinned memory blocks; ``devices`` maps a device resource to the device ids given;
    ``numa`` is the NUMA affinity that the allocation honours (``None``: none); ``extra`` carries
    vendor-specific, JSON-ready data (e.g. environment or annotations to inject).
    """

    plugin: str
    cpus: CPUSet | None = None
    memory: tuple[MemoryBlock, ...] = ()
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    numa: NUMAMask | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"plugin": self.plugin}
        if self.cpus is not None:
            doc["cpus"] = self.cpus.format()
        if self.memory:
            doc["memory"] = [{"numa": list(b.numa), "type": b.resource, "size": b.size_bytes} for b in self.memory]
        if self.devices:
            doc["devices"] = {k: list(v) for k, v in sorted(self.devices.items())}
        if self.numa is not None:
            doc["numa"] = self.numa.to_list()
        if self.extra:
            doc["extra"] = dict(self.extra)
        return doc

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> PluginAllocation:
        cpus = doc.get("cpus")
        numa = doc.get("numa")
        return PluginAllocation(
            plugin=str(doc["plugin"]),
            cpus=None if cpus is None else CPUSet.parse(str(cpus)),
            memory=tuple(
                MemoryBlock(numa=tuple(b["numa"]), resource=str(b["type"]), size_bytes=int(b["size"]))
                for b in doc.get("memory", [])
            ),
            devices={str(k): tuple(v) for k, v in doc.get("devices", {}).items()},
            numa=None if numa is None else NUMAMask.from_ids(numa),
            extra=dict(doc.get("extra", {})),
        )


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One device a plugin can allocate: its resource, id and NUMA nodes (empty: no topology)."""

    resource: str
    id: str
    numa: tuple[int, ...] = ()


@dataclass(frozen=True)
class Inventory:
    """What a plugin can hand out by identity (see the module docstring).

    ``cpus``: the CPUs it may give exclusively (``None``: it manages no CPUs); ``devices``: its
    healthy devices; ``memory``: per NUMA node, memory type → bytes it pins (empty: it pins none)."""

    cpus: CPUSet | None = None
    devices: tuple[DeviceInfo, ...] = ()
    memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)


def inventory_of(plugin: object) -> Inventory:
    """``plugin.inventory()``, or an empty :class:`Inventory` for a plugin without the optional method."""
    method = getattr(plugin, "inventory", None)
    if method is None:
        return Inventory()
    result = method()
    if not isinstance(result, Inventory):
        raise TypeError(f"inventory() of plugin {getattr(plugin, 'name', '?')!r} returned {type(result).__name__}")
    return result


@runtime_checkable
class ResourcePlugin(Protocol):
    """A resource policy behind the resource manager (see module docstring for the contract)."""

    @property
    def name(self) -> str:
        """Unique plugin name, e.g. ``cpu``, ``memory``, ``devices``, ``vendor.example/fpga``."""
        ...

    @property
    def resources(self) -> frozenset[str]:
        """Resource names this plugin manages (e.g. ``{"cpu"}``)."""
        ...

    def hints(self, pod: Pod, container: Container) -> Hints | None: ...

    def pod_hints(self, pod: Pod) -> Hints | None: ...

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation: ...

    def release(self, pod_uid: str, container_name: str) -> None: ...

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        """Current allocations keyed by ``(pod uid, container name)``."""
        ...

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        """Per NUMA node: resource → allocatable amount (CPUs as counts, memory in bytes, devices as counts)."""
        ...

    def available(self) -> Mapping[int, Mapping[str, int]]:
        """Per NUMA node: resource → amount still free for exclusive allocation."""
        ...

    def check_config(self, config: NodeResourceConfig) -> list[str]: ...

    def reconfigure(self, config: NodeResourceConfig) -> None: ...

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, snapshot: Mapping[str, Any]) -> None: ...

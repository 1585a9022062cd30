"""Device Manager: topology hints and NUMA-aligned allocation of device-plugin resources.

Follows the kubelet device manager (v1.35): hints per device resource in a container's limits
(pod scope: the pod's aggregated limits), regeneration from already allocated devices, reuse of
regular init containers' devices by later containers of the same pod, and allocation split into
devices aligned with the merged hint, unaligned ones and ones without NUMA affinity.

Determinism: where the kubelet takes devices from a Go set (random order), numaplane takes the
lowest ids first (natural order: ``gpu2`` before ``gpu10``). A plugin's ``GetPreferredAllocation``
can be modelled with ``preferred=`` per resource.

A device's ``numa`` is ``None`` when the plugin reports no topology and ``()`` when it reports an
empty node list; both mean "no NUMA affinity", but only ``None`` lets an init container's device be
reused under any mask (as upstream). Devices are freed per pod (:meth:`DevicePolicy.remove_pod`,
like the kubelet); :meth:`DevicePolicy.remove_container` also exists for the resource manager.
Allocation is all-or-nothing: on error nothing changes.

Why one module over 400 lines: :class:`DevicePolicy` follows the kubelet's device manager function by
function — ``pkg/kubelet/cm/devicemanager/topology_hints.go`` (``GetTopologyHints``,
``GetPodTopologyHints``, ``generateDeviceTopologyHints``) and the allocation half of ``manager.go``
(``devicesToAllocate``, ``filterByAffinity``, the init-container reuse) — and all of it reads and writes
one allocation table, so a reviewer can check each step against upstream and the all-or-nothing rule
in one place.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.policy.config import DeviceSpec
from numaplane.policy.hints import MaskTable, NUMAMask, TopologyHint, mask_table
from numaplane.policy.topology_manager import PlainAllocationError
from numaplane.resources.pod import Container, Pod

__all__ = ["Device", "DeviceError", "DevicePolicy", "PreferredAllocation", "device_sort_key"]

PreferredAllocation = Callable[[Sequence[str], Sequence[str], int], Sequence[str]]
"""A device plugin's ``GetPreferredAllocation(available ids, must-include ids, size) -> ids``."""
_DIGITS = re.compile(r"(\d+)")


class DeviceError(PlainAllocationError):
    """A device manager allocation error (kubelet message text)."""


def device_sort_key(device_id: str) -> tuple[tuple[Any, ...], str]:
    """Natural order of device ids (digit runs compared as numbers); never raises for a string.

    A digit run is compared by (number of significant digits, the digits) — the order of ``int()``
    without converting, so a run of any length costs its length (``int()`` refuses runs over 4,300
    digits). A non-string is a caller's bug (the parsers refuse it): ``TypeError``.
    """
    text = device_id
    parts = _DIGITS.split(text)
    key: list[Any] = []
    for i, part in enumerate(parts):
        if i % 2:
            digits = part.lstrip("0") or "0"
            key.append((len(digits), digits))
        else:
            key.append(part)
    return tuple(key), text


def _sorted(ids: Iterable[str]) -> list[str]:
    return sorted(ids, key=device_sort_key)


@dataclass(frozen=True, slots=True)
class Device:
    """One device as its plugin reports it (``numa``: see module docstring)."""

    id: str
    numa: tuple[int, ...] | None = None
    healthy: bool = True

    @property
    def numa_bits(self) -> int:
        return NUMAMask.from_ids(self.numa or ()).bits

    @staticmethod
    def of(spec: Device | DeviceSpec | tuple[str, Sequence[int] | None]) -> Device:
        if isinstance(spec, Device):
            return spec
        if isinstance(spec, DeviceSpec):
            return Device(spec.id, spec.numa, spec.healthy)
        device_id, numa = spec
        return Device(device_id, None if numa is None else tuple(numa))


class DevicePolicy:
    """Device inventory, per pod/container allocations and the kubelet's reuse bookkeeping.

    Invariants: ``allocated(r)`` is the union of every container's devices of ``r``; a device is
    given to at most one pod at a time (init-container reuse stays within the pod).
    """

    name = "devices"

    def __init__(
        self,
        inventory: Mapping[str, Sequence[Device | DeviceSpec | tuple[str, Sequence[int] | None]]],
        numa_nodes: Sequence[int],
        preferred: Mapping[str, PreferredAllocation] | None = None,
    ) -> None:
        self.numa_nodes = tuple(sorted(set(numa_nodes)))
        self.preferred = dict(preferred or {})
        self._devices: dict[str, dict[str, Device]] = {}
        for resource, devices in inventory.items():
            self.update_devices(resource, devices)
        self._pods: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {}
        self._allocated: dict[str, set[str]] = {}
        self._reuse: dict[str, dict[str, set[str]]] = {}

    # -- inventory ----------------------------------------------------------------------------------
    def update_devices(self, resource: str, devices: Iterable[Device | DeviceSpec | tuple[str, Any]]) -> None:
        """A plugin's ``ListAndWatch`` update: replace the resource's device list (registers it)."""
        self._devices[resource] = {d.id: d for d in map(Device.of, devices)}

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(self._devices)

    def devices(self, resource: str) -> tuple[Device, ...]:
        return tuple(self._devices.get(resource, {}).values())

    def healthy(self, resource: str) -> frozenset[str]:
        return frozenset(d.id for d in self._devices.get(resource, {}).values() if d.healthy)

    def allocated(self, resource: str) -> frozenset[str]:
        return frozenset(self._allocated.get(resource, ()))

    def available(self, resource: str) -> frozenset[str]:
        return self.healthy(resource) - self.allocated(resource)

    def holds(self, pod_uid: str) -> bool:
        """Whether any container of the pod holds devices (its ``podDevices`` entry is non-empty)."""
        return bool(self._pods.get(pod_uid))

    def container_devices(self, pod_uid: str, container_name: str) -> dict[str, tuple[str, ...]]:
        return dict(self._pods.get(pod_uid, {}).get(container_name, {}))

    def is_device_resource(self, resource: str) -> bool:
        """Registered by a plugin, or still held by some pod (kubelet ``isDevicePluginResource``)."""
        return resource in self._devices or bool(self._allocated.get(resource))

    def has_topology(self, resource: str) -> bool:
        """Whether any device of the resource reports at least one NUMA node."""
        return any(d.numa for d in self._devices.get(resource, {}).values())

    # -- requests -----------------------------------------------------------------------------------
    def container_requests(self, container: Container) -> dict[str, int]:
        """Device counts from the container's limits (requests equal limits for devices)."""
        return {r: q.value() for r, q in container.limits.items() if self.is_device_resource(r)}

    def pod_requests(self, pod: Pod) -> dict[str, int]:
        """Pod-level counts (component-helpers ``PodLimits`` for device resources): the larger of
        app containers + sidecars and, per init container, its count + the sidecars started before it."""
        total: dict[str, int] = {}
        for c in pod.containers:
            _add(total, self.container_requests(c))
        sidecars: dict[str, int] = {}
        init_max: dict[str, int] = {}
        for c in pod.init_containers:
            reqs = self.container_requests(c)
            if c.sidecar:
                _add(total, reqs)
                _add(sidecars, reqs)
                step = dict(sidecars)
            else:
                step = dict(reqs)
                _add(step, sidecars)
            _max(init_max, step)
        _max(total, init_max)
        return total

    # -- hints --------------------------------------------------------------------------------------
    def hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint] | None]:
        """Kubelet ``GetTopologyHints``: per device resource, ``None`` when it has no topology."""
        out: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in self.container_requests(container).items():
            if not self.has_topology(resource):
                out[resource] = None
                continue
            held = self._pods.get(pod.uid, {}).get(container.name, {}).get(resource, ())
            if held:
                out[resource] = [] if len(held) != requested else self._generate(resource, set(held), set(), requested)
                continue
            available = self.available(resource)
            reusable = self._reuse.get(pod.uid, {}).get(resource, set())
            if len(available | reusable) < requested:
                out[resource] = []
                continue
            out[resource] = self._generate(resource, available, reusable, requested)
        return out

    def pod_hints(self, pod: Pod) -> dict[str, list[TopologyHint] | None]:
        """Kubelet ``GetPodTopologyHints`` (no init-container reuse at pod level)."""
        out: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in self.pod_requests(pod).items():
            if not self.has_topology(resource):
                out[resource] = None
                continue
            held = {d for devs in self._pods.get(pod.uid, {}).values() for d in devs.get(resource, ())}
            if held:
                out[resource] = [] if len(held) != requested else self._generate(resource, held, set(), requested)
                continue
            available = self.available(resource)
            if len(available) < requested:
                out[resource] = []
                continue
            out[resource] = self._generate(resource, available, set(), requested)
        return out

    def _generate(
        self, resource: str, available: Iterable[str], reusable: Iterable[str], request: int
    ) -> list[TopologyHint]:
        """Kubelet ``generateDeviceTopologyHints`` over dense mask tables: a mask is a hint when the
        reusable devices with topology all touch it and, with the available devices touching it,
        cover ``request``; Preferred iff no smaller mask touches ``request`` devices (healthy or not)."""
        devices = self._devices.get(resource, {})
        table = mask_table(self.numa_nodes)
        every = self._touching(table, Counter(d.numa_bits for d in devices.values()))
        free = self._touching(table, Counter(devices[d].numa_bits for d in available if d in devices))
        # reusable devices without topology neither restrict nor count towards a mask (as upstream)
        reused = [devices.get(d, Device(d)) for d in reusable]
        reused_dense = [
            table.dense(i for i in d.numa if i in table.position) or 0 for d in reused if d.numa is not None
        ]
        counts = table.counts
        min_size = next((counts[d] for d in table.order if every[d] >= request), len(self.numa_nodes))
        need = request - len(reused_dense)
        if reused_dense:
            accepted = [d for d in table.order if free[d] >= need and all(d & r for r in reused_dense)]
        else:
            accepted = [d for d in table.order if free[d] >= need]
        return [table.hints[d][counts[d] == min_size] for d in accepted]

    @staticmethod
    def _touching(table: MaskTable, by_numa: Counter[int]) -> list[int]:
        """Per dense mask: how many of the counted devices have a NUMA node inside it."""
        per_node = [0] * len(table.nodes)
        spread: list[tuple[int, int]] = []
        for bits, n in by_numa.items():
            dense = table.dense(i for i in NUMAMask(bits).ids() if i in table.position) or 0
            if dense.bit_count() == 1:
                per_node[dense.bit_length() - 1] += n
            elif dense:
                spread.append((dense, n))
        sums = MaskTable.subset_sums(per_node)
        for dense, n in spread:
            sums = [x + n if d & dense else x for d, x in enumerate(sums)]
        return sums

    # -- allocation ---------------------------------------------------------------------------------
    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> dict[str, tuple[str, ...]]:
        """Kubelet ``Allocate`` for one container with the merged ``hint``; returns the container's
        devices per resource (previously held ones included)."""
        for uid in [u for u in self._reuse if u != pod.uid]:
            del self._reuse[uid]
        reuse = self._reuse.setdefault(pod.uid, {})
        held = self._pods.get(pod.uid, {}).get(container.name, {})
        new: dict[str, list[str]] = {}
        for resource, required in self.container_requests(container).items():
            chosen = self._devices_to_allocate(
                pod.uid, container.name, resource, required, reuse.get(resource, set()), hint
            )
            if chosen:
                new[resource] = chosen
        if new:
            record = dict(held)
            for resource, chosen in new.items():
                record[resource] = tuple(_sorted(set(record.get(resource, ())) | set(chosen)))
                self._allocated.setdefault(resource, set()).update(chosen)
            self._pods.setdefault(pod.uid, {})[container.name] = record
        mine = self._pods.get(pod.uid, {}).get(container.name, {})
        init = next((c for c in pod.init_containers if c.name == container.name), None)
        for resource, ids in mine.items():
            if init is not None and not init.sidecar:
                reuse.setdefault(resource, set()).update(ids)
            elif resource in reuse:
                reuse[resource].difference_update(ids)
        return dict(mine)

    def _devices_to_allocate(
        self, pod_uid: str, name: str, resource: str, required: int, reusable: set[str], hint: TopologyHint
    ) -> list[str]:
        needed = required
        held = self._pods.get(pod_uid, {}).get(name, {}).get(resource)
        if held is not None:
            needed -= len(held)
            if needed != 0:
                raise DeviceError(
                    f'pod "{pod_uid}" container "{name}" changed request for resource "{resource}" '
                    f"from {len(held)} to {required}"
                )
        if resource not in self._devices:
            raise DeviceError(f"cannot allocate unregistered device {resource}")
        healthy = self.healthy(resource)
        if not healthy:
            raise DeviceError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        if held is not None and not set(held) <= healthy:
            raise DeviceError(
                f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}"
            )
        if needed == 0:
            return []
        taken: list[str] = []

        def take(ids: Iterable[str]) -> bool:
            nonlocal needed
            for d in _sorted(set(ids) - set(taken)):
                taken.append(d)
                needed -= 1
                if needed == 0:
                    return True
            return False

        if take(reusable):
            return taken
        available = healthy - self._allocated.get(resource, set()) - set(taken)
        if len(available) < needed:
            raise DeviceError(
                f"requested number of devices unavailable for {resource}. Requested: {needed}, Available: {len(available)}"
            )
        aligned, unaligned, loose = self._split_by_affinity(resource, available, hint)
        if needed < len(aligned):
            if take(set(self._preferred(resource, aligned | set(taken), taken, required)) & aligned) or take(aligned):
                return taken
        elif (
            take(aligned)
            or take(set(self._preferred(resource, available | set(taken), taken, required)) & available)
            or take(unaligned)
            or take(loose)
        ):
            return taken
        raise DeviceError(
            f"unexpectedly allocated less resources than required. Requested: {required}, Got: {required - needed}"
        )

    def _preferred(self, resource: str, available: Iterable[str], must: Sequence[str], size: int) -> Sequence[str]:
        plugin = self.preferred.get(resource)
        return () if plugin is None else plugin(_sorted(available), _sorted(must), size)

    def _split_by_affinity(
        self, resource: str, available: frozenset[str], hint: TopologyHint
    ) -> tuple[set[str], set[str], set[str]]:
        """(aligned with the hint, on other NUMA nodes, without NUMA affinity)."""
        if not self.has_topology(resource) or hint.numa is None:
            return set(), set(), set(available)
        devices = self._devices[resource]
        aligned: set[str] = set()
        unaligned: set[str] = set()
        loose: set[str] = set()
        for d in available:
            bits = devices[d].numa_bits if d in devices else 0
            (loose if not bits else aligned if bits & hint.numa.bits else unaligned).add(d)
        return aligned, unaligned, loose

    # -- release and snapshots ----------------------------------------------------------------------
    def remove_pod(self, pod_uid: str) -> None:
        """Free every device of the pod (the kubelet does this once the pod is no longer active)."""
        if self._pods.pop(pod_uid, None) is not None:
            self._recount()
        self._reuse.pop(pod_uid, None)

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        """Forget one container's devices; devices another container of the pod holds stay allocated."""
        containers = self._pods.get(pod_uid)
        if containers is not None and containers.pop(container_name, None) is not None:
            if not containers:
                del self._pods[pod_uid]
            self._recount()

    def _recount(self) -> None:
        self._allocated = {}
        for containers in self._pods.values():
            for devs in containers.values():
                for resource, ids in devs.items():
                    self._allocated.setdefault(resource, set()).update(ids)

    def to_dict(self) -> dict[str, Any]:
        """Exact, JSON-ready snapshot (inventory, allocations, reuse table)."""
        return {
            "devices": {
                r: [
                    {"id": d.id, "numa": None if d.numa is None else list(d.numa), "healthy": d.healthy}
                    for d in devs.values()
                ]
                for r, devs in self._devices.items()
            },
            "podDevices": {
                uid: {name: {r: list(ids) for r, ids in devs.items()} for name, devs in cs.items()}
                for uid, cs in self._pods.items()
            },
            "reuse": {uid: {r: _sorted(ids) for r, ids in per.items()} for uid, per in self._reuse.items()},
        }

    @classmethod
    def from_dict(
        cls,
        doc: Mapping[str, Any],
        numa_nodes: Sequence[int],
        preferred: Mapping[str, PreferredAllocation] | None = None,
    ) -> DevicePolicy:
        """A policy holding the snapshot ``doc`` (see :meth:`to_dict`)."""
        policy = cls({}, numa_nodes, preferred)
        policy.restore(doc)
        return policy

    def restore(self, doc: Mapping[str, Any]) -> None:
        self._devices = {}
        for resource, devs in (doc.get("devices") or {}).items():
            self.update_devices(
                resource,
                [
                    Device(d["id"], None if d.get("numa") is None else tuple(d["numa"]), bool(d.get("healthy", True)))
                    for d in devs
                ],
            )
        self._pods = {
            uid: {name: {r: tuple(ids) for r, ids in devs.items()} for name, devs in cs.items()}
            for uid, cs in (doc.get("podDevices") or {}).items()
        }
        self._reuse = {uid: {r: set(ids) for r, ids in per.items()} for uid, per in (doc.get("reuse") or {}).items()}
        self._recount()


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for r, q in other.items():
        into[r] = into.get(r, 0) + q


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for r, q in other.items():
        if r not in into or q > into[r]:
            into[r] = q

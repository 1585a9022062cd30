"""The node's DRA devices per NUMA zone for the NRT (``--dra``; needs the API server).

Three mirrors: the node's ResourceSlices (``spec.nodeName=<node>``), every DeviceClass, and every
ResourceClaim (the exporter cannot select a node's claims on the server). A change of any of them
asks for a scan (trigger ``dra``). :meth:`DRAInventory.groups` gives the zone rows as PodResources
device groups (:mod:`numaplane.policy.dra_select`, row ``deviceclass.resource.kubernetes.io/<class>``):
the devices each class selects (allocatable) and those named in allocated claims (used).

A slice or DeviceClass that cannot be read is left out with one warning naming it (its devices, or
its row, are then absent: the exporter never publishes what it could not check); the rest is published.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from numaplane.exporter.mirror import Mirror
from numaplane.kube.errors import KubeError
from numaplane.kube.port import EventType, JsonObj, KubePort
from numaplane.kube.resources import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.nrt.podresources import ContainerDevices
from numaplane.policy.dra import DRAError
from numaplane.policy.dra_select import (
    DeviceClass,
    SliceDevice,
    allocated_devices,
    class_inventory,
    node_slice_devices,
    parse_device_class,
)

__all__ = ["DRAInventory"]


def _groups(groups: list[tuple[str, tuple[str, ...], tuple[int, ...]]]) -> tuple[ContainerDevices, ...]:
    return tuple(ContainerDevices(row, ids, numa) for row, ids, numa in groups)


def _allocation(obj: JsonObj | None) -> Any:
    status = (obj or {}).get("status") or {}
    return status.get("allocation") if isinstance(status, dict) else None


class DRAInventory:
    """The node's DRA rows from three mirrors (module docstring); ``changed`` is called on any event."""

    def __init__(
        self,
        kube: KubePort,
        node_name: str,
        *,
        numa_attributes: Sequence[str] = (),
        changed: Callable[[], None] = lambda: None,
        on_error: Callable[[KubeError], None] | None = None,
    ) -> None:
        self.numa_attributes = tuple(numa_attributes)
        self._changed = changed
        self._log = structlog.get_logger("numaplane.exporter").bind(node=node_name)
        self._warned: set[str] = set()

        def handler(kind: EventType, old: JsonObj | None, new: JsonObj | None) -> None:
            self._changed()

        self.slices = Mirror(
            kube, RESOURCE_SLICE, field_selector=f"spec.nodeName={node_name}", handler=handler, on_error=on_error
        )
        self.classes = Mirror(kube, DEVICE_CLASS, handler=handler, on_error=on_error)

        def claim_handler(kind: EventType, old: JsonObj | None, new: JsonObj | None) -> None:
            if _allocation(old) != _allocation(new):
                self._changed()

        self.claims = Mirror(kube, RESOURCE_CLAIM, handler=claim_handler, on_error=on_error)
        self._parsed: dict[tuple[str, str, str], Any] = {}

    @property
    def mirrors(self) -> tuple[Mirror, ...]:
        return (self.slices, self.classes, self.claims)

    def _warn_once(self, what: str, error: DRAError) -> None:
        if what not in self._warned:
            self._warned.add(what)
            self._log.warning("dra_object_skipped", object=what, error=str(error))

    def _memo(self, kind: str, key: str, obj: JsonObj, parse: Callable[[JsonObj], Any]) -> Any:
        """``parse(obj)`` once per object version (CEL compiles once); ``None`` when it cannot be read."""
        memo = (kind, key, str((obj.get("metadata") or {}).get("resourceVersion", "")))
        if memo not in self._parsed:
            try:
                self._parsed[memo] = parse(obj)
            except DRAError as error:
                self._parsed[memo] = None
                self._warn_once(f"{kind} {key}", error)
        return self._parsed[memo]

    def devices(self) -> list[SliceDevice]:
        """Every readable slice's devices. (Pools spread over several slices of different
        generations are read slice by slice.)"""
        out: list[SliceDevice] = []
        for key, obj in sorted(self.slices.objects.items()):
            parsed = self._memo("ResourceSlice", key, obj, lambda o: node_slice_devices([o], self.numa_attributes))
            out.extend(parsed or ())
        return out

    def device_classes(self) -> list[DeviceClass]:
        out = [self._memo("DeviceClass", k, o, parse_device_class) for k, o in sorted(self.classes.objects.items())]
        live = {(kind, key) for kind, key, _ in self._parsed}
        if len(self._parsed) > 4 * max(len(live), 64):  # forget superseded versions
            self._parsed.clear()
        return [c for c in out if c is not None]

    def groups(self) -> tuple[tuple[ContainerDevices, ...], tuple[ContainerDevices, ...]]:
        """``(allocatable, used)`` device groups of the DRA rows."""
        claims: list[dict[str, Any]] = list(self.claims.objects.values())
        total, used = class_inventory(self.devices(), self.device_classes(), allocated_devices(claims))
        return _groups(total), _groups(used)

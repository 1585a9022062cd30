"""Which DRA devices a DeviceClass and a claim request select, per NUMA zone, and a claim allocation.

Shared by the exporter (per-zone DRA rows in the NRT), the NUMA filter (a pod's claims as zone
demands) and the standalone scheduler (it allocates the supported subset of claims itself).

**Row naming.** A zone's DRA row is named after the DeviceClass, with Kubernetes' implicit
extended-resource name for a class (KEP-5004): ``deviceclass.resource.kubernetes.io/<class>``
(:func:`class_resource`). Its capacity/allocatable is the number of devices of the node's
ResourceSlices on that NUMA node that the class's selectors accept; available subtracts the devices
named in allocated ResourceClaims. A device matching several classes counts in each class's row.
Devices without a NUMA node (:func:`~numaplane.policy.dra.device_numa`) are in no zone.

**Selectors** are CEL, evaluated for real with ``cel-python`` (:class:`Selector`). The ``device``
variable is what the Kubernetes allocator gives: ``device.driver``; ``device.attributes[domain][name]``
(an unqualified attribute belongs to the slice's driver; ``int``/``bool``/``string`` values; a
``version`` is its string); ``device.capacity[domain][name]`` as an integer (quantity methods such as
``compareTo`` are not available). A selector whose evaluation fails on a device (for example a missing
attribute) does not select that device (Kubernetes' allocator fails the whole allocation instead).

**Supported claims** (:func:`claim_requests`): every request is ``exactly`` with a
``deviceClassName``, ``allocationMode: ExactCount`` (default) with a ``count`` (default 1), and CEL
``selectors``; no ``firstAvailable``, ``allocationMode: All``, ``adminAccess``, ``capacity``
requests, ``tolerations`` or claim ``constraints``. Anything else raises :class:`UnsupportedClaim`
naming the field, and the scheduler leaves the pod pending with that message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.policy.dra import DRAError, PciNuma, device_numa, slice_devices
from numaplane.resources.quantity import parse_quantity

__all__ = [
    "DEVICE_CLASS_RESOURCE_PREFIX",
    "ClaimRequest",
    "DeviceClass",
    "Selector",
    "SliceDevice",
    "UnsupportedClaim",
    "allocate_claims",
    "allocated_devices",
    "claim_requests",
    "class_inventory",
    "class_resource",
    "node_slice_devices",
    "parse_device_class",
]

DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
MAX_SELECTORS = 32
MAX_REQUESTS = 32
MAX_COUNT = 128


def class_resource(device_class: str) -> str:
    """The zone row of a DeviceClass: ``deviceclass.resource.kubernetes.io/<class>``."""
    return DEVICE_CLASS_RESOURCE_PREFIX + device_class


class UnsupportedClaim(DRAError):
    """A claim this scheduler does not allocate (``path`` names the field)."""


@dataclass(frozen=True, slots=True)
class SliceDevice:
    """One device of a ResourceSlice: its key, NUMA node(s) and the CEL view of it."""

    driver: str
    pool: str
    name: str
    numa: tuple[int, ...]
    cel: Mapping[str, Any]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


def _cel_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        for kind in ("int", "bool", "string", "version"):
            if kind in value:
                return value[kind]
    return None


def _cel_device(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, short = str(name).rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = _cel_value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, _, short = str(name).rpartition("/")
        raw = value.get("value") if isinstance(value, Mapping) else value
        try:
            amount: Any = parse_quantity(raw).value()
        except (ValueError, TypeError):
            amount = None
        capacity.setdefault(domain or driver, {})[short] = amount
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def node_slice_devices(
    slices: Iterable[Mapping[str, Any]], numa_attributes: Sequence[str] = (), pci_numa: PciNuma | None = None
) -> list[SliceDevice]:
    """The devices of a node's ResourceSlices (newest pool generation only), each with its NUMA
    node(s) and CEL view; errors name the slice and field (:class:`~numaplane.policy.dra.DRAError`)."""
    slices = list(slices)
    slice_devices(slices)  # the one slice reader: validates every slice, naming it
    newest: dict[tuple[str, str], int] = {}
    for obj in slices:
        spec = obj["spec"]
        key = (spec["driver"], spec["pool"]["name"])
        newest[key] = max(newest.get(key, spec["pool"].get("generation", 0)), spec["pool"].get("generation", 0))
    out: list[SliceDevice] = []
    for obj in slices:
        spec = obj["spec"]
        driver, pool = spec["driver"], spec["pool"]["name"]
        if spec["pool"].get("generation", 0) != newest[(driver, pool)]:
            continue
        for device in spec.get("devices") or []:
            key3 = (driver, pool, device["name"])
            attributes = device.get("attributes") or {}
            numa = device_numa(driver, attributes, numa_attributes, pci_numa, path=f"device {'/'.join(key3)}")
            out.append(SliceDevice(driver, pool, device["name"], numa, _cel_device(driver, device)))
    out.sort(key=lambda d: (d.numa or (1 << 30,), d.key))
    return out


class Selector:
    """One compiled CEL selector (``{cel: {expression: ...}}``); :meth:`matches` evaluates it."""

    def __init__(self, expression: str, path: str) -> None:
        try:
            import celpy  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError:  # a dependency of the package; only a broken install lacks it
            raise DRAError(f"{path}.cel.expression", "CEL needs the cel-python package") from None

        self.expression = expression
        self.path = path
        self._celpy: Any = celpy
        try:
            env = celpy.Environment()
            self._program = env.program(env.compile(expression))
        except Exception as exc:  # celpy's parse errors share no base class but Exception
            raise DRAError(f"{path}.cel.expression", f"not a CEL expression: {exc}") from None

    def matches(self, device: SliceDevice) -> bool:
        """Whether the expression is ``true`` for ``device`` (an evaluation error: no)."""
        try:
            result = self._program.evaluate({"device": self._celpy.json_to_cel(dict(device.cel))})
        except Exception:  # CELEvalError: e.g. no such attribute
            return False
        return isinstance(result, (bool, self._celpy.celtypes.BoolType)) and bool(result)


def _selectors(doc: Any, path: str) -> tuple[Selector, ...]:
    if doc is None:
        return ()
    if not isinstance(doc, list) or len(doc) > MAX_SELECTORS:
        raise DRAError(path, f"not a list of at most {MAX_SELECTORS} selectors")
    out = []
    for i, item in enumerate(doc):
        cel = item.get("cel") if isinstance(item, Mapping) else None
        if not isinstance(cel, Mapping) or not isinstance(cel.get("expression"), str):
            raise DRAError(f"{path}[{i}].cel.expression", "missing or not a string")
        out.append(Selector(cel["expression"], f"{path}[{i}]"))
    return tuple(out)


@dataclass(frozen=True)
class DeviceClass:
    """A DeviceClass: its name, selectors and opaque configs (copied into allocations)."""

    name: str
    selectors: tuple[Selector, ...] = ()
    config: tuple[Mapping[str, Any], ...] = ()

    def matches(self, device: SliceDevice) -> bool:
        return all(s.matches(device) for s in self.selectors)


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass object (resource.k8s.io/v1); errors name ``DeviceClass <name>.spec...``."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise DRAError("DeviceClass.metadata.name", "missing or not a string")
    spec = obj.get("spec") or {}
    where = f"DeviceClass {name}.spec"
    if not isinstance(spec, Mapping):
        raise DRAError(where, "not an object")
    config = spec.get("config") or []
    if not isinstance(config, list):
        raise DRAError(f"{where}.config", "not a list")
    return DeviceClass(name, _selectors(spec.get("selectors"), f"{where}.selectors"), tuple(config))


def class_inventory(
    devices: Sequence[SliceDevice], classes: Iterable[DeviceClass], allocated: Iterable[tuple[str, str, str]]
) -> tuple[list[tuple[str, tuple[str, ...], tuple[int, ...]]], list[tuple[str, tuple[str, ...], tuple[int, ...]]]]:
    """The node's DRA rows as device groups ``(row, device ids, NUMA nodes)``: every device a class
    selects (allocatable), and those of them named in allocated claims (used). Device ids are
    ``driver/pool/device``."""
    taken = set(allocated)
    total: list[tuple[str, tuple[str, ...], tuple[int, ...]]] = []
    used: list[tuple[str, tuple[str, ...], tuple[int, ...]]] = []
    for device_class in sorted(classes, key=lambda c: c.name):
        row = class_resource(device_class.name)
        for device in devices:
            if device.numa and device_class.matches(device):
                group = (row, ("/".join(device.key),), device.numa)
                total.append(group)
                if device.key in taken:
                    used.append(group)
    return total, used


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """``(driver, pool, device)`` of every device in an allocated claim's ``status.allocation``."""
    out: set[tuple[str, str, str]] = set()
    for claim in claims:
        status = claim.get("status") or {}
        allocation = status.get("allocation") if isinstance(status, Mapping) else None
        if not isinstance(allocation, Mapping):
            continue
        results = (allocation.get("devices") or {}).get("results") or []
        for result in results if isinstance(results, list) else []:
            if isinstance(result, Mapping):
                out.add((str(result.get("driver")), str(result.get("pool")), str(result.get("device"))))
    return out


@dataclass(frozen=True)
class ClaimRequest:
    """One supported request of a claim: ``count`` devices of ``device_class`` that every selector accepts."""

    name: str
    device_class: DeviceClass
    count: int
    selectors: tuple[Selector, ...] = ()

    def matches(self, device: SliceDevice) -> bool:
        return self.device_class.matches(device) and all(s.matches(device) for s in self.selectors)


_UNSUPPORTED_REQUEST_FIELDS = ("adminAccess", "capacity", "tolerations")


def claim_requests(claim: Mapping[str, Any], classes: Mapping[str, DeviceClass]) -> tuple[ClaimRequest, ...]:
    """The claim's requests if this scheduler supports them all (module docstring), else
    :class:`UnsupportedClaim` naming the field; an unknown DeviceClass is unsupported too."""
    meta = claim.get("metadata") or {}
    base = f"ResourceClaim {meta.get('namespace', '?')}/{meta.get('name', '?')}.spec.devices"
    devices = (claim.get("spec") or {}).get("devices") or {}
    if not isinstance(devices, Mapping):
        raise DRAError(base, "not an object")
    if devices.get("constraints"):
        raise UnsupportedClaim(f"{base}.constraints", "claim constraints are not supported")
    requests = devices.get("requests") or []
    if not isinstance(requests, list) or len(requests) > MAX_REQUESTS:
        raise DRAError(f"{base}.requests", f"not a list of at most {MAX_REQUESTS} requests")
    out: list[ClaimRequest] = []
    for i, request in enumerate(requests):
        where = f"{base}.requests[{i}]"
        if not isinstance(request, Mapping) or not isinstance(request.get("name"), str):
            raise DRAError(f"{where}.name", "missing or not a string")
        if "firstAvailable" in request:
            raise UnsupportedClaim(f"{where}.firstAvailable", "prioritized alternatives are not supported")
        exactly = request.get("exactly")
        if not isinstance(exactly, Mapping):
            raise UnsupportedClaim(f"{where}.exactly", "only 'exactly' requests are supported")
        for name in _UNSUPPORTED_REQUEST_FIELDS:
            if exactly.get(name):
                raise UnsupportedClaim(f"{where}.exactly.{name}", "not supported")
        mode = exactly.get("allocationMode", "ExactCount")
        if mode != "ExactCount":
            raise UnsupportedClaim(f"{where}.exactly.allocationMode", f"{mode!r} is not supported (only ExactCount)")
        count = exactly.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise DRAError(f"{where}.exactly.count", f"not an integer in 1..{MAX_COUNT}: {count!r}")
        class_name = exactly.get("deviceClassName")
        if not isinstance(class_name, str) or not class_name:
            raise DRAError(f"{where}.exactly.deviceClassName", "missing or not a string")
        device_class = classes.get(class_name)
        if device_class is None:
            raise UnsupportedClaim(f"{where}.exactly.deviceClassName", f"DeviceClass {class_name!r} does not exist")
        selectors = _selectors(exactly.get("selectors"), f"{where}.exactly.selectors")
        out.append(ClaimRequest(request["name"], device_class, count, selectors))
    if not out:
        raise UnsupportedClaim(f"{base}.requests", "a claim without requests")
    return tuple(out)


def allocate_claims(
    claims: Mapping[str, tuple[ClaimRequest, ...]],
    devices: Sequence[SliceDevice],
    taken: Iterable[tuple[str, str, str]],
    zones: Sequence[int],
    *,
    spread: bool,
) -> dict[str, list[tuple[str, SliceDevice]]] | None:
    """Devices for every request of every claim (``claim name → [(request, device)]``), or ``None``.

    Tries each NUMA zone of ``zones`` in order, taking all devices from that zone (first fit over
    the devices in slice order); with ``spread`` (a node policy that does not insist on one zone),
    then any free devices, lowest NUMA node first. Free: not in ``taken`` and not chosen here."""
    busy = set(taken)

    def attempt(pool: Sequence[SliceDevice]) -> dict[str, list[tuple[str, SliceDevice]]] | None:
        chosen: set[tuple[str, str, str]] = set()
        out: dict[str, list[tuple[str, SliceDevice]]] = {}
        for claim, requests in sorted(claims.items()):
            picks: list[tuple[str, SliceDevice]] = []
            for request in requests:
                found = [d for d in pool if d.key not in busy and d.key not in chosen and request.matches(d)]
                if len(found) < request.count:
                    return None
                for device in found[: request.count]:
                    chosen.add(device.key)
                    picks.append((request.name, device))
            out[claim] = picks
        return out

    for zone in zones:
        result = attempt([d for d in devices if d.numa == (zone,)])
        if result is not None:
            return result
    return attempt(devices) if spread else None

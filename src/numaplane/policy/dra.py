"""DRA devices as a topology hint provider: a pod's allocated claims join the topology manager's merge.

The kubelet prepares DRA claims after pod admission, so its topology manager never sees them (even
``single-numa-node`` leaves a DRA GPU on one NUMA node and exclusive CPUs on another). numaplane
admits at NRI CreateContainer, after the claims were prepared, so the devices are known and fixed:
:class:`DRAPlugin` gives the topology manager one hint list per DRA driver for each container that
uses claims (pod scope: the union over the pod's containers), merged with the CPU, memory and
device-plugin hints under the node's policy and scope. ``single-numa-node`` refuses a pod whose devices
and CPUs cannot share a zone (``TopologyAffinityError``), as for device-plugin devices.

Hints of fixed devices follow the kubelet device manager's ``generateDeviceTopologyHints`` for devices
a container already holds: a mask is a hint when every device with a NUMA node has one inside it;
Preferred iff no smaller mask qualifies (:func:`device_hints`). Devices without a NUMA node neither
restrict nor count (``None``: no preference when no device has one). A device on a NUMA node this
machine does not have cannot be aligned: the driver's hints are ``[]`` (cannot be satisfied).

Where a device's NUMA node comes from (:func:`device_numa`), first match wins: the standard attribute
``resource.kubernetes.io/numaNode`` (KEP-6072), the configured driver-specific attributes (e.g.
``gpu.amd.com/numaNode``; an unqualified attribute name in a slice belongs to the slice's driver), then
the PCI device's sysfs ``numa_node`` through the ``resource.kubernetes.io/pciBusID`` attribute (the
lookup is injected: this module does no I/O).

The pod's devices are resolved from the API's objects (:func:`resolve_pod_claims`): the pod's
``spec.resourceClaims`` and ``status.resourceClaimStatuses`` name the ResourceClaims, their
``status.allocation.devices.results`` name ``(driver, pool, device)``, and the node's ResourceSlices
carry the attributes. What cannot be resolved is kept with the reason (:class:`PodClaims.unresolved`):
such a claim contributes no hint, and the container's allocation records why, so the agent's answers
never claim an alignment that was not checked.

The plugin allocates nothing (the devices were allocated by the scheduler and prepared by the
driver); its allocation records the container's devices and their NUMA nodes for the agent's
PodResources answer (``dynamic_resources``) and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.hints import NUMAMask, TopologyHint, all_masks
from numaplane.policy.plugin import Hints, PluginAllocation
from numaplane.resources.pod import Container, Pod

__all__ = [
    "MAX_CLAIMS_PER_POD",
    "MAX_DEVICES_PER_CLAIM",
    "MAX_NUMA_ID",
    "NUMA_ATTRIBUTE",
    "PCI_BUS_ID_ATTRIBUTE",
    "ClaimDevice",
    "DRAError",
    "DRAPlugin",
    "PodClaims",
    "device_hints",
    "device_numa",
    "resolve_pod_claims",
    "slice_devices",
]

NUMA_ATTRIBUTE = "resource.kubernetes.io/numaNode"
PCI_BUS_ID_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
MAX_CLAIMS_PER_POD = 32
"""The API server's limit on ``spec.resourceClaims`` (``MaxPodResourceClaims``)."""
MAX_DEVICES_PER_CLAIM = 32
"""The API server's limit on a claim's allocation results (``AllocationResultsMaxSize``)."""
MAX_NUMA_ID = 1023
MAX_SLICE_DEVICES = 128
"""The API server's limit on devices in one ResourceSlice (``ResourceSliceMaxDevices``)."""

PciNuma = Callable[[str], int | None]
"""``pciBusID`` (``0000:3b:00.0``) → the sysfs ``numa_node`` (``None``: unknown or ``-1``)."""


class DRAError(ValueError):
    """A ResourceClaim or ResourceSlice this module cannot read; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """One allocated device of one claim request.

    ``claim``: the pod's claim name (``spec.resourceClaims[].name``); ``claim_name`` /
    ``namespace``: the ResourceClaim object; ``request``: the allocation result's request
    (``req`` or ``req/subrequest``); ``numa``: its NUMA nodes (``()``: none known)."""

    claim: str
    claim_name: str
    namespace: str
    request: str
    driver: str
    pool: str
    device: str
    numa: tuple[int, ...] = ()
    cdi_devices: tuple[str, ...] = ()

    def uses(self, request: str) -> bool:
        """Whether a container claim reference with ``request`` (``""``: all) uses this device."""
        return not request or self.request == request or self.request.startswith(request + "/")

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "claimName": self.claim_name,
            "namespace": self.namespace,
            "request": self.request,
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
            "numa": list(self.numa),
            "cdiDevices": list(self.cdi_devices),
        }

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> ClaimDevice:
        return ClaimDevice(
            claim=str(doc["claim"]),
            claim_name=str(doc["claimName"]),
            namespace=str(doc["namespace"]),
            request=str(doc["request"]),
            driver=str(doc["driver"]),
            pool=str(doc["pool"]),
            device=str(doc["device"]),
            numa=tuple(int(n) for n in doc.get("numa", ())),
            cdi_devices=tuple(str(n) for n in doc.get("cdiDevices", ())),
        )


@dataclass(frozen=True)
class PodClaims:
    """A pod's DRA devices by pod claim name, and the claims that could not be resolved (name → why)."""

    devices: Mapping[str, tuple[ClaimDevice, ...]] = field(default_factory=dict)
    unresolved: Mapping[str, str] = field(default_factory=dict)

    def for_container(self, container: Container) -> tuple[tuple[ClaimDevice, ...], tuple[str, ...]]:
        """The devices ``container`` uses, and the reasons of its unresolved claims."""
        devices: list[ClaimDevice] = []
        missing: list[str] = []
        for name, request in container.claims:
            if name in self.unresolved:
                missing.append(f"claim {name!r}: {self.unresolved[name]}")
                continue
            for device in self.devices.get(name, ()):
                if device.uses(request) and device not in devices:
                    devices.append(device)
        return tuple(devices), tuple(dict.fromkeys(missing))


ClaimsLookup = Callable[[Pod], PodClaims]
"""How the plugin learns a pod's devices (the agent: its informers; tests: a table)."""


# -- where a device's NUMA node comes from ----------------------------------------------------------
def _attribute_int(value: Any, path: str) -> int | None:
    """A DeviceAttribute's ``int`` (``None``: the attribute is not an int)."""
    if not isinstance(value, Mapping):
        raise DRAError(path, "a device attribute must be an object")
    number = value.get("int")
    if number is None:
        return None
    if isinstance(number, bool) or not isinstance(number, int):
        raise DRAError(f"{path}.int", f"not an integer: {number!r}")
    return number


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def device_numa(
    driver: str,
    attributes: Mapping[str, Any],
    numa_attributes: Sequence[str] = (),
    pci_numa: PciNuma | None = None,
    *,
    path: str = "attributes",
) -> tuple[int, ...]:
    """The NUMA node of a device from its ResourceSlice ``attributes`` (``()``: none known).

    Order: ``resource.kubernetes.io/numaNode``, each of ``numa_attributes`` (qualified names), then
    ``pci_numa(pciBusID)``. A negative NUMA id means "none" (sysfs ``-1``); one above
    :data:`MAX_NUMA_ID` is an error naming the attribute."""
    by_name = {_qualified(str(k), driver): (str(k), v) for k, v in attributes.items()}
    for wanted in (NUMA_ATTRIBUTE, *numa_attributes):
        found = by_name.get(wanted)
        if found is None:
            continue
        number = _attribute_int(found[1], f"{path}.{found[0]}")
        if number is None:
            raise DRAError(f"{path}.{found[0]}", "a NUMA node attribute must be an int")
        if number > MAX_NUMA_ID:
            raise DRAError(f"{path}.{found[0]}", f"NUMA node {number} is above {MAX_NUMA_ID}")
        return () if number < 0 else (number,)
    bus = by_name.get(PCI_BUS_ID_ATTRIBUTE)
    if bus is not None and pci_numa is not None:
        value = bus[1]
        if not isinstance(value, Mapping) or not isinstance(value.get("string"), str):
            raise DRAError(f"{path}.{bus[0]}", "pciBusID must be a string attribute")
        number = pci_numa(value["string"])
        if number is not None and 0 <= number <= MAX_NUMA_ID:
            return (number,)
    return ()


def slice_devices(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    """``(driver, pool, device) → attributes`` over ResourceSlices (resource.k8s.io/v1).

    A slice's errors name it (``ResourceSlice <name>.spec...``). Only the newest generation of a pool
    counts, as the scheduler's allocator reads it."""
    newest: dict[tuple[str, str], int] = {}
    parsed: list[tuple[str, str, int, str, list[Any]]] = []
    for obj in slices:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = str(meta.get("name", "?")) if isinstance(meta, Mapping) else "?"
        where = f"ResourceSlice {name}.spec"
        spec = obj.get("spec") if isinstance(obj, Mapping) else None
        if not isinstance(spec, Mapping):
            raise DRAError(where, "missing or not an object")
        driver, pool = spec.get("driver"), spec.get("pool")
        if not isinstance(driver, str) or not driver:
            raise DRAError(f"{where}.driver", "missing or not a string")
        if not isinstance(pool, Mapping) or not isinstance(pool.get("name"), str):
            raise DRAError(f"{where}.pool.name", "missing or not a string")
        generation = pool.get("generation", 0)
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise DRAError(f"{where}.pool.generation", "not an integer")
        devices = spec.get("devices") or []
        if not isinstance(devices, list):
            raise DRAError(f"{where}.devices", "not a list")
        if len(devices) > MAX_SLICE_DEVICES:
            raise DRAError(f"{where}.devices", f"{len(devices)} devices, at most {MAX_SLICE_DEVICES}")
        key = (driver, pool["name"])
        newest[key] = max(newest.get(key, generation), generation)
        parsed.append((driver, pool["name"], generation, where, devices))
    out: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for driver, pool_name, generation, where, devices in parsed:
        if generation != newest[(driver, pool_name)]:
            continue
        for i, device in enumerate(devices):
            if not isinstance(device, Mapping) or not isinstance(device.get("name"), str):
                raise DRAError(f"{where}.devices[{i}].name", "missing or not a string")
            attributes = device.get("attributes") or {}
            if not isinstance(attributes, Mapping):
                raise DRAError(f"{where}.devices[{i}].attributes", "not an object")
            out[(driver, pool_name, device["name"])] = attributes
    return out


# -- a pod's claims ---------------------------------------------------------------------------------
def _pod_claim_objects(pod: Pod) -> dict[str, str | None]:
    """Pod claim name → ResourceClaim name (``None``: a template whose claim is not created yet)."""
    spec = pod.raw.get("spec") or {}
    status = pod.raw.get("status") or {}
    entries = spec.get("resourceClaims") or []
    if not isinstance(entries, list):
        raise DRAError("spec.resourceClaims", "not a list")
    if len(entries) > MAX_CLAIMS_PER_POD:
        raise DRAError("spec.resourceClaims", f"{len(entries)} claims, at most {MAX_CLAIMS_PER_POD}")
    generated: dict[str, str | None] = {}
    for i, item in enumerate(status.get("resourceClaimStatuses") or []):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise DRAError(f"status.resourceClaimStatuses[{i}].name", "missing or not a string")
        claim = item.get("resourceClaimName")
        generated[item["name"]] = claim if isinstance(claim, str) and claim else None
    out: dict[str, str | None] = {}
    for i, item in enumerate(entries):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise DRAError(f"spec.resourceClaims[{i}].name", "missing or not a string")
        direct = item.get("resourceClaimName")
        if isinstance(direct, str) and direct:
            out[item["name"]] = direct
        else:
            out[item["name"]] = generated.get(item["name"])
    return out


def _field(doc: Mapping[str, Any], name: str, path: str, kind: type) -> Any:
    """``doc[name]`` when present (``None`` when absent or null), refused unless of ``kind``."""
    value = doc.get(name)
    if value is not None and not isinstance(value, kind):
        raise DRAError(f"{path}.{name}", f"not {'an object' if kind is Mapping else 'a list'}")
    return value


def _reserved_for(status: Mapping[str, Any], uid: str, path: str) -> bool:
    reserved = _field(status, "reservedFor", path, list) or []
    return any(isinstance(r, Mapping) and r.get("uid") == uid for r in reserved)


def _claim_cdi(status: Mapping[str, Any], path: str) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """CDI device ids a driver reported in ``status.devices`` (optional), by device."""
    out: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for item in _field(status, "devices", path, list) or []:
        if isinstance(item, Mapping):
            key = (str(item.get("driver", "")), str(item.get("pool", "")), str(item.get("device", "")))
            ids = item.get("cdiDeviceIDs") or []
            if isinstance(ids, list):
                out[key] = tuple(str(x) for x in ids)
    return out


def resolve_pod_claims(
    pod: Pod,
    claims: Mapping[tuple[str, str], Mapping[str, Any]],
    devices: Mapping[tuple[str, str, str], Mapping[str, Any]],
    numa_attributes: Sequence[str] = (),
    pci_numa: PciNuma | None = None,
) -> PodClaims:
    """The pod's devices from ResourceClaims (``(namespace, name) → object``) and the node's slice
    devices (:func:`slice_devices`). A claim not found, not allocated, not reserved for the pod, or
    whose device is in no slice of this node is *unresolved* with the reason; a malformed object
    raises :class:`DRAError` naming the field."""
    try:
        names = _pod_claim_objects(pod)
    except DRAError as exc:
        raise DRAError(f"Pod {pod.namespace}/{pod.name}.{exc.path}", str(exc).split(": ", 1)[1]) from None
    found: dict[str, tuple[ClaimDevice, ...]] = {}
    unresolved: dict[str, str] = {}
    for pod_claim, claim_name in names.items():
        if claim_name is None:
            unresolved[pod_claim] = "its ResourceClaim is not created yet (status.resourceClaimStatuses)"
            continue
        claim = claims.get((pod.namespace, claim_name))
        if claim is None:
            unresolved[pod_claim] = f"ResourceClaim {pod.namespace}/{claim_name} is not known"
            continue
        base = f"ResourceClaim {pod.namespace}/{claim_name}"
        status = _field(claim, "status", base, Mapping) or {}
        allocation = _field(status, "allocation", f"{base}.status", Mapping)
        if allocation is None:
            unresolved[pod_claim] = f"ResourceClaim {pod.namespace}/{claim_name} is not allocated"
            continue
        if not _reserved_for(status, pod.uid, f"{base}.status"):
            unresolved[pod_claim] = f"ResourceClaim {pod.namespace}/{claim_name} is not reserved for the pod"
            continue
        allocated = _field(allocation, "devices", f"{base}.status.allocation", Mapping) or {}
        where = f"{base}.status.allocation.devices.results"
        results = _field(allocated, "results", f"{base}.status.allocation.devices", list) or []
        if len(results) > MAX_DEVICES_PER_CLAIM:
            raise DRAError(where, f"{len(results)} results, at most {MAX_DEVICES_PER_CLAIM}")
        cdi = _claim_cdi(status, f"{base}.status")
        out: list[ClaimDevice] = []
        for i, result in enumerate(results):
            if not isinstance(result, Mapping):
                raise DRAError(f"{where}[{i}]", "not an object")
            key_parts = []
            for part in ("request", "driver", "pool", "device"):
                value = result.get(part)
                if not isinstance(value, str) or not value:
                    raise DRAError(f"{where}[{i}].{part}", "missing or not a string")
                key_parts.append(value)
            request, driver, pool, device = key_parts
            attributes = devices.get((driver, pool, device))
            if attributes is None:
                unresolved[pod_claim] = f"device {driver}/{pool}/{device} is in no ResourceSlice of this node"
                break
            numa = device_numa(driver, attributes, numa_attributes, pci_numa, path=f"device {driver}/{pool}/{device}")
            out.append(
                ClaimDevice(
                    pod_claim, claim_name, pod.namespace, request, driver, pool, device, numa,
                    cdi.get((driver, pool, device), ()),
                )
            )  # fmt: skip
        if pod_claim not in unresolved:
            found[pod_claim] = tuple(out)
    return PodClaims(found, unresolved)


# -- hints ------------------------------------------------------------------------------------------
def device_hints(numa_nodes: tuple[int, ...], devices: Iterable[tuple[int, ...]]) -> list[TopologyHint] | None:
    """The kubelet's hints for devices a container holds (``generateDeviceTopologyHints`` with the
    held devices as the only available ones): every mask each device with a NUMA node touches;
    Preferred iff of the smallest size among them. ``None`` when no device has a NUMA node; ``[]``
    when one is on a node outside ``numa_nodes``."""
    universe = NUMAMask.from_ids(numa_nodes).bits
    needs = [NUMAMask.from_ids(d).bits for d in devices if d]
    if not needs:
        return None
    if any(bits & ~universe for bits in needs):
        return []
    accepted = [m for m in all_masks(numa_nodes) if all(m.bits & bits for bits in needs)]
    smallest = min(m.count() for m in accepted)
    return [TopologyHint(m, m.count() == smallest) for m in accepted]


def _hints_by_driver(numa_nodes: tuple[int, ...], devices: Iterable[ClaimDevice]) -> dict[str, list[TopologyHint]]:
    by_driver: dict[str, list[tuple[int, ...]]] = {}
    for device in devices:
        by_driver.setdefault(device.driver, []).append(device.numa)
    out: dict[str, list[TopologyHint]] = {}
    for driver, numas in sorted(by_driver.items()):
        hints = device_hints(numa_nodes, numas)
        if hints is not None:
            out[f"dra:{driver}"] = hints
    return out


class DRAPlugin:
    """The DRA topology hint provider (see the module docstring). Owns the per-container records of
    the devices it saw at admission; ``lookup`` gives a pod's claims (no I/O in this class).

    ``config``: with one, the node config switches it (``dra.enabled``; ``dra.numaAttributes`` in
    :attr:`numa_attributes`, which the lookup reads) and every reconfiguration follows it; without,
    it is on until a reconfiguration (the pure-core tests and simulations that build it on purpose). ``requires``: why it
    cannot work here (e.g. the agent has no API access) — a config enabling it is then refused."""

    name = "dra"
    resources: frozenset[str] = frozenset()

    def __init__(
        self,
        numa_nodes: Iterable[int],
        lookup: ClaimsLookup,
        *,
        config: NodeResourceConfig | None = None,
        requires: str = "",
    ) -> None:
        self.numa_nodes = tuple(sorted(set(numa_nodes)))
        self.lookup = lookup
        self.requires = requires
        self.enabled = True
        self.numa_attributes: tuple[str, ...] = ()
        if config is not None:
            self.reconfigure(config)
        self._given: dict[tuple[str, str], PluginAllocation] = {}

    def wants_container(self, container: Container) -> bool:
        """Only containers that use claims are asked about (``asks.wants``), and only when enabled."""
        return self.enabled and bool(container.claims)

    def hints(self, pod: Pod, container: Container) -> Hints | None:
        if not self.enabled:
            return None
        devices, _missing = self.lookup(pod).for_container(container)
        return _hints_by_driver(self.numa_nodes, devices) or None

    def pod_hints(self, pod: Pod) -> Hints | None:
        if not self.enabled or not any(c.claims for c in pod.all_containers()):
            return None
        claims = self.lookup(pod)
        devices: list[ClaimDevice] = []
        for container in pod.all_containers():
            for device in claims.for_container(container)[0]:
                if device not in devices:
                    devices.append(device)
        return _hints_by_driver(self.numa_nodes, devices) or None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        """Record the container's devices (they are already allocated and prepared); ``numa`` is the
        union of their NUMA nodes, ``extra`` lists the devices and the claims left unresolved."""
        devices, missing = self.lookup(pod).for_container(container)
        nodes = sorted({n for d in devices for n in d.numa})
        extra: dict[str, Any] = {"devices": [d.to_dict() for d in devices]}
        if missing:
            extra["unresolved"] = list(missing)
        allocation = PluginAllocation(self.name, numa=NUMAMask.from_ids(nodes) if nodes else None, extra=extra)
        self._given[(pod.uid, container.name)] = allocation
        return allocation

    def release(self, pod_uid: str, container_name: str) -> None:
        self._given.pop((pod_uid, container_name), None)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        return dict(self._given)

    def claim_devices(self, pod_uid: str, container_name: str) -> tuple[ClaimDevice, ...]:
        """The devices recorded for a container at its admission (empty: none, or not admitted)."""
        allocation = self._given.get((pod_uid, container_name))
        if allocation is None:
            return ()
        return tuple(ClaimDevice.from_dict(d) for d in allocation.extra.get("devices", ()))

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        return {}

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return {}

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        if config.dra_enabled and self.requires:
            return [f"dra.enabled: {self.requires}"]
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        """Follow the node config's ``dra`` section (admitted containers keep their records)."""
        self.enabled = config.dra_enabled
        self.numa_attributes = config.dra_numa_attributes

    def snapshot(self) -> dict[str, Any]:
        return {"containers": [{"pod": k[0], "name": k[1], **a.to_dict()} for k, a in sorted(self._given.items())]}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        given: dict[tuple[str, str], PluginAllocation] = {}
        for doc in snapshot.get("containers", ()):
            given[(str(doc["pod"]), str(doc["name"]))] = PluginAllocation.from_dict(doc)
        self._given = given

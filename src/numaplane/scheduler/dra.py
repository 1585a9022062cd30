"""The standalone scheduler's DRA claims (``numaplane scheduler run --dra``).

Three informers (ResourceClaims, ResourceSlices, DeviceClasses, all nodes) give what a pod's claims
ask (:func:`~numaplane.policy.dra_select.claim_requests`) and which devices are free. For a pod with
claims, after the scheduling cycle found its feasible nodes, :meth:`ClaimAllocator.place` walks them
best total first and takes the first one where

* the zones that hold the pod's CPUs and memory together with its devices
  (:func:`~numaplane.placement.explain.dra_zones.claim_zones`, from the node's NRT, DRA rows included when the
  exporter publishes them) offer free matching devices, all in one zone (lowest NUMA id first); or,
  on a node whose policy does not refuse unaligned pods (not ``single-numa-node``/``restricted``)
  or whose NRT is unknown, any free matching devices (lowest NUMA node first);

then :meth:`ClaimAllocator.write` writes each claim's ``status.allocation`` (results, the node
selector ``metadata.name In [node]``, the class and claim configs) and ``status.reservedFor`` the pod
through the status subresource (conditional on the claim's resourceVersion), before the binding.
Devices this process allocated are remembered until the informer shows them, so two pods in a row
never get the same device.

What it does not allocate (claims shared with other pods, i.e. already allocated, templates whose
claim does not exist yet, prioritized lists, ``All`` mode, constraints, admin access, capacity
requests, unknown classes) leaves the pod pending with a FailedScheduling event that names the
claim and the field (:class:`~numaplane.policy.dra_select.UnsupportedClaim`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from numaplane.kube.clock import Clock
from numaplane.kube.informer import Informer
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.placement.explain.dra_zones import RESTRICTIVE_POLICIES, claim_zones
from numaplane.placement.model.view import NodeTopology
from numaplane.policy.dra import DRAError
from numaplane.policy.dra_select import (
    ClaimRequest,
    DeviceClass,
    SliceDevice,
    UnsupportedClaim,
    allocate_claims,
    allocated_devices,
    claim_requests,
    class_resource,
    node_slice_devices,
    parse_device_class,
)
from numaplane.resources.pod import Pod

__all__ = ["ClaimAllocator", "Placement", "PodClaimDemand", "claims_of"]

log = structlog.get_logger("numaplane.scheduler")


@dataclass(frozen=True)
class PodClaimDemand:
    """A pod's claims: pod claim name → (the ResourceClaim object, its supported requests)."""

    claims: Mapping[str, tuple[JsonObj, tuple[ClaimRequest, ...]]]

    def devices(self) -> dict[str, int]:
        """DRA row (``deviceclass.resource.kubernetes.io/<class>``) → devices the pod needs."""
        out: dict[str, int] = {}
        for _, requests in self.claims.values():
            for request in requests:
                row = class_resource(request.device_class.name)
                out[row] = out.get(row, 0) + request.count
        return out


@dataclass(frozen=True)
class Placement:
    """The node and the devices chosen for each pod claim (``[(request, device)]``)."""

    node: str
    zone: int | None
    devices: Mapping[str, list[tuple[str, SliceDevice]]]


def claims_of(pod: Pod) -> list[Any]:
    """The pod's ``spec.resourceClaims`` entries (empty: it uses none)."""
    entries = (pod.raw.get("spec") or {}).get("resourceClaims") or []
    return entries if isinstance(entries, list) else []


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class ClaimAllocator:
    """The DRA informers and the claim allocation of the standalone scheduler (module docstring)."""

    def __init__(self, kube: KubePort, *, clock: Clock | None = None, backoff_max_seconds: float = 10.0) -> None:
        common: dict[str, Any] = {"clock": clock, "backoff_max_seconds": backoff_max_seconds}
        self.kube = kube
        self.claims = Informer(kube, RESOURCE_CLAIM, name="resourceclaims", **common)
        self.slices = Informer(kube, RESOURCE_SLICE, name="resourceslices", **common)
        self.classes = Informer(kube, DEVICE_CLASS, name="deviceclasses", **common)
        self._parsed: dict[tuple[str, str, str], Any] = {}
        self._pending: dict[tuple[str, str, str], tuple[str, str]] = {}  # device → claim we allocated it to

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (self.claims, self.slices, self.classes)

    # --- reading ----------------------------------------------------------------------------------

    def _memo(self, kind: str, obj: JsonObj, parse: Any) -> Any:
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
        if key not in self._parsed:
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            try:
                self._parsed[key] = parse(obj)
            except DRAError as exc:
                log.warning("dra object skipped", kind=kind, name=key[1], error=str(exc))
                self._parsed[key] = None
        return self._parsed[key]

    def device_classes(self) -> dict[str, DeviceClass]:
        parsed = (self._memo("DeviceClass", o, parse_device_class) for o in self.classes.store.list_objects())
        return {c.name: c for c in parsed if c is not None}

    def node_devices(self, node: str) -> list[SliceDevice]:
        out: list[SliceDevice] = []
        for obj in self.slices.store.list_objects():
            if (obj.get("spec") or {}).get("nodeName") == node:
                out.extend(self._memo("ResourceSlice", obj, lambda o: node_slice_devices([o])) or ())
        out.sort(key=lambda d: (d.numa or (1 << 30,), d.key))
        return out

    def taken(self) -> set[tuple[str, str, str]]:
        """Devices allocated in the informer's claims, and those this process allocated since."""
        claims = self.claims.store.list_objects()
        taken = allocated_devices(claims)
        allocated_claims = {_key(c) for c in claims if (c.get("status") or {}).get("allocation")}
        for device, claim in list(self._pending.items()):
            if claim in allocated_claims and device in taken:
                del self._pending[device]  # the informer caught up
        return taken | set(self._pending)

    def demand(self, pod: Pod) -> PodClaimDemand:
        """What ``pod``'s claims ask; :class:`UnsupportedClaim` (or :class:`DRAError`) naming why not."""
        entries = claims_of(pod)
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or []
            if isinstance(s, Mapping)
        }
        classes = self.device_classes()
        out: dict[str, tuple[JsonObj, tuple[ClaimRequest, ...]]] = {}
        for i, entry in enumerate(entries):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            where = f"Pod {pod.key}.spec.resourceClaims[{i}]"
            if not isinstance(name, str):
                raise DRAError(f"{where}.name", "missing or not a string")
            claim_name = entry.get("resourceClaimName") or generated.get(name)
            if not claim_name:
                raise UnsupportedClaim(where, "its ResourceClaim is not created yet (template)")
            claim = self.claims.store.get_by_name(str(claim_name), pod.namespace)
            if claim is None:
                raise UnsupportedClaim(where, f"ResourceClaim {pod.namespace}/{claim_name} does not exist")
            if (claim.get("status") or {}).get("allocation"):
                raise UnsupportedClaim(
                    f"ResourceClaim {pod.namespace}/{claim_name}.status.allocation",
                    "already allocated (claims shared between pods are not supported)",
                )
            out[name] = (claim, claim_requests(claim, classes))
        return PodClaimDemand(out)

    # --- choosing ---------------------------------------------------------------------------------

    def place(
        self,
        pod: Pod,
        demand: PodClaimDemand,
        nodes: Sequence[str],
        topology: Mapping[str, NodeTopology | None],
    ) -> tuple[Placement | None, dict[str, str]]:
        """The first node of ``nodes`` (best first) where the claims can be allocated as the module
        docstring says, and why each node before it could not."""
        taken = self.taken()
        wanted = {name: requests for name, (_, requests) in demand.claims.items()}
        rows = demand.devices()
        why: dict[str, str] = {}
        for node in nodes:
            devices = self.node_devices(node)
            view = topology.get(node)
            if view is None or view.problem is not None or not view.zones:
                zones: tuple[int, ...] = ()
                spread = True
            else:
                zones = claim_zones(view, pod, rows)
                spread = view.config.policy not in RESTRICTIVE_POLICIES
            chosen = allocate_claims(wanted, devices, taken, zones, spread=spread)
            if chosen is None:
                anywhere = not spread and allocate_claims(wanted, devices, taken, (), spread=True) is not None
                why[node] = (
                    "cannot align the pod's claimed devices with its CPUs and memory"
                    if anywhere
                    else "no free devices match the pod's claims"
                )
                continue
            numas = {n for picks in chosen.values() for _, d in picks for n in d.numa}
            zone = next(iter(numas)) if len(numas) == 1 else None
            return Placement(node, zone, chosen), why
        return None, why

    # --- writing ----------------------------------------------------------------------------------

    async def write(self, pod: Pod, demand: PodClaimDemand, placement: Placement) -> None:
        """Write each claim's allocation and reservation for ``pod`` (status subresource, conditional)."""
        for name, (claim, requests) in sorted(demand.claims.items()):
            picks = placement.devices[name]
            config: list[dict[str, Any]] = []
            for request in requests:
                for item in request.device_class.config:
                    config.append({"source": "FromClass", "requests": [request.name], **dict(item)})
            for item in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
                config.append({"source": "FromClaim", **dict(item)})
            allocation: dict[str, Any] = {
                "devices": {
                    "results": [
                        {"request": request, "driver": d.driver, "pool": d.pool, "device": d.name}
                        for request, d in picks
                    ],
                    **({"config": config} if config else {}),
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [placement.node]}]}
                    ]
                },
            }
            status = dict(claim.get("status") or {})
            status["allocation"] = allocation
            status["reservedFor"] = [{"resource": "pods", "name": pod.name, "uid": pod.uid}]
            await self.kube.update_status(RESOURCE_CLAIM, {**claim, "status": status})
            for _, device in picks:
                self._pending[device.key] = _key(claim)

    async def release(self, pod: Pod, demand: PodClaimDemand) -> None:
        """Undo :meth:`write` after a failed binding: clear the allocations this pod holds."""
        for claim, _ in demand.claims.values():
            namespace, name = _key(claim)
            try:
                current = await self.kube.get(RESOURCE_CLAIM, name, namespace=namespace)
            except Exception as exc:  # gone or unreachable: nothing more to undo here
                log.info("claim not released", claim=f"{namespace}/{name}", error=str(exc))
                continue
            reserved = (current.get("status") or {}).get("reservedFor") or []
            if [r.get("uid") for r in reserved] != [pod.uid]:
                continue
            for device, owner in list(self._pending.items()):
                if owner == (namespace, name):
                    del self._pending[device]
            await self.kube.update_status(RESOURCE_CLAIM, {**current, "status": {}})

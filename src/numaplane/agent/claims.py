"""A pod's allocated DRA devices, from the API (optional; needs the agent's API access).

Two read-only informers feed :class:`~numaplane.policy.dra.DRAPlugin`:

* ``resourceclaims`` (all namespaces; the agent cannot select a node's claims on the server, so each
  is cached reduced to its name, namespace and ``status``, see :func:`reduce_claim`);
* ``resourceslices`` with ``spec.nodeName=<node>`` (the node-local devices and their attributes:
  ``resource.kubernetes.io/numaNode``, driver-specific NUMA attributes, ``pciBusID``).

:meth:`ClaimSource.resolve` never waits: it reads the two caches. The scheduler writes a claim's
allocation before it binds the pod and the kubelet prepares the claim before it creates the
sandbox, so by NRI CreateContainer the claim is allocated; a claim the caches have not seen yet is
*unresolved* with the reason (the plugin gives no hint for it, the container's allocation records
why). A slice that cannot be parsed is left out with a warning naming it (its devices become "in no
ResourceSlice of this node"); a claim that cannot be parsed makes the pod's claims unresolved with
the error, never the agent fail.

The PCI fallback reads ``<sysfs root>/sys/bus/pci/devices/<pciBusID>/numa_node`` (``-1``: none).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from numaplane.agent.background import cancel_and_wait
from numaplane.kube.informer import Informer
from numaplane.kube.port import KubePort
from numaplane.kube.resources import RESOURCE_CLAIM, RESOURCE_SLICE
from numaplane.policy.dra import DRAError, PciNuma, PodClaims, resolve_pod_claims, slice_devices
from numaplane.resources.pod import Pod
from numaplane.supervisor import Supervisor

__all__ = ["ClaimSource", "pci_numa_reader", "reduce_claim"]

log = structlog.get_logger("numaplane.agent")

#: ``<domain>:<bus>:<device>.<function>`` as sysfs names PCI devices (``0000:3b:00.0``).
_PCI_BUS_ID = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def reduce_claim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the agent keeps of a ResourceClaim: name, namespace, resourceVersion and ``status``."""
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta},
        "status": obj.get("status") or {},
    }


def pci_numa_reader(sysfs_root: Path) -> PciNuma:
    """``pciBusID → sysfs numa_node`` under ``sysfs_root`` (``None``: unknown, ``-1``, or not a bus id)."""

    def read(bus_id: str) -> int | None:
        if not _PCI_BUS_ID.fullmatch(bus_id):
            return None
        path = sysfs_root / "sys" / "bus" / "pci" / "devices" / bus_id.lower() / "numa_node"
        try:
            text = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        try:
            number = int(text)
        except ValueError:
            return None
        return number if number >= 0 else None

    return read


class ClaimSource:
    """The node's ResourceSlices and every ResourceClaim, cached; ``resolve(pod)`` reads them."""

    def __init__(self, kube: KubePort, node_name: str, *, sysfs_root: Path = Path("/")) -> None:
        self.claims = Informer(kube, RESOURCE_CLAIM, name="resource-claims", transform=reduce_claim)
        self.slices = Informer(kube, RESOURCE_SLICE, field_selector=f"spec.nodeName={node_name}", name="node-slices")
        self.pci_numa = pci_numa_reader(sysfs_root)
        self._devices: tuple[tuple[tuple[str, str], ...], dict[tuple[str, str, str], Mapping[str, Any]]] | None = None
        self._bad_slices: set[str] = set()
        self.started = False
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, tasks: Supervisor | None = None) -> None:
        """Start both informers (once; later calls do nothing): as children of ``tasks`` (the agent's
        supervisor), or each in its own task."""
        if self.started:
            return
        self.started = True
        for informer in (self.claims, self.slices):
            if tasks is None:
                informer.start()
            else:
                self._tasks.append(tasks.spawn(informer.run(), f"informer-{informer.name}"))

    async def stop(self) -> None:
        if self.started:
            await self.claims.stop()
            await self.slices.stop()
        running, self._tasks = self._tasks, []
        for task in running:
            await cancel_and_wait(task)

    async def wait_for_sync(self) -> None:
        await self.claims.wait_for_sync()
        await self.slices.wait_for_sync()

    def devices(self) -> dict[tuple[str, str, str], Mapping[str, Any]]:
        """``(driver, pool, device) → attributes`` of the node's slices (recomputed when one changed)."""
        objects = self.slices.store.list_objects()
        versions = tuple(
            (str((o.get("metadata") or {}).get("name", "")), str((o.get("metadata") or {}).get("resourceVersion", "")))
            for o in objects
        )
        if self._devices is not None and self._devices[0] == versions:
            return self._devices[1]
        good: list[Mapping[str, Any]] = []
        for obj, (name, _version) in zip(objects, versions, strict=True):
            try:
                slice_devices([obj])
            except DRAError as exc:
                if name not in self._bad_slices:
                    log.warning("ResourceSlice cannot be read; its devices are left out", slice=name, error=str(exc))
                self._bad_slices.add(name)
                continue
            self._bad_slices.discard(name)
            good.append(obj)
        devices = slice_devices(good)
        self._devices = (versions, devices)
        return devices

    def resolve(self, pod: Pod, numa_attributes: Sequence[str] = ()) -> PodClaims:
        """The pod's claims resolved against the caches (see the module docstring)."""
        names = _claim_names(pod)
        if not names:
            return PodClaims()
        claims: dict[tuple[str, str], Mapping[str, Any]] = {}
        for name in names:
            obj = self.claims.store.get_by_name(name, pod.namespace)
            if obj is not None:
                claims[(pod.namespace, name)] = obj
        try:
            return resolve_pod_claims(pod, claims, self.devices(), numa_attributes, self.pci_numa)
        except DRAError as exc:
            log.warning("the pod's claims cannot be read", pod=f"{pod.namespace}/{pod.name}", error=str(exc))
            return PodClaims(unresolved={c: str(exc) for c, _r in _pod_claims(pod)})


def _pod_claims(pod: Pod) -> list[tuple[str, str]]:
    return [ref for c in pod.all_containers() for ref in c.claims]


def _claim_names(pod: Pod) -> list[str]:
    """The ResourceClaim names the pod's spec and status name (bounded by the pod's own limits)."""
    spec = pod.raw.get("spec") or {}
    status = pod.raw.get("status") or {}
    out: list[str] = []
    for entries in (spec.get("resourceClaims"), status.get("resourceClaimStatuses")):
        if not isinstance(entries, list):
            continue
        for item in entries[:64]:
            if isinstance(item, Mapping):
                name = item.get("resourceClaimName")
                if isinstance(name, str) and name and name not in out:
                    out.append(name)
    return out

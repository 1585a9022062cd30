"""Informers on Pods, Nodes and NodeResourceTopologies feeding a :class:`SchedulerState`.

:class:`ClusterInformers` runs one informer per resource through the kube port (list, then watch,
relist on 410, backoff on errors; :mod:`numaplane.kube.informer`) and registers the scheduler state's handlers
first, so every later handler (the standalone scheduler's queue) sees the state already updated.
Pods are watched in every namespace: the state needs bound pods for usage, fingerprints and foreign
pod detection. :attr:`ClusterInformers.synced` is true once all three have listed once; a missing
NodeResourceTopology CRD keeps the NRT informer retrying and the process not ready.

Memory (5,000 nodes): every informer caches its objects without ``metadata.managedFields`` (nothing
here reads them), Nodes also without ``status.images`` (the kubelet lists up to 50 images per node,
often the largest part of a Node; no filter or score here reads them); the strings of Nodes, Pods
and NRTs are interned (:func:`interned`: thousands of objects repeat the same names and
quantities); the NRT informer caches only a stub (kind, name, ``resourceVersion``) holding the
parsed :class:`~numaplane.nrt.model.NodeResourceTopology` under :data:`PARSED_NRT`, which goes to
the scheduler state's NRT cache as is (its handlers read no other field). An NRT that does not parse is
cached whole and reaches the state as before (which reports it malformed). The parsed objects share
their zones through one :class:`~numaplane.nrt.sharing.ZoneTable` per process (nodes of the same
hardware and load publish equal zones; 5,000 idle nodes of one kind hold one set of zones).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from numaplane.kube.clock import Clock
from numaplane.kube.informer import EventHandlers, Informer
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.nrt.sharing import ZoneTable
from numaplane.scheduler.state import SchedulerState

__all__ = [
    "PARSED_NRT",
    "ClusterInformers",
    "interned",
    "node_view",
    "nrt_stub",
    "pod_view",
    "shared_resources",
    "without_managed_fields",
]

#: The key of the parsed NodeResourceTopology in the NRT informer's stub objects.
PARSED_NRT = "numaplane.parsedNRT"


def interned(value: Any) -> Any:
    """``value`` with every string value inside it interned (changed in place; returns it).

    5,000 NRTs repeat the same few hundred strings (resource names, zone names, quantities) and
    the parsed objects keep them; one shared copy each saves tens of MB.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = sys.intern(item) if type(item) is str else interned(item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = sys.intern(item) if type(item) is str else interned(item)
    return value


def without_managed_fields(obj: JsonObj) -> JsonObj:
    """``obj`` without ``metadata.managedFields`` (changed in place; informer objects are fresh)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


# Equal resource maps of different objects held once: the Nodes of one machine type have equal
# ``status.capacity`` and ``status.allocatable``, the pods of one workload equal container requests and
# limits (issue 30: memory; two dicts per Node, about 0.5 KB). Keyed by their items (interned strings);
# bounded like the views' shared maps. Nothing in the process modifies an informer object's resource
# maps once the transform returned (the transforms change only fresh objects, at their top levels).
_SHARED_RESOURCE_MAPS: dict[tuple[tuple[object, object], ...], dict[str, Any]] = {}
_SHARED_RESOURCE_LIMIT = 1 << 14


def shared_resources(value: Any) -> Any:
    """The resource map equal to ``value`` (same items, same order) already held, else ``value``
    itself (kept for the next equal one). Anything but a dict of strings to strings (a malformed
    object: its problem is reported from it as it is) is returned unchanged and not kept."""
    if type(value) is not dict or not all(type(k) is str and type(v) is str for k, v in value.items()):
        return value
    key = tuple(value.items())
    if len(_SHARED_RESOURCE_MAPS) >= _SHARED_RESOURCE_LIMIT:
        _SHARED_RESOURCE_MAPS.clear()
    return _SHARED_RESOURCE_MAPS.setdefault(key, value)


def node_view(obj: JsonObj) -> JsonObj:
    """The Node informer's transform: without managed fields and ``status.images``, strings interned,
    equal ``status.capacity`` / ``status.allocatable`` maps shared (:func:`shared_resources`)."""
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("images", None)
    interned(without_managed_fields(obj))
    if isinstance(status, dict):
        for key in ("capacity", "allocatable"):
            if key in status:
                status[key] = shared_resources(status[key])
    return obj


def pod_view(obj: JsonObj) -> JsonObj:
    """The Pod informer's transform: without managed fields, strings interned, equal container
    ``resources.requests`` / ``resources.limits`` maps shared (:func:`shared_resources`)."""
    interned(without_managed_fields(obj))
    spec = obj.get("spec")
    if isinstance(spec, dict):
        for kind in ("containers", "initContainers"):
            containers = spec.get(kind)
            if type(containers) is not list:
                continue
            for container in containers:
                resources = container.get("resources") if type(container) is dict else None
                if type(resources) is dict:
                    for key in ("requests", "limits"):
                        if key in resources:
                            resources[key] = shared_resources(resources[key])
    return obj


def nrt_stub(obj: JsonObj, zones: ZoneTable | None = None) -> JsonObj:
    """The NRT informer's transform: a stub with the parsed object, or ``obj`` itself when malformed.

    With ``zones``, the parsed object's zones are the table's shared ones (an equal object).
    """
    interned(without_managed_fields(obj))
    try:
        parsed = parse_strict(obj)
    except NRTFormatError:
        return obj
    if zones is not None:
        parsed = zones.shared(parsed)
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {"name": meta.get("name"), "resourceVersion": meta.get("resourceVersion")},
        PARSED_NRT: parsed,
    }


class ClusterInformers:
    """The three informers of a scheduler process (module docstring)."""

    def __init__(
        self,
        kube: KubePort,
        state: SchedulerState,
        *,
        clock: Clock | None = None,
        backoff_max_seconds: float = 10.0,
        extra: Sequence[Informer] = (),
    ) -> None:
        common: dict[str, Any] = {"clock": clock, "backoff_max_seconds": backoff_max_seconds}
        self.state = state
        self.extra = tuple(extra)  # started, synced and reported with the three (the DRA informers)
        self.zones = ZoneTable()
        self.nodes = Informer(kube, NODE, name="nodes", transform=node_view, **common)
        self.nrts = Informer(
            kube, NODE_RESOURCE_TOPOLOGY, name="noderesourcetopologies", transform=self._nrt_stub, **common
        )
        self.pods = Informer(kube, POD, name="pods", transform=pod_view, **common)
        self.nodes.add_handler(
            EventHandlers(
                on_add=state.node_upserted,
                on_update=lambda old, new: state.node_upserted(new),
                on_delete=state.node_deleted,
            )
        )
        self.nrts.add_handler(
            EventHandlers(
                on_add=self._nrt_upserted,
                on_update=lambda old, new: self._nrt_upserted(new),
                on_delete=state.nrt_deleted,
            )
        )
        self.pods.add_handler(
            EventHandlers(
                on_add=self._pod_added,
                on_update=self._pod_updated,
                on_delete=state.pod_deleted,
            )
        )

    def _nrt_stub(self, obj: JsonObj) -> JsonObj:
        return nrt_stub(obj, self.zones)

    def _nrt_upserted(self, obj: JsonObj) -> None:
        parsed = obj.get(PARSED_NRT)
        if isinstance(parsed, NodeResourceTopology):
            self.state.gate.nrt_updated(parsed)  # what state.nrt_upserted does with a document
        else:
            self.state.nrt_upserted(obj)

    def _pod_added(self, obj: JsonObj) -> None:
        self.state.pod_upserted(None, obj)

    def _pod_updated(self, old: JsonObj, new: JsonObj) -> None:
        self.state.pod_upserted(old, new)

    @property
    def all(self) -> tuple[Informer, ...]:
        # Nodes and NRTs first: pods referencing them then find the node known.
        return (self.nodes, self.nrts, self.pods, *self.extra)

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self.all)

    def status(self) -> dict[str, Any]:
        """Per informer: synced, cached objects, last error (for /readyz)."""
        return {
            i.name: {
                "synced": i.has_synced,
                "objects": len(i.store),
                **({"lastError": str(i.last_error)} if i.last_error is not None else {}),
            }
            for i in self.all
        }

    def start(self) -> None:
        for informer in self.all:
            informer.start()

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(i.wait_for_sync() for i in self.all))

    async def stop(self) -> None:
        for informer in self.all:
            await informer.stop()

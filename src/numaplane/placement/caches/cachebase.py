"""What every NRT cache shares: the value it returns, its event interface, and the latest-object store.

The caches are pure state machines. The caller feeds them events — NRT objects seen on the API server
(:meth:`NRTCache.nrt_updated`), pod informer events, the scheduler's Reserve / Unreserve / PostBind
and Filter rejections — and the current time (:meth:`NRTCache.tick`, monotonic seconds). They never read
a clock or do I/O. Where upstream performs a live GET of the NRT, these caches use the latest object
fed through :meth:`NRTCache.nrt_updated` (what such a GET would return).

:meth:`NRTCache.get` returns a :class:`CachedTopology` (upstream ``GetCachedNRTCopy``):
``topology=None, fresh=True`` means "no data, let the pod pass"; ``fresh=False`` means "data exists but
must not be trusted now" (the filter rejects with ``invalid node topology data``, the score is 0).

:meth:`NRTCache.drain_changed` returns the nodes whose :meth:`get` result may have changed since the
previous call, so an incremental consumer (:mod:`numaplane.placement.arrays.pipeline`) refreshes only those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from numaplane.nrt.errors import NRTFormatError
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.parse import parse_strict
from numaplane.placement.model.view import NodeTopology, malformed, node_topology
from numaplane.resources.pod import Pod

__all__ = ["CachedTopology", "LatestNRTs", "NRTCache", "NRTEvent"]

NRTEvent = NodeResourceTopology | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CachedTopology:
    """A cache answer for one node: the view to use (or ``None``), whether to trust it, the generation."""

    topology: NodeTopology | None
    fresh: bool = True
    generation: int = 0


class NRTCache(Protocol):
    """The event interface shared by the Passthrough, DiscardReserved and OverReserve caches."""

    def get(self, node: str, pod: Pod | None = None) -> CachedTopology: ...
    def nrt_updated(self, nrt: NRTEvent) -> None: ...
    def nrt_deleted(self, node: str) -> None: ...
    def node_deleted(self, node: str) -> None: ...
    def pod_updated(self, pod: Pod) -> None: ...
    def pod_deleted(self, pod: Pod) -> None: ...
    def reserve(self, node: str, pod: Pod) -> None: ...
    def unreserve(self, node: str, pod: Pod) -> None: ...
    def post_bind(self, node: str, pod: Pod) -> None: ...
    def node_maybe_overreserved(self, node: str, pod: Pod) -> None: ...
    def tick(self, now: float) -> object: ...
    def drain_changed(self) -> set[str]: ...


def parse_event(nrt: NRTEvent) -> tuple[str, NodeResourceTopology | None, NodeTopology]:
    """``(node name, object or None when malformed, view)``; a malformed dict becomes a problem view."""
    if isinstance(nrt, NodeResourceTopology):
        return nrt.name, nrt, node_topology(nrt)
    meta = nrt.get("metadata") if isinstance(nrt, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    name = name if isinstance(name, str) and name else "?"
    try:
        obj = parse_strict(nrt)
    except NRTFormatError as exc:
        return name, None, malformed(name, str(exc))
    return obj.name, obj, node_topology(obj)


class LatestNRTs:
    """The latest NRT object (and its view) per node, as a live GET would return it.

    Views of readable objects are computed on first use (:meth:`view`) and kept until the node's
    next object: a cache that reads few of the objects it is fed (over-reserve) parses only those.
    Zones are read through :data:`~numaplane.placement.model.view.SHARED_READINGS`: a zone object held by
    several objects (the node's next one, other nodes' through :class:`~numaplane.nrt.sharing.ZoneTable`)
    is read once and its views share one :class:`~numaplane.placement.model.view.NUMAZone`.
    """

    def __init__(self, initial: Iterable[NRTEvent] = ()) -> None:
        self.objects: dict[str, NodeResourceTopology | None] = {}
        self._views: dict[str, NodeTopology] = {}  # computed views (always set for unreadable objects)
        self.changed: set[str] = set()
        for nrt in initial:
            self.put(nrt)

    def put(self, nrt: NRTEvent) -> str:
        if isinstance(nrt, NodeResourceTopology):
            name = nrt.name
            self.objects[name] = nrt
            self._views.pop(name, None)
        else:
            name, obj, view = parse_event(nrt)
            self.objects[name] = obj
            self._views[name] = view
        self.changed.add(name)
        return name

    def view(self, node: str) -> NodeTopology | None:
        """The view of the node's latest object (``None``: no object)."""
        view = self._views.get(node)
        if view is None:
            obj = self.objects.get(node)
            if obj is None:
                return None
            view = self._views[node] = node_topology(obj)
        return view

    def view_of(self, node: str, nrt: NodeResourceTopology) -> NodeTopology:
        """The view of ``nrt``, shared with :meth:`view` when it is the node's latest object."""
        if self.objects.get(node) is nrt:
            view = self.view(node)
            assert view is not None
            return view
        return node_topology(nrt)

    def drop(self, node: str) -> None:
        self.objects.pop(node, None)
        self._views.pop(node, None)
        self.changed.add(node)

    def drain(self) -> set[str]:
        out, self.changed = self.changed, set()
        return out

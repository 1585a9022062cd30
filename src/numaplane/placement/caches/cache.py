"""NRT caches of the NUMA-aware scheduler (scheduler-nrt.md C), as pure state machines.

* :class:`PassthroughCache` (upstream default, ``cacheResyncPeriodSeconds <= 0``): always the latest
  object; nothing is remembered between scheduling cycles, so back-to-back pods can be sent to the same
  exhausted zone before the exporter republishes (scheduler-plugins#452).
* :class:`DiscardReservedCache` (``discardReservedNodes: true``): a node with a reservation between
  Reserve and Unreserve/PostBind is untrusted (``fresh=False``); otherwise like Passthrough.
* :class:`~numaplane.placement.caches.overreserve.OverReserveCache` (``cacheResyncPeriodSeconds > 0``):
  reservations charged to every zone, resync by pod-set fingerprint, foreign pods.

:func:`make_cache` picks one the way the plugin does. Shared types live in
:mod:`numaplane.placement.caches.cachebase`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from numaplane.placement.caches.cachebase import CachedTopology, LatestNRTs, NRTCache, NRTEvent
from numaplane.placement.caches.overreserve import OverReserveCache, OverReserveConfig, ResyncReport
from numaplane.placement.explain.filter import DEFAULT_OPTIONS, FilterOptions, filter
from numaplane.placement.explain.score import score
from numaplane.placement.model.node import NodeInfo
from numaplane.placement.model.result import (
    MSG_APP,
    MSG_INCONSISTENT,
    MSG_INIT,
    MSG_NO_USABLE_ZONE,
    MSG_POD,
    MSG_SIDECAR,
    Fit,
    Reject,
)
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import Pod

__all__ = [
    "CachedTopology",
    "DiscardReservedCache",
    "NRTCache",
    "OverReserveCache",
    "OverReserveConfig",
    "PassthroughCache",
    "ResyncReport",
    "filter_with_cache",
    "make_cache",
    "nodes_maybe_overreserved",
    "score_with_cache",
]

# Rejections that come from the per-zone check: they make an over-reserving cache consider a resync.
_ZONE_CHECK_REASONS = frozenset({MSG_POD, MSG_INIT, MSG_SIDECAR, MSG_APP, MSG_INCONSISTENT, MSG_NO_USABLE_ZONE})


class PassthroughCache:
    """Returns the latest NRT of the node, always fresh; every other event is ignored."""

    def __init__(self, initial: Iterable[NRTEvent] = ()) -> None:
        self._latest = LatestNRTs(initial)

    def get(self, node: str, pod: Pod | None = None) -> CachedTopology:
        return CachedTopology(self._latest.view(node), True, 0)

    def nrt_updated(self, nrt: NRTEvent) -> None:
        self._latest.put(nrt)

    def nrt_deleted(self, node: str) -> None:
        self._latest.drop(node)

    def node_deleted(self, node: str) -> None:
        self._latest.drop(node)

    def pod_updated(self, pod: Pod) -> None:
        pass

    def pod_deleted(self, pod: Pod) -> None:
        pass

    def reserve(self, node: str, pod: Pod) -> None:
        pass

    def unreserve(self, node: str, pod: Pod) -> None:
        pass

    def post_bind(self, node: str, pod: Pod) -> None:
        pass

    def node_maybe_overreserved(self, node: str, pod: Pod) -> None:
        pass

    def tick(self, now: float) -> None:
        return None

    def drain_changed(self) -> set[str]:
        return self._latest.drain()


class DiscardReservedCache(PassthroughCache):
    """Passthrough, except that a node holding a reservation answers ``fresh=False``.

    State: node → set of reserved pod UIDs. Reserve adds, Unreserve and PostBind remove. It protects
    only the Reserve → PostBind window: once the pod is bound the node is trusted again even if the
    exporter has not yet published the new allocation.
    """

    def __init__(self, initial: Iterable[NRTEvent] = ()) -> None:
        super().__init__(initial)
        self._reserved: dict[str, set[str]] = {}

    def get(self, node: str, pod: Pod | None = None) -> CachedTopology:
        if self._reserved.get(node):
            return CachedTopology(None, False, 0)
        return super().get(node, pod)

    def reserved(self, node: str) -> frozenset[str]:
        """UIDs of the pods holding a reservation on ``node``."""
        return frozenset(self._reserved.get(node, ()))

    def reserve(self, node: str, pod: Pod) -> None:
        self._reserved.setdefault(node, set()).add(pod.uid)
        self._latest.changed.add(node)

    def unreserve(self, node: str, pod: Pod) -> None:
        self._release(node, pod)

    def post_bind(self, node: str, pod: Pod) -> None:
        self._release(node, pod)

    def node_deleted(self, node: str) -> None:
        self._reserved.pop(node, None)
        super().node_deleted(node)

    def _release(self, node: str, pod: Pod) -> None:
        uids = self._reserved.get(node)
        if uids is not None:
            uids.discard(pod.uid)
            if not uids:
                del self._reserved[node]
            self._latest.changed.add(node)


def make_cache(
    *,
    resync_period_seconds: float = 0,
    discard_reserved_nodes: bool = False,
    config: OverReserveConfig | None = None,
    initial: Iterable[NRTEvent] = (),
) -> NRTCache:
    """The plugin's choice: DiscardReserved if asked (wins); Passthrough if the period is <= 0;
    else OverReserve with ``config`` (its period replaced by ``resync_period_seconds``)."""
    if discard_reserved_nodes:
        return DiscardReservedCache(initial)
    if resync_period_seconds <= 0:
        return PassthroughCache(initial)
    base = config or OverReserveConfig()
    return OverReserveCache(replace(base, resync_period_seconds=resync_period_seconds), initial)


def nodes_maybe_overreserved(cache: NRTCache, nodes: Iterable[str], pod: Pod) -> None:
    """Report per-zone filter rejections of ``pod`` on ``nodes`` to ``cache`` (one
    ``node_maybe_overreserved`` per node, in one call when the cache counts them in bulk)."""
    bulk = getattr(type(cache), "nodes_maybe_overreserved", None)  # a class's own method, never forwarded
    if bulk is not None:
        bulk(cache, nodes, pod)
        return
    for node in nodes:
        cache.node_maybe_overreserved(node, pod)


def filter_with_cache(
    pod: Pod,
    cache: NRTCache,
    node: NodeInfo | Mapping[str, Any],
    *,
    options: FilterOptions = DEFAULT_OPTIONS,
) -> Fit | Reject:
    """The plugin's Filter: read the node's NRT from ``cache``, filter, and report a per-zone rejection
    back to the cache (``node_maybe_overreserved``), as upstream does for every handler rejection."""
    name = node.name if isinstance(node, NodeInfo) else str((node.get("metadata") or {}).get("name", ""))
    cached = cache.get(name, pod)
    verdict = filter(pod, cached.topology, node, fresh=cached.fresh, options=options)
    if isinstance(verdict, Reject) and verdict.reason in _ZONE_CHECK_REASONS:
        cache.node_maybe_overreserved(name, pod)
    return verdict


def score_with_cache(pod: Pod, cache: NRTCache, node_name: str, strategy: ScoringStrategy) -> int:
    """The plugin's Score with the node's NRT read from ``cache``."""
    cached = cache.get(node_name, pod)
    return score(pod, cached.topology, None, strategy, fresh=cached.fresh)

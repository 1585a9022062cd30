"""Stale NRT objects: an exporter that stopped publishing must not be trusted, nor written off, forever.

Our exporter writes two annotations on its NodeResourceTopology object with every write, and
rewrites the object at least every heartbeat even when its content is unchanged:

* :data:`HEARTBEAT_ANNOTATION` — the writer's wall-clock time of the write (for people and tools);
* :data:`STALE_AFTER_ANNOTATION` — the bound, in whole seconds (``"90"``): an object not rewritten
  for that long is stale.

:class:`StalenessGate` wraps the scheduler's NRT cache (any mode). Staleness is judged on the
scheduler's *own* monotonic clock from the moment it last *saw* a write of the node's object
(the time fed through :meth:`StalenessGate.tick`), never by comparing the writer's timestamp with
the scheduler's wall clock: clock skew between nodes does not matter (client-go's lease rule).

While a node is stale, :meth:`StalenessGate.get` answers a problem view (the filter rejects with
``malformed node topology data`` and the note naming the age and bound; the node scores 0; no
over-reserve feedback is given, as for any untrusted data). The first write seen afterwards makes
the node judgeable again with no restart: the wrapped cache was fed every event all along. Objects
without :data:`STALE_AFTER_ANNOTATION` (other exporters, older numaplane exporters) are never stale.
The time is fed by :meth:`tick` (the scheduler ticks at least every second), so the gate is pure; a
write is dated by the first tick after it, so a node is never found stale before its bound, and at
most two ticks after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import structlog

from numaplane.nrt.model import NodeResourceTopology
from numaplane.placement.caches.cache import nodes_maybe_overreserved
from numaplane.placement.caches.cachebase import CachedTopology, NRTCache, NRTEvent
from numaplane.placement.model.view import malformed
from numaplane.resources.pod import Pod

__all__ = ["HEARTBEAT_ANNOTATION", "STALE_AFTER_ANNOTATION", "StalenessGate", "stale_after_seconds"]

HEARTBEAT_ANNOTATION: Final = "numaplane.io/heartbeat"
STALE_AFTER_ANNOTATION: Final = "numaplane.io/stale-after-seconds"
#: Bounds beyond this (a day) are read as this: a typo must not make a node trusted for years.
MAX_STALE_AFTER_SECONDS: Final = 86_400

log = structlog.get_logger("numaplane.scheduler")


def stale_after_seconds(nrt: NRTEvent) -> int | None:
    """The object's staleness bound in seconds (``None``: none declared, or not a positive integer)."""
    if isinstance(nrt, NodeResourceTopology):
        notes: Any = nrt.metadata.annotations
    else:
        meta = nrt.get("metadata") if isinstance(nrt, Mapping) else None
        notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = notes.get(STALE_AFTER_ANNOTATION) if isinstance(notes, Mapping) else None
    if not isinstance(text, str) or not text.isdigit() or len(text) > 9:
        return None
    value = int(text)
    return min(value, MAX_STALE_AFTER_SECONDS) if value > 0 else None


def _name(nrt: NRTEvent) -> str:
    if isinstance(nrt, NodeResourceTopology):
        return nrt.name
    meta = nrt.get("metadata") if isinstance(nrt, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else "?"


class StalenessGate:
    """An :class:`~numaplane.placement.caches.cachebase.NRTCache` that hides stale nodes of ``inner`` (module docstring).

    State: per node with a declared bound, ``(bound seconds, monotonic time the last write was seen)``;
    the set of nodes stale now; the latest time fed by :meth:`tick`.
    """

    def __init__(self, inner: NRTCache) -> None:
        self.inner = inner
        self._seen: dict[str, tuple[int, float | None]] = {}
        self._stale: dict[str, float] = {}  # node → age (seconds) when found stale
        self._changed: set[str] = set()
        self._now: float | None = None

    def __getattr__(self, name: str) -> Any:  # the wrapped cache's own API (generation, assumed, ...)
        return getattr(self.inner, name)

    # --- reading --------------------------------------------------------------------------------

    def stale(self) -> dict[str, float]:
        """Nodes whose object is stale now → its age (seconds since its last write was seen)."""
        return dict(self._stale)

    def get(self, node: str, pod: Pod | None = None) -> CachedTopology:
        age = self._stale.get(node)
        if age is not None:
            bound = self._seen[node][0]
            problem = (
                f"NodeResourceTopology {node} is stale: not rewritten by its exporter for {age:.0f} s "
                f"(bound {bound} s); the node is not NUMA-judged until its exporter publishes again"
            )
            return CachedTopology(malformed(node, problem), True, 0)
        return self.inner.get(node, pod)

    def drain_changed(self) -> set[str]:
        out = self.inner.drain_changed() | self._changed
        self._changed = set()
        return out

    # --- events ---------------------------------------------------------------------------------

    def nrt_updated(self, nrt: NRTEvent) -> None:
        self.inner.nrt_updated(nrt)
        name = _name(nrt)
        bound = stale_after_seconds(nrt)
        if bound is None:
            self._seen.pop(name, None)
        else:
            # seen "now", which the next tick dates: never the previous tick's time, which would make
            # the write look up to one tick older than it is (and the node stale before its bound)
            self._seen[name] = (bound, None)
        if self._stale.pop(name, None) is not None:
            self._changed.add(name)
            log.info("node topology fresh again", node=name)

    def nrt_deleted(self, node: str) -> None:
        self._forget(node)
        self.inner.nrt_deleted(node)

    def node_deleted(self, node: str) -> None:
        self._forget(node)
        self.inner.node_deleted(node)

    def _forget(self, node: str) -> None:
        self._seen.pop(node, None)
        if self._stale.pop(node, None) is not None:
            self._changed.add(node)

    def tick(self, now: float) -> object:
        """Record the time; mark the nodes whose object was not rewritten within its bound; tick ``inner``."""
        self._now = now
        for node, (bound, seen) in self._seen.items():
            if seen is None:
                self._seen[node] = (bound, now)  # written since the previous tick: from now on
                continue
            age = now - seen
            if age > bound and node not in self._stale:
                self._stale[node] = age
                self._changed.add(node)
                log.warning("node topology stale", node=node, age_seconds=round(age, 1), bound_seconds=bound)
            elif node in self._stale:
                self._stale[node] = age
        return self.inner.tick(now)

    def pod_updated(self, pod: Pod) -> None:
        self.inner.pod_updated(pod)

    def pod_deleted(self, pod: Pod) -> None:
        self.inner.pod_deleted(pod)

    def reserve(self, node: str, pod: Pod) -> None:
        self.inner.reserve(node, pod)

    def unreserve(self, node: str, pod: Pod) -> None:
        self.inner.unreserve(node, pod)

    def post_bind(self, node: str, pod: Pod) -> None:
        self.inner.post_bind(node, pod)

    def node_maybe_overreserved(self, node: str, pod: Pod) -> None:
        if node not in self._stale:
            self.inner.node_maybe_overreserved(node, pod)

    def nodes_maybe_overreserved(self, nodes: Iterable[str], pod: Pod) -> None:
        """:meth:`node_maybe_overreserved` for each of ``nodes``, in one call to the wrapped cache."""
        nodes_maybe_overreserved(self.inner, [n for n in nodes if n not in self._stale], pod)

"""The over-reserve cache as it was before its bookkeeping was optimised, kept as a test oracle.

``test_place_cache_equivalence`` feeds random event streams to this and to
:class:`numaplane.placement.caches.overreserve.OverReserveCache` and requires identical answers.

Verbatim except for two later rules, written here in their plainest form: a resync flush keeps
charging the pods its NRT cannot account for (``recharge_uncovered``, a scan over every pod), and a
fingerprint that matches the node's pods without the terminal ones counts
(``match_without_terminal_pods``); the module docstring of
:mod:`numaplane.placement.caches.overreserve` states both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from numaplane.nrt.fingerprint import ANNOTATION, ATTRIBUTE, ATTRIBUTE_METHOD, check_fingerprint
from numaplane.nrt.model import NodeResourceTopology
from numaplane.placement.caches.cachebase import CachedTopology, NRTEvent, parse_event
from numaplane.placement.caches.overreserve import OverReserveConfig
from numaplane.placement.model.requests import pod_has_exclusive_resources, pod_request
from numaplane.placement.model.view import NodeTopology, node_topology, topology_manager_config
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity


class LatestNRTs:
    """The latest NRT object (and its view) per node, as a live GET would return it."""

    def __init__(self, initial: Iterable[NRTEvent] = ()) -> None:
        self.objects: dict[str, NodeResourceTopology | None] = {}
        self.views: dict[str, NodeTopology] = {}
        self.changed: set[str] = set()
        for nrt in initial:
            self.put(nrt)

    def put(self, nrt: NRTEvent) -> str:
        name, obj, view = parse_event(nrt)
        self.objects[name] = obj
        self.views[name] = view
        self.changed.add(name)
        return name

    def drop(self, node: str) -> None:
        self.objects.pop(node, None)
        self.views.pop(node, None)
        self.changed.add(node)

    def drain(self) -> set[str]:
        out, self.changed = self.changed, set()
        return out


@dataclass(frozen=True, slots=True)
class _Assumed:
    request: Mapping[str, Quantity]
    seq: int
    gone: bool = False  # its pod was deleted since it was reserved


@dataclass(frozen=True)
class ResyncPlan:
    """A resync snapshot: what ``resync_begin`` saw, to be applied by ``resync_commit``."""

    seq: int
    candidates: tuple[str, ...]
    config_changed: tuple[str, ...]
    fetched: Mapping[str, NodeResourceTopology | None] = field(hash=False)
    pods: Mapping[str, tuple[Pod, ...]] = field(hash=False)


@dataclass(frozen=True)
class ResyncReport:
    """Outcome of one resync: flushed nodes, skipped candidates with the reason, the new generation."""

    flushed: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict, hash=False)
    generation: int = 0


class ReferenceOverReserveCache:
    """Over-reserving NRT cache (module docstring). Feed events; call :meth:`tick` with the time."""

    def __init__(self, config: OverReserveConfig, initial: Iterable[NRTEvent] = ()) -> None:
        self.config = config
        self._latest = LatestNRTs()
        self._cached: dict[str, NodeResourceTopology] = {}
        self._views: dict[str, NodeTopology] = {}
        self._assumed: dict[str, dict[str, _Assumed]] = {}
        self._maybe_over: Counter[str] = Counter()
        self._foreign: Counter[str] = Counter()
        self._config_changed: Counter[str] = Counter()
        self._pods: dict[str, Pod] = {}
        self._changed: set[str] = set()
        self._seq = 0
        self._last_resync: float | None = None
        self.generation = 0
        for nrt in initial:
            name, obj, _ = parse_event(nrt)
            self._latest.put(nrt)
            if obj is not None:
                self._flush_one(name, obj, keep_after=None)

    # --- reads -------------------------------------------------------------------------------------

    def get(self, node: str, pod: Pod | None = None) -> CachedTopology:
        if self._foreign[node]:
            return CachedTopology(None, False, self.generation)
        view = self._views.get(node)
        if view is None:
            return CachedTopology(None, True, self.generation)
        assumed = self._assumed.get(node)
        if assumed:
            view = view.charged(a.request for a in assumed.values())
        return CachedTopology(view, True, self.generation)

    def assumed(self, node: str) -> dict[str, Mapping[str, Quantity]]:
        """``namespace/name`` → request of the pods currently charged to ``node``."""
        return {key: a.request for key, a in self._assumed.get(node, {}).items()}

    def dirty(self, node: str) -> dict[str, int]:
        """The node's dirty marks (over-reserved, foreign, config changed) as counts."""
        return {
            "maybe_overreserved": self._maybe_over[node],
            "foreign_pods": self._foreign[node],
            "config_changed": self._config_changed[node],
        }

    def drain_changed(self) -> set[str]:
        out = self._changed | self._latest.drain()
        self._changed = set()
        return out

    # --- events ------------------------------------------------------------------------------------

    def nrt_updated(self, nrt: NRTEvent) -> None:
        name = self._latest.put(nrt)
        obj = self._latest.objects.get(name)
        cached = self._cached.get(name)
        if obj is None:
            if cached is None and self.config.adopt_new_nrts:
                self._views[name] = self._latest.views[name]  # unreadable data: the filter rejects the node
                self._changed.add(name)
            return
        if cached is None:
            if self.config.adopt_new_nrts:
                self._flush_one(name, obj, keep_after=None)
            return
        if self.config.resync_scope == "All" and topology_manager_config(cached) != topology_manager_config(obj):
            self._config_changed[name] += 1

    def nrt_deleted(self, node: str) -> None:
        self._latest.drop(node)

    def node_deleted(self, node: str) -> None:
        """Forget the node entirely (its Node object is gone)."""
        self._latest.drop(node)
        for table in (self._cached, self._views, self._assumed):
            table.pop(node, None)
        for counter in (self._maybe_over, self._foreign, self._config_changed):
            counter.pop(node, None)
        self._changed.add(node)

    def pod_updated(self, pod: Pod) -> None:
        old = self._pods.get(pod.key)
        if old is not None and old.node_name and not pod.node_name:
            self._release(pod.key)
        self._pods[pod.key] = pod
        self._detect_foreign(pod)

    def pod_deleted(self, pod: Pod) -> None:
        self._detect_foreign(pod)
        self._pods.pop(pod.key, None)
        self._release(pod.key)

    def _release(self, key: str) -> None:
        for assumed in self._assumed.values():
            if key in assumed:
                assumed[key] = replace(assumed[key], gone=True)

    def reserve(self, node: str, pod: Pod) -> None:
        if node not in self._cached:
            return
        self._seq += 1
        self._assumed.setdefault(node, {})[pod.key] = _Assumed(pod_request(pod), self._seq)
        self._changed.add(node)

    def unreserve(self, node: str, pod: Pod) -> None:
        assumed = self._assumed.get(node)
        if assumed is not None and assumed.pop(pod.key, None) is not None:
            self._changed.add(node)

    def post_bind(self, node: str, pod: Pod) -> None:
        pass

    def node_maybe_overreserved(self, node: str, pod: Pod) -> None:
        self._maybe_over[node] += 1

    def _detect_foreign(self, pod: Pod) -> None:
        mode = self.config.foreign_pods_detect
        node = pod.node_name
        if mode == "None" or not node or pod.scheduler_name in self.config.profile_names:
            return
        if node not in self._cached:
            return
        if mode == "OnlyExclusiveResources":
            names = self._views[node].resource_names
            if not pod_has_exclusive_resources(pod, names):
                return
        if not self._foreign[node]:
            self._changed.add(node)
        self._foreign[node] += 1

    # --- resync ------------------------------------------------------------------------------------

    def tick(self, now: float) -> ResyncReport | None:
        """Run a resync if ``resync_period_seconds`` passed since the last one (``now``: monotonic s)."""
        if self._last_resync is not None and now - self._last_resync < self.config.resync_period_seconds:
            return None
        self._last_resync = now
        plan = self.resync_begin()
        return None if plan is None else self.resync_commit(plan)

    def _relevant(self, pod: Pod) -> bool:
        if self.config.informer_mode == "Shared":
            return pod.phase == "Running" and bool(pod.node_name)
        return bool(pod.node_name) and pod.phase != "Pending"

    def resync_begin(self) -> ResyncPlan | None:
        """Snapshot candidates, their latest NRTs and the pods per node; ``None`` if nothing is dirty."""
        candidates = sorted(n for n in set(self._maybe_over) | set(self._foreign) if self.dirty_node(n))
        changed = sorted(n for n, count in self._config_changed.items() if count)
        if not candidates and not changed:
            return None
        by_node: dict[str, list[Pod]] = {}
        for pod in self._pods.values():
            if self._relevant(pod):
                by_node.setdefault(pod.node_name, []).append(pod)
        wanted = set(candidates) | set(changed)
        fetched = {n: self._latest.objects.get(n) for n in wanted}
        pods = {n: tuple(by_node[n]) for n in wanted if n in by_node}
        return ResyncPlan(self._seq, tuple(candidates), tuple(changed), fetched, pods)

    def dirty_node(self, node: str) -> bool:
        return bool(self._maybe_over[node] or self._foreign[node])

    def _fingerprinted(self, node: str, nrt: NodeResourceTopology, pods: Iterable[Pod]) -> list[tuple[str, str]]:
        from_attribute = nrt.attribute(ATTRIBUTE) is not None
        method = self.config.resync_method
        exclusive_only = from_attribute and (
            method == "OnlyExclusiveResources"
            or (method == "Autodetect" and nrt.attribute(ATTRIBUTE_METHOD) == "with-exclusive-resources")
        )
        view = self._views.get(node)
        names = view.resource_names if view is not None else node_topology(nrt).resource_names
        return [(p.namespace, p.name) for p in pods if not exclusive_only or pod_has_exclusive_resources(p, names)]

    def resync_commit(self, plan: ResyncPlan) -> ResyncReport:
        """Check fingerprints of the plan's candidates and flush the nodes that match (module docstring)."""
        updates: dict[str, NodeResourceTopology] = {}
        skipped: dict[str, str] = {}
        for node in plan.candidates:
            nrt = plan.fetched.get(node)
            if nrt is None:
                skipped[node] = "no readable NRT object"
                continue
            if node not in plan.pods:
                skipped[node] = "no relevant pods on the node"
                continue
            expected = nrt.attribute(ATTRIBUTE) or nrt.metadata.annotations.get(ANNOTATION)
            if not expected:
                skipped[node] = "NRT carries no pod fingerprint"
                continue
            outcome = check_fingerprint(expected, self._fingerprinted(node, nrt, plan.pods[node]))
            if outcome == "signature_mismatch" and self.config.match_without_terminal_pods:
                active = [p for p in plan.pods[node] if p.phase not in ("Succeeded", "Failed")]
                outcome = check_fingerprint(expected, self._fingerprinted(node, nrt, active))
            if outcome != "ok":
                skipped[node] = f"fingerprint {outcome.replace('_', ' ')}"
                continue
            updates[node] = nrt
        for node in plan.config_changed:
            nrt = plan.fetched.get(node)
            if nrt is not None:
                updates[node] = nrt
                skipped.pop(node, None)
        keep_after = plan.seq if self.config.keep_late_reservations else None
        for node, nrt in sorted(updates.items()):
            covered = {p.key for p in plan.pods.get(node, ())}
            self._flush_one(node, nrt, keep_after=keep_after, covered=covered)
        if updates:
            self.generation += 1
        return ResyncReport(tuple(sorted(updates)), skipped, self.generation)

    def _flush_one(
        self, node: str, nrt: NodeResourceTopology, *, keep_after: int | None, covered: set[str] | None = None
    ) -> None:
        self._cached[node] = nrt
        self._views[node] = node_topology(nrt)
        assumed = self._assumed.get(node, {})
        kept = {k: a for k, a in assumed.items() if keep_after is not None and a.seq > keep_after}
        if covered is not None and self.config.recharge_uncovered:
            # still charged, at the request the informer shows: pods holding resources on the node (bound
            # to it, or reserved on it, not deleted since, and not yet bound; not terminal; with exclusive
            # resources by the NRT's names) that the NRT does not account for (not covered)
            for key, pod in self._pods.items():
                if key in kept or key in covered or pod.phase in ("Succeeded", "Failed"):
                    continue
                if not pod_has_exclusive_resources(pod, self._views[node].resource_names):
                    continue  # holds nothing the zones subtract: no flush could ever cover it
                a = assumed.get(key)
                live = a is not None and not a.gone
                if pod.node_name == node or (not pod.node_name and live):
                    kept[key] = _Assumed(pod_request(pod), a.seq if a is not None and live else 0)
        if kept:
            self._assumed[node] = kept
        else:
            self._assumed.pop(node, None)
        for counter in (self._maybe_over, self._foreign, self._config_changed):
            counter.pop(node, None)
        self._changed.add(node)

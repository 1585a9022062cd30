"""The over-reserving NRT cache (scheduler-nrt.md C.4–C.11), as a pure state machine.

State: the cached NRT per node (replaced only by a resync *flush*), the latest object seen per node
(what a live GET returns), assumed pods per node (``namespace/name`` → the plugin's pod request), three
dirty marks per node (maybe over-reserved, foreign pods, topology manager config changed), the pod
informer's view, and a generation counter bumped by each flush that applies an update.

Rules:

* :meth:`OverReserveCache.get`: a node marked with foreign pods is untrusted (``fresh=False``); a node
  without cached NRT has no data; otherwise the cached view with every assumed pod charged to *every*
  zone (available minus request, clamped at 0; requested resources a zone does not list are ignored).
* :meth:`~OverReserveCache.reserve` records the pod's request (overwriting) only if the node has a
  cached NRT; it does not clear any mark. :meth:`~OverReserveCache.unreserve` forgets it. PostBind and
  pod deletions release nothing: only a flush does.
* :meth:`~OverReserveCache.node_maybe_overreserved` (called on every filter rejection) marks the node.
* Foreign pods: a bound pod whose ``schedulerName`` is not one of ours (with ``OnlyExclusiveResources``:
  and that has exclusive resources on that node) marks its node if the node has a cached NRT.
* Resync (:meth:`~OverReserveCache.tick` every ``resync_period_seconds``, or
  :meth:`~OverReserveCache.resync_begin` + :meth:`~OverReserveCache.resync_commit` to model a
  Reserve landing mid-resync): candidates are nodes marked over-reserved or foreign. A candidate is
  flushed only if its latest NRT exists, the node has at least one relevant pod, the NRT carries a
  fingerprint, and that fingerprint matches the scheduler's pod set for the node. Nodes whose topology
  manager config changed are flushed without the fingerprint check. A flush replaces the cached NRT,
  clears the node's marks and keeps charging only the pods the new NRT cannot account for (below).
* Pod relevance (informer mode): ``Dedicated`` — bound and not ``Pending``; ``Shared`` — ``Running``.
  Fingerprinted pods: all relevant pods, or only those with exclusive resources when the resync
  method says so (``OnlyExclusiveResources``, or ``Autodetect`` with the NRT attribute
  ``nodeTopologyPodsFingerprintMethod=with-exclusive-resources``; the legacy annotation always means all).

What a resync flush keeps charged (the invariant; ``recharge_uncovered=True``, the default):

* The NRT a resync flushes to accounts for exactly the node's relevant pods of the resync's snapshot
  (:attr:`ResyncPlan.pods`, the set its fingerprint was checked against; for a topology manager config
  change, the same set, unchecked). With an exclusive-only fingerprint the relevant pods without
  exclusive resources are not hashed, but they hold nothing the zones' ``available`` subtracts, so they
  count as accounted for too (charging them would charge them forever: no flush could ever cover them).
* After a resync flush of node ``N``, a pod is charged to ``N`` if and only if it holds resources on
  ``N``, is not one of those pods, and has exclusive resources by the new NRT's resource names
  (``pod_has_exclusive_resources``). A pod without any holds nothing the zones' ``available``
  subtracts, in any phase: the exporter never counts it, so no flush could ever cover it. (A
  Burstable pod bound but stuck ``Pending`` — an image that cannot be pulled — was charged its cpu
  request for as long as it stayed so, and the node refused a Guaranteed pod its NRT could hold.)
  A pod holds resources on ``N`` when the pod informer shows it bound to ``N`` and not terminal
  (``Succeeded``/``Failed``), or when it has a reservation on ``N``, the informer shows it not yet
  bound and not terminal, and it was not deleted since the reservation
  (assumed, its binding in flight). So, besides late reservations (next point), what stays charged is:
  reservations of pods still being bound, and pods bound to ``N`` outside the snapshot's relevant set
  (``Pending`` under ``Dedicated``, not ``Running`` under ``Shared``, or bound after the snapshot), ours
  or foreign, each at the :func:`pod_request` of the informer's object (its reservation is kept as it
  is when that is the same request; a pod without one, e.g. a foreign pod, is charged anew).
* Dropped: pods the snapshot covers, terminal pods, reservations of pods bound to another node, and
  reservations of pods the informer does not show: deleted, or never seen (the cache cannot tell these
  apart; a deleted pod's resources are released in the NRT, and keeping the charge would keep it
  forever). A pod is deleted for its reservations when :meth:`~OverReserveCache.pod_deleted` reports
  it, or when the informer shows a bound pod unbound (only a new pod of the same name can be): a later
  pod of that name (a StatefulSet's) is charged only as itself, by the rule, never by that reservation.
* Reservations made after the snapshot (``keep_late_reservations=True``) are kept as they are, whatever
  their pod's state: the snapshot cannot say what the NRT accounts for them. With
  ``keep_late_reservations=False`` they get no such protection and follow the rule above like any other.
* "The informer shows" means the cache's own pod view (:meth:`~OverReserveCache.pod_updated`,
  :meth:`~OverReserveCache.pod_deleted`) when the flush is applied. A pod stays charged until
  :meth:`~OverReserveCache.unreserve` or a later flush that covers it, or that finds it gone or
  terminal; pod deletions and PostBind still release nothing by themselves. An NRT installed for a node
  without cached data (start-up, adoption) charges nothing: such a node holds no reservation and no
  fingerprint was checked.

Bookkeeping that makes the cache cheap at cluster scale (none of it changes an answer):

* the charged view of a node (:meth:`OverReserveCache.get`) is memoised until the node's cached
  view or assumed pods change; a reservation of a pod not yet assumed on the node extends the memo
  by charging only that pod (charging is a per-zone, per-resource fold in reservation order, so
  ``charged(a + [b]) == charged(a).charged([b])``); any other change drops the memo;
* charges are indexed by pod key (the nodes charging it), so a deletion finds its reservations at once;
* the pod informer's view is also indexed by node name (with each key's insertion order), so a
  resync visits only the candidates' pods, in the order a scan of every pod would give; each node's
  pod set has a version (bumped by every change to it), and the node's relevant pods and the outcome
  of its fingerprint check are remembered for (NRT object, pod tuple, view) — the check's only inputs;
* a flush that re-installs the very object already cached, keeps exactly the node's reservations
  (no charge dropped, none added) and finds no foreign mark, leaves :meth:`~OverReserveCache.get`
  unchanged and so does not report the node as changed; new NRT objects of nodes already cached do
  not either (only a flush installs them).

Four deliberate differences from upstream, all switchable in :class:`OverReserveConfig`:

* ``adopt_new_nrts=True``: an NRT for a node without cached data is adopted at once (upstream only
  reads NRTs at start-up and ignores later ones until restart, scheduler-plugins#967). Safe, because
  such a node can hold no reservation.
* ``keep_late_reservations=True``: a flush keeps reservations made after its resync began; upstream
  drops them, although the fetched NRT may not account for those pods yet (a window for over-commit).
* ``recharge_uncovered=True``: a resync flush keeps charging the pods the new NRT cannot account for
  (the invariant above); upstream drops every reservation of the node, so a pod still being bound, or
  bound but not yet admitted by the kubelet, is charged nowhere and the next pod can take its resources.
  With both switches off a flush drops every reservation, as upstream does.
* ``match_without_terminal_pods=True``: when the fingerprint does not match the node's relevant pods
  and some of them are terminal (``Succeeded``/``Failed``, counted by the ``Dedicated`` informer), the
  same pods without the terminal ones are checked too, and a match there counts. An exporter that
  drops terminal pods (numaplane's by default, RTE's ``--exclude-terminal-pods``, a kubelet whose
  podresources ``List`` shows only active pods) hashes exactly that set; a terminal pod holds nothing
  the zones subtract and is never charged after a flush, so that NRT accounts for the node. Upstream
  skips such a node until every terminal pod object is deleted: a pod being deleted turns terminal
  seconds to minutes before its object goes, and a finished Job's pods may stay for hours, while the
  node stays untrusted (``invalid node topology data``) or keeps charging deleted pods.

Why one module over 400 lines: one state machine whose invariants (charges, dirty counts, the flush
plan) span every transition; split by method it would share its private state across modules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from numaplane.nrt.fingerprint import ANNOTATION, ATTRIBUTE, ATTRIBUTE_METHOD, check_fingerprint
from numaplane.nrt.model import NodeResourceTopology
from numaplane.placement.caches.cachebase import CachedTopology, LatestNRTs, NRTEvent, parse_event
from numaplane.placement.model.errors import PlacementConfigError
from numaplane.placement.model.requests import pod_has_exclusive_resources, pod_request
from numaplane.placement.model.view import NodeTopology, node_topology, topology_manager_config
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["OverReserveCache", "OverReserveConfig", "ResyncPlan", "ResyncReport"]

ForeignPodsDetect = Literal["None", "All", "OnlyExclusiveResources"]
ResyncMethod = Literal["Autodetect", "All", "OnlyExclusiveResources"]
InformerMode = Literal["Shared", "Dedicated"]
ResyncScope = Literal["All", "OnlyResources"]


@dataclass(frozen=True, slots=True)
class OverReserveConfig:
    """Plugin args of the over-reserve cache (``cache.*`` and ``cacheResyncPeriodSeconds``): their one
    definition (the scheduler's config holds one of these). ``resync_period_seconds`` in seconds, > 0;
    the four modes are upstream's names (an unknown one raises :class:`PlacementConfigError` naming the
    ``cache.*`` key); the last four booleans are numaplane's deliberate differences from upstream
    (``False`` = upstream)."""

    resync_period_seconds: float = 5.0
    profile_names: frozenset[str] = frozenset({"topo-aware-scheduler"})
    foreign_pods_detect: ForeignPodsDetect = "All"
    resync_method: ResyncMethod = "Autodetect"
    informer_mode: InformerMode = "Dedicated"
    resync_scope: ResyncScope = "All"
    adopt_new_nrts: bool = True
    keep_late_reservations: bool = True
    recharge_uncovered: bool = True
    match_without_terminal_pods: bool = True

    def __post_init__(self) -> None:
        if self.resync_period_seconds <= 0:
            raise PlacementConfigError("the over-reserve cache needs resync_period_seconds > 0")
        for name, value, options in (
            ("cache.foreignPodsDetect", self.foreign_pods_detect, get_args(ForeignPodsDetect)),
            ("cache.resyncMethod", self.resync_method, get_args(ResyncMethod)),
            ("cache.informerMode", self.informer_mode, get_args(InformerMode)),
            ("cache.resyncScope", self.resync_scope, get_args(ResyncScope)),
        ):
            if value not in options:
                raise PlacementConfigError(f"{name} must be one of {', '.join(options)}, not {value!r}")


@dataclass(frozen=True, slots=True)
class _Assumed:
    """A charge: the pod's request, when it was reserved (``seq``; 0 for a charge a flush added), and
    whether its pod was deleted since (``gone``: a pod of the same name is another pod)."""

    request: Mapping[str, Quantity]
    seq: int
    gone: bool = False


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
    """Outcome of one resync: flushed nodes, skipped candidates with the reason, the new generation, and
    per flushed node the ``namespace/name`` keys still charged to it after the flush (only nodes where
    some are; module docstring)."""

    flushed: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict, hash=False)
    generation: int = 0
    charged: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

#: ``covered`` of a flush whose snapshot held every pod the informer shows on the node (no key set built)
EVERY_POD: frozenset[str] = frozenset({"\0every pod on the node"})
Covered = AbstractSet[str]


def _first(item: tuple[int, Pod]) -> int:
    return item[0]


class OverReserveCache:
    """Over-reserving NRT cache (module docstring). Feed events; call :meth:`tick` with the time."""

    def __init__(self, config: OverReserveConfig = OverReserveConfig(), initial: Iterable[NRTEvent] = ()) -> None:
        self.config = config
        self._latest = LatestNRTs()
        self._cached: dict[str, NodeResourceTopology] = {}
        self._views: dict[str, NodeTopology] = {}
        self._assumed: dict[str, dict[str, _Assumed]] = {}
        self._charged_on: dict[str, set[str]] = {}  # key → nodes whose ``_assumed`` holds it
        self._maybe_over: Counter[str] = Counter()
        self._foreign: Counter[str] = Counter()
        self._config_changed: Counter[str] = Counter()
        self._pods: dict[str, Pod] = {}
        self._pod_order: dict[str, int] = {}  # key → position in ``_pods`` (insertion counter)
        self._pod_counter = 0
        self._by_node: dict[str, dict[str, Pod]] = {}  # node name → key → pod (every pod naming it)
        self._pod_version: Counter[str] = Counter()  # node name → changes to its pods
        self._relevant_memo: dict[str, tuple[int, tuple[Pod, ...]]] = {}  # node → (version, relevant pods)
        self._check_memo: dict[str, tuple[NodeResourceTopology, tuple[Pod, ...], NodeTopology | None, str]] = {}
        self._charged: dict[str, NodeTopology] = {}  # node → cached view with every assumed pod charged
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
        if self._foreign.get(node):  # not ``[node]``: a Counter's missing key is a Python-level call
            return CachedTopology(None, False, self.generation)
        view = self._views.get(node)
        if view is None:
            return CachedTopology(None, True, self.generation)
        assumed = self._assumed.get(node)
        if assumed:
            charged = self._charged.get(node)
            if charged is None:
                charged = self._charged[node] = view.charged(a.request for a in assumed.values())
            view = charged
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
        # a new object of a node changes nothing :meth:`get` returns until a flush installs it
        self._latest.drain()
        out, self._changed = self._changed, set()
        return out

    # --- events ------------------------------------------------------------------------------------

    def nrt_updated(self, nrt: NRTEvent) -> None:
        name = self._latest.put(nrt)
        obj = self._latest.objects.get(name)
        cached = self._cached.get(name)
        if obj is None:
            if cached is None and self.config.adopt_new_nrts:
                view = self._latest.view(name)
                assert view is not None  # the unreadable object's problem view: the filter rejects it
                self._views[name] = view
                self._charged.pop(name, None)
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
        for key in self._assumed.get(node, {}):
            self._uncharge(key, node)
        for table in (self._cached, self._views, self._assumed, self._charged, self._check_memo):
            table.pop(node, None)
        for counter in (self._maybe_over, self._foreign, self._config_changed):
            counter.pop(node, None)
        self._changed.add(node)

    def pod_updated(self, pod: Pod) -> None:
        key = pod.key
        old = self._pods.get(key)
        if old is None:
            self._pod_counter += 1
            self._pod_order[key] = self._pod_counter
        elif old.node_name != pod.node_name:
            self._unindex(key, old.node_name)
            if not pod.node_name:
                self._release(key)  # a bound pod is never unbound: another pod of that name
        self._pods[key] = pod
        if pod.node_name:
            self._by_node.setdefault(pod.node_name, {})[key] = pod
            self._pod_version[pod.node_name] += 1
        self._detect_foreign(pod)

    def pod_deleted(self, pod: Pod) -> None:
        self._detect_foreign(pod)
        key = pod.key
        old = self._pods.pop(key, None)
        if old is not None:
            del self._pod_order[key]
            self._unindex(key, old.node_name)
        self._release(key)

    def _unindex(self, key: str, node: str) -> None:
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(key, None)
            self._pod_version[node] += 1
            if not pods:
                del self._by_node[node]

    def _release(self, key: str) -> None:
        """The pod of ``key`` is gone: its charges stay until a flush, which must not take a later pod of
        the same name for it (``_Assumed.gone``; same request, so every charged view still holds)."""
        for node in self._charged_on.get(key, ()):
            assumed = self._assumed[node]
            if not assumed[key].gone:
                assumed[key] = replace(assumed[key], gone=True)

    def _uncharge(self, key: str, node: str) -> None:
        """Forget that ``node`` charges ``key`` (its ``_assumed`` entry is gone)."""
        nodes = self._charged_on.get(key)
        if nodes is not None:
            nodes.discard(node)
            if not nodes:
                del self._charged_on[key]

    def reserve(self, node: str, pod: Pod) -> None:
        if node not in self._cached:
            return
        self._seq += 1
        key = pod.key
        request = pod_request(pod)
        assumed = self._assumed.setdefault(node, {})
        charged = self._charged.get(node)
        if charged is not None and key not in assumed:
            self._charged[node] = charged.charged((request,))  # appended last: extend the fold
        else:
            self._charged.pop(node, None)  # an overwrite keeps its place in the order: recompute
        assumed[key] = _Assumed(request, self._seq)
        self._charged_on.setdefault(key, set()).add(node)
        self._changed.add(node)

    def unreserve(self, node: str, pod: Pod) -> None:
        assumed = self._assumed.get(node)
        if assumed is not None and assumed.pop(pod.key, None) is not None:
            self._uncharge(pod.key, node)
            self._charged.pop(node, None)
            self._changed.add(node)

    def post_bind(self, node: str, pod: Pod) -> None:
        pass

    def node_maybe_overreserved(self, node: str, pod: Pod) -> None:
        self._maybe_over[node] += 1

    def nodes_maybe_overreserved(self, nodes: Iterable[str], pod: Pod) -> None:
        """:meth:`node_maybe_overreserved` for each of ``nodes`` (repeats count), in one call."""
        self._maybe_over.update(nodes)

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
        wanted = set(candidates) | set(changed)
        fetched = {n: self._latest.objects.get(n) for n in wanted}
        pods: dict[str, tuple[Pod, ...]] = {}
        for n in wanted:
            relevant = self._relevant_pods(n)
            if relevant:
                pods[n] = relevant
        return ResyncPlan(self._seq, tuple(candidates), tuple(changed), fetched, pods)

    def _relevant_pods(self, node: str) -> tuple[Pod, ...]:
        """The node's relevant pods in the order of a scan over every pod (kept per pod-set version)."""
        version = self._pod_version[node]
        memo = self._relevant_memo.get(node)
        if memo is not None and memo[0] == version:
            return memo[1]
        order = self._pod_order
        relevant = [(order[k], p) for k, p in self._by_node.get(node, {}).items() if self._relevant(p)]
        relevant.sort(key=_first)
        pods = tuple(p for _, p in relevant)
        self._relevant_memo[node] = (version, pods)
        return pods

    def dirty_node(self, node: str) -> bool:
        return bool(self._maybe_over[node] or self._foreign[node])

    def _fingerprinted(self, node: str, nrt: NodeResourceTopology, pods: Iterable[Pod]) -> list[tuple[str, str]]:
        from_attribute = nrt.attribute(ATTRIBUTE) is not None
        method = self.config.resync_method
        exclusive_only = from_attribute and (
            method == "OnlyExclusiveResources"
            or (method == "Autodetect" and nrt.attribute(ATTRIBUTE_METHOD) == "with-exclusive-resources")
        )
        if not exclusive_only:
            return [(p.namespace, p.name) for p in pods]
        view = self._views.get(node)
        names = view.resource_names if view is not None else node_topology(nrt).resource_names
        return [(p.namespace, p.name) for p in pods if pod_has_exclusive_resources(p, names)]

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
            outcome = self._check(node, nrt, expected, plan.pods[node])
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
        charged: dict[str, tuple[str, ...]] = {}
        for node, nrt in sorted(updates.items()):
            self._flush_one(node, nrt, keep_after=keep_after, covered=self._covered(node, plan.pods.get(node, ())))
            if self._assumed.get(node):
                charged[node] = tuple(self._assumed[node])
        if updates:
            self.generation += 1
        return ResyncReport(tuple(sorted(updates)), skipped, self.generation, charged)

    def _check(self, node: str, nrt: NodeResourceTopology, expected: str, pods: tuple[Pod, ...]) -> str:
        """``check_fingerprint`` of the node's pods against ``expected`` (an attribute of ``nrt``),
        remembered while the object, the pod tuple and the node's view are the same objects."""
        view = self._views.get(node)
        memo = self._check_memo.get(node)
        if memo is not None and memo[0] is nrt and memo[1] is pods and memo[2] is view:
            return memo[3]
        outcome = check_fingerprint(expected, self._fingerprinted(node, nrt, pods))
        if outcome == "signature_mismatch" and self.config.match_without_terminal_pods:
            active = [p for p in pods if p.phase not in TERMINAL_PHASES]
            if len(active) < len(pods):
                outcome = check_fingerprint(expected, self._fingerprinted(node, nrt, active))
        self._check_memo[node] = (nrt, pods, view, outcome)
        return outcome

    def _flush_one(
        self,
        node: str,
        nrt: NodeResourceTopology,
        *,
        keep_after: int | None,
        covered: Covered | None = None,
    ) -> None:
        """Install ``nrt`` as the node's cached NRT and clear its marks.

        ``covered``: the keys of the pods the NRT accounts for (a resync flush); the node then stays
        charged for the pods :meth:`_still_charged` names. ``None`` (start-up, adoption): nothing but
        late reservations is kept. ``keep_after``: reservations with a later ``seq`` are kept as they are.
        """
        assumed = self._assumed.get(node) or {}
        view: NodeTopology | None = None

        def new_view() -> NodeTopology:
            """``nrt``'s view, built at most once per flush (for the charges' resource names, to install)."""
            nonlocal view
            if view is None:
                view = self._latest.view_of(node, nrt)
            return view

        kept = self._still_charged(node, new_view, assumed, keep_after, covered)
        same_charges = len(kept) == len(assumed) and all(assumed.get(k) is a for k, a in kept.items())
        unchanged = self._cached.get(node) is nrt and same_charges and not self._foreign[node]
        if not unchanged:
            self._cached[node] = nrt
            self._views[node] = new_view()
            self._charged.pop(node, None)
            self._changed.add(node)
        for key in assumed.keys() - kept.keys():
            self._uncharge(key, node)
        for key in kept.keys() - assumed.keys():
            self._charged_on.setdefault(key, set()).add(node)
        if kept:
            self._assumed[node] = kept
        elif node in self._assumed:
            del self._assumed[node]
        self._maybe_over.pop(node, None)
        self._foreign.pop(node, None)
        self._config_changed.pop(node, None)

    def _covered(self, node: str, pods: tuple[Pod, ...]) -> Covered:
        """The keys of ``pods`` (the snapshot's relevant pods of ``node``), or :data:`EVERY_POD` when
        they are every pod the informer shows on the node now: the node's pod set is unchanged since
        the snapshot (same version, same memoised tuple) and every pod of it is relevant."""
        memo = self._relevant_memo.get(node)
        if (
            memo is not None
            and memo[1] is pods
            and memo[0] == self._pod_version[node]
            and len(pods) == len(self._by_node.get(node, ()))
        ):
            return EVERY_POD
        return frozenset(p.key for p in pods)

    def _still_charged(
        self,
        node: str,
        new_view: Callable[[], NodeTopology],
        assumed: Mapping[str, _Assumed],
        keep_after: int | None,
        covered: Covered | None,
    ) -> dict[str, _Assumed]:
        """The charges of ``node`` that survive a flush (module docstring, "What a resync flush keeps
        charged"): late reservations as they are; then, on a resync flush with ``recharge_uncovered``,
        every pod that holds resources on the node, is not in ``covered`` and has exclusive resources by
        the resource names of the view ``new_view`` gives (the flushed NRT's, built once), charged its
        request as the informer shows it (its reservation object is kept when that request is the same)."""
        accounted: Covered | None = covered if self.config.recharge_uncovered else None
        if accounted is EVERY_POD:
            accounted = self._by_node.get(node, {}).keys()  # every pod on the node is covered: no scan
        kept: dict[str, _Assumed] = {}

        def holds_zone_resources(pod: Pod) -> bool:
            return pod_has_exclusive_resources(pod, new_view().resource_names)

        for key, a in assumed.items():
            if keep_after is not None and a.seq > keep_after:
                kept[key] = a
                continue
            if accounted is None or key in accounted or a.gone:
                continue
            pod = self._pods.get(key)
            if pod is not None and not pod.node_name and pod.phase not in TERMINAL_PHASES and holds_zone_resources(pod):
                kept[key] = self._recharged(a, pod)  # assumed, its binding in flight
        if accounted is not None and covered is not EVERY_POD:
            for key, pod in self._by_node.get(node, {}).items():
                if (
                    key not in kept
                    and key not in accounted
                    and pod.phase not in TERMINAL_PHASES
                    and holds_zone_resources(pod)
                ):
                    kept[key] = self._recharged(assumed.get(key), pod)  # bound here, not accounted for
        return kept

    @staticmethod
    def _recharged(charge: _Assumed | None, pod: Pod) -> _Assumed:
        """``pod``'s charge after a flush: ``charge`` itself if it is this pod's with the same request,
        else a new one (``seq`` 0: no later resync takes it for a late reservation)."""
        request = pod_request(pod)
        if charge is not None and not charge.gone and charge.request == request:
            return charge
        return _Assumed(request, 0 if charge is None or charge.gone else charge.seq)

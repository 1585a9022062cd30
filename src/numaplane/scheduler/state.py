"""The scheduler's state, shared by the extender and the standalone scheduler: cluster → NRT cache → NUMA arrays.

:class:`SchedulerState` is fed the objects the informers see (Nodes, NodeResourceTopologies, Pods, as
plain dicts) and the scheduler's own decisions (assume, forget, bound). It keeps:

* the NRT cache of the configured mode (:meth:`SchedulerConfig.make_cache`): NRT objects, pod events
  (foreign pods, fingerprints), reservations; behind :class:`~numaplane.scheduler.staleness.StalenessGate`
  :attr:`SchedulerState.gate`, which hides the nodes whose exporter stopped rewriting their object
  (:meth:`tick` feeds it the time; the cycle and the verdicts read the cache through it);
* :attr:`SchedulerState.cycle`, the one scheduling cycle (:class:`~numaplane.placement.cycle.Cycle`,
  the class the simulator drives) over the nodes whose Node object parses: its node set follows the
  informer (:meth:`Cycle.set_node` / :meth:`Cycle.remove_node`), its NodeResourcesFit usage is
  :meth:`NodeUsage.used` / :meth:`NodeUsage.count` (usage changes are written when the next decision
  asks: :meth:`NodeUsage.drain_changed`), its NUMA rows are reloaded from the cache before every
  evaluation;
* per-node usage of bound and assumed pods (:class:`~numaplane.scheduler.usage.NodeUsage`) and the
  parsed Node objects (:class:`~numaplane.scheduler.records.NodeRecord`), with the nodes whose
  node-level predicates can reject a pod without node constraints.

Decisions (the standalone one is :func:`numaplane.scheduler.decision.decide`, a driver of the cycle):

* :meth:`SchedulerState.node_mask` — kube-scheduler's node-level predicates (NodeUnschedulable,
  NodeName, TaintToleration, NodeAffinity), the cycle's input mask: they run per node in Python,
  only where they can fail (:func:`~numaplane.placement.explain.predicates.has_node_constraints`);
* :meth:`SchedulerState.evaluate` — the cycle's NUMA verdicts and scores of one pod over the nodes
  the requeue check, a ``FitError`` message or a conformance case names, read from one evaluation
  (:meth:`Cycle.verdicts <numaplane.placement.cycle.Cycle.verdicts>`), with the cache feedback upstream
  gives: a candidate rejected on trusted data is reported with ``node_maybe_overreserved``;
* :meth:`SchedulerState.basic_filter` / :meth:`SchedulerState.fit_scores` — the basic predicates
  (NodeResourcesFit from the cycle's fit arrays, the rest :meth:`~SchedulerState.node_mask`) and the
  LeastAllocated scores by node name;
* per node (:attr:`SchedulerState.verdicts`, :mod:`~numaplane.scheduler.verdicts`): the reasons only,
  asked when a rejection is reported (that module's docstring says why they are per node).

Learning placements: a pod of one of our scheduler names that the informer shows going from unbound to
bound, and that this process did not assume itself (another replica bound it, or kube-scheduler bound it
without delegating the bind to the extender), is reserved in the cache then, so the over-reserve cache
charges it until a flush whose NRT accounts for it. Pods already bound when the informer first lists them
are not charged (the exporter's data accounts for them) unless a flush finds them outside the NRT's pod
set (still ``Pending``): the cache then charges them (its flush invariant).

What lives where: here the state and its bookkeeping (informer input, assume/forget/bound, cache
resync, the cycle's node set and usage) and the verdicts over many nodes; the records kept per node
and the object keys in :mod:`~numaplane.scheduler.records`; the per-node verdicts, their
explanations and :class:`~numaplane.scheduler.verdicts.NumaEvaluation` in
:mod:`~numaplane.scheduler.verdicts`.

Not thread-safe: call from one event loop. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from numaplane.placement.cycle import Cycle, NumaSetup
from numaplane.placement.explain.predicates import (
    BasicNode,
    has_node_constraints,
    is_restricted,
    node_reasons,
    parse_node,
)
from numaplane.placement.model.errors import NodeDataError
from numaplane.placement.model.node import NodeInfo as NumaNode
from numaplane.placement.model.node import node_info
from numaplane.resources.errors import ResourceError
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.records import TERMINAL_PHASES, NodeRecord, object_name, pod_key
from numaplane.scheduler.staleness import StalenessGate
from numaplane.scheduler.usage import NodeUsage
from numaplane.scheduler.verdicts import NodeVerdicts, NumaEvaluation

__all__ = ["BasicVerdicts", "SchedulerState"]

log = structlog.get_logger("numaplane.scheduler")


@dataclass(frozen=True)
class BasicVerdicts:
    """The basic predicates of one pod over every node: the nodes that pass and those that fail, each
    in node name order (a node without a usable Node object fails)."""

    passed: list[str]
    failed: list[str]


#: Node masks of unconstrained pods kept at once (:meth:`SchedulerState.node_mask`), by tolerations.
KEPT_NODE_MASKS = 64


def _tolerations_key(pod: Pod) -> str | None:
    """The pod's tolerations as a canonical text (``None`` when they cannot be written as JSON)."""
    spec = (pod.raw.get("spec") or {}) if pod.raw else {}
    tolerations = spec.get("tolerations") if isinstance(spec, Mapping) else None
    try:
        return json.dumps(tolerations or [], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


class SchedulerState:
    """Cluster state, NRT cache and pipeline of one scheduler process (module docstring)."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.cache = config.make_cache()
        #: The cache as the decisions read it: stale nodes hidden (:mod:`~numaplane.scheduler.staleness`).
        #: NRT events and the time go through it; the rest may go to :attr:`cache` directly.
        self.gate = StalenessGate(self.cache)
        #: The scheduling cycle (its nodes: those whose Node object parses; module docstring).
        # One zone slot to start: the pipeline's arrays grow to the most zones a node has, so no slot
        # stays empty on every row (5,000 4-zone nodes in the default 8 slots: half the cells unused).
        numa = NumaSetup(self.gate, config.strategy, config.filter_options, zones=1)
        self.cycle = Cycle([], [], {}, config.selection, numa)
        self.nodes: dict[str, NodeRecord] = {}
        self.pods: dict[str, Pod] = {}
        self.usage = NodeUsage()
        self._restricted: set[str] = set()  # nodes whose node-level predicates can reject any pod
        # node_mask of pods without node constraints, by their tolerations (all such a mask reads of
        # the pod); emptied on every Node change (the only way the masks or the positions change)
        self._masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._reserved: set[str] = set()
        self._names = frozenset(config.scheduler_names)
        # why the last resync left each dirty node unflushed (logged at info when it changes)
        self._resync_skipped: dict[str, str] = {}
        #: Per-node verdicts and explanations over this state (reads it, changes nothing).
        self.verdicts = NodeVerdicts(self.cycle, self.nodes, self.usage)

    # --- informer input ----------------------------------------------------------------------------

    def node_upserted(self, doc: Mapping[str, Any]) -> None:
        """A Node was added or changed."""
        self.node_record(doc)

    def node_record(self, doc: Mapping[str, Any]) -> NodeRecord | None:
        """Store a Node (added or changed); returns its record (``None`` if it has no name)."""
        name = object_name(doc)
        if not name:
            return None
        self._masks.clear()
        numa: NumaNode | None = None
        basic: BasicNode | None = None
        problem: str | None = None
        try:
            numa = node_info(doc)
            basic = parse_node(doc)
        except (NodeDataError, ResourceError, AttributeError, TypeError, ValueError) as exc:
            numa, basic, problem = None, None, f"malformed node object: {exc}"
            log.warning("node ignored", node=name, reason=problem)
        record = NodeRecord(name, doc, numa, basic, problem)
        old = self.nodes.get(name)
        self.nodes[name] = record
        if numa is None or basic is None:
            self.cycle.remove_node(name)
            self._restricted.discard(name)
            return record
        old_basic = old.basic if old is not None else None
        known = name in self.cycle
        changed = old_basic is None or old_basic.allocatable != basic.allocatable
        self.cycle.set_node(name, numa, basic.allocatable if changed or not known else None)
        if not known:
            self.cycle.set_usage(name, self.usage.used(name), self.usage.count(name))
        if is_restricted(basic):
            self._restricted.add(name)
        else:
            self._restricted.discard(name)
        return record

    def node_deleted(self, doc: Mapping[str, Any]) -> None:
        name = object_name(doc)
        self._masks.clear()
        self.nodes.pop(name, None)
        self._restricted.discard(name)
        self.cycle.remove_node(name)
        self.gate.node_deleted(name)
        self.usage.drop_node(name)

    def nrt_upserted(self, doc: Mapping[str, Any]) -> None:
        """A NodeResourceTopology was added or changed (malformed objects make the node fail)."""
        self.gate.nrt_updated(doc)

    def nrt_deleted(self, doc: Mapping[str, Any]) -> None:
        self.gate.nrt_deleted(object_name(doc))

    def pod_upserted(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Pod | None:
        """A Pod was added (``old`` is ``None``) or changed; returns it parsed (``None`` if malformed)."""
        key = pod_key(new)
        try:
            pod = parse_pod(new)
        except (ResourceError, AttributeError, TypeError, ValueError) as exc:
            log.warning("pod ignored: malformed", pod=key, reason=str(exc))
            self.pods.pop(key, None)
            if not self.usage.is_assumed(key):
                self.usage.drop(key)
            return None
        self.pods[key] = pod
        self.cache.pod_updated(pod)
        if pod.node_name and pod.phase not in TERMINAL_PHASES:
            self.usage.put(key, pod.node_name, pod.effective_requests(), assumed=False)
        elif pod.phase in TERMINAL_PHASES or not self.usage.is_assumed(key):
            self.usage.drop(key)
        old_spec = old.get("spec") if old is not None else None
        was_bound = isinstance(old_spec, Mapping) and bool(old_spec.get("nodeName"))
        if (
            old is not None
            and not was_bound
            and pod.node_name
            and pod.scheduler_name in self._names
            and key not in self._reserved
        ):
            # Bound by someone else under one of our names: charge it now (module docstring).
            self.cache.reserve(pod.node_name, pod)
            self.cache.post_bind(pod.node_name, pod)
            self._reserved.add(key)
            log.info("learned placement", pod=key, node=pod.node_name)
        return pod

    def pod_deleted(self, doc: Mapping[str, Any]) -> None:
        key = pod_key(doc)
        pod = self.pods.pop(key, None)
        if pod is None:
            try:
                pod = parse_pod(doc)
            except (ResourceError, AttributeError, TypeError, ValueError):
                pod = None
        if pod is not None:
            self.cache.pod_deleted(pod)
        self.usage.drop(key)
        self._reserved.discard(key)

    # --- scheduler decisions -----------------------------------------------------------------------

    def assume(self, pod: Pod, node: str) -> bool:
        """The pod is going to ``node`` (before the binding is sent): reserve it and charge its usage.

        Returns False, changing nothing, when the pod is already reserved (bound or binding through us,
        or learned): a repeated bind request must not disturb, nor later undo, that reservation.
        """
        if pod.key in self._reserved:
            return False
        self.cache.reserve(node, pod)
        self.usage.put(pod.key, node, pod.effective_requests(), assumed=True)
        self._reserved.add(pod.key)
        return True

    def forget(self, pod: Pod, node: str) -> None:
        """The binding failed: undo an :meth:`assume` that returned True."""
        self.cache.unreserve(node, pod)
        if self.usage.is_assumed(pod.key):
            self.usage.drop(pod.key)
        self._reserved.discard(pod.key)

    def bound(self, pod: Pod, node: str) -> None:
        """The binding succeeded (upstream PostBind)."""
        self.cache.post_bind(node, pod)

    def tick(self, now: float) -> tuple[str, ...]:
        """Let the cache resync if its period elapsed (``now``: monotonic seconds); the flushed nodes.

        A flush keeps charging the pods its NRT cannot account for (pods still being bound, pods bound
        but not yet admitted): the over-reserve cache does that itself (``numaplane.placement.caches.overreserve``).
        """
        report = self.gate.tick(now)
        flushed = tuple(getattr(report, "flushed", ()) or ())
        skipped = getattr(report, "skipped", None)
        charged = getattr(report, "charged", None)
        if flushed or skipped:
            log.debug(
                "cache resync",
                flushed=list(flushed),
                skipped=dict(skipped or {}),
                still_charged=dict(charged or {}),
                generation=getattr(report, "generation", None),
            )
        if report is not None:
            now_skipped = dict(skipped or {})
            changed = {n: why for n, why in now_skipped.items() if self._resync_skipped.get(n) != why}
            if changed:  # a node stays untrusted or charged until a resync flushes it: say why, once
                log.info("cache resync left nodes unflushed", nodes=changed)
            self._resync_skipped = now_skipped
        return flushed

    # --- evaluation --------------------------------------------------------------------------------

    def sync(self) -> None:
        """Refresh the cycle's NUMA rows of the nodes whose cached view changed, and its usage."""
        self.cycle.sync()
        self._usage_synced()

    def evaluate(
        self, pod: Pod, candidates: Iterable[str] | None = None, *, mark: bool = True, preemption: bool = False
    ) -> NumaEvaluation:
        """NUMA filter and score of ``pod`` over ``candidates`` (default: every known node).

        ``mark=False`` skips the filter's cache feedback (for scoring-only calls such as prioritize);
        ``preemption=True`` also fills :attr:`NumaEvaluation.preemptible`.
        """
        names = list(self.nodes) if candidates is None else list(candidates)
        v = self.cycle.verdicts(pod, preemption=preemption)  # the one evaluation every answer below reads
        rows, feasible, row_scores, row_codes, emptied = v.index, v.feasible, v.scores, v.codes, v.preemptible
        trusted = v.trusted if mark else None
        scores: dict[str, int] = {}
        rejected_scores: dict[str, int] = {}
        failed: list[str] = []
        unknown: list[str] = []
        codes: dict[str, int] = {}
        preemptible: set[str] = set()
        for name in names:
            row = rows.get(name)
            if row is None:
                record = self.nodes.get(name)
                (failed if record is not None else unknown).append(name)
                continue
            if feasible[row]:
                scores[name] = int(row_scores[row])
                continue
            failed.append(name)
            rejected_scores[name] = int(row_scores[row])
            codes[name] = int(row_codes[row])  # the reasons come from the arrays that took the decision
            if emptied is not None and emptied[row]:
                preemptible.add(name)
            if trusted is not None and trusted[row]:  # a rejection on trusted data: maybe over-reserved
                self.cache.node_maybe_overreserved(name, pod)
        return NumaEvaluation(
            pod, scores, failed, unknown, self.verdicts, frozenset(preemptible), codes, rejected_scores
        )

    def unusable_node(self, name: str) -> str | None:
        """Why the Node object of ``name`` is unusable (the cycle holds no row for it), as the NUMA
        filter reports it; ``None`` for a node the state does not know."""
        record = self.nodes.get(name)
        if record is None:
            return None
        return record.problem or "malformed node object"

    def _usage_synced(self) -> None:
        """Write every usage change to the cycle's fit arrays (module docstring)."""
        usage = self.usage
        for name in usage.drain_changed():
            self.cycle.set_usage(name, usage.used(name), usage.count(name))

    def node_mask(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """Whether kube-scheduler's node-level predicates
        (:func:`~numaplane.placement.explain.predicates.node_reasons`) let ``pod`` onto each node of the cycle,
        by position: asked on every node, or only on the restricted ones for a pod without node
        constraints (the others cannot reject it). Writes pending usage changes to the cycle.

        For a pod without node constraints the predicates read only its tolerations: its mask is kept
        by those (at most :data:`KEPT_NODE_MASKS`) until a Node changes, so the restricted nodes
        (cordoned, tainted) are not asked again for every such pod."""
        self._usage_synced()
        cycle = self.cycle
        constrained = has_node_constraints(pod)
        key = None if constrained else _tolerations_key(pod)
        if key is not None:
            kept = self._masks.get(key)
            if kept is not None:
                return kept.copy()
        passed = np.ones(len(cycle.names), dtype=np.bool_)
        ask = cycle.names if constrained else sorted(self._restricted)
        for name in ask:
            basic = self.nodes[name].basic
            if basic is not None and node_reasons(pod, basic):
                position = cycle.position(name)
                if position is not None:
                    passed[position] = False
        if key is not None:
            if len(self._masks) >= KEPT_NODE_MASKS:
                self._masks.clear()
            self._masks[key] = passed.copy()
        return passed

    def basic_filter(self, pod: Pod) -> BasicVerdicts:
        """The basic predicates of ``pod`` on every node: exactly the nodes where :meth:`basic_reasons`
        is empty pass (NodeResourcesFit from the cycle's fit arrays, the rest :meth:`node_mask`)."""
        passed_mask = self.node_mask(pod) & self.cycle.fits(pod)
        passed = {name for name, ok in zip(self.cycle.names, passed_mask.tolist(), strict=True) if ok}
        names = sorted(self.nodes)
        return BasicVerdicts([n for n in names if n in passed], [n for n in names if n not in passed])

    def fit_scores(self, pod: Pod, names: Sequence[str]) -> list[int]:
        """:meth:`fit_score` of ``pod`` on each of ``names`` (the same values, from the fit arrays)."""
        self._usage_synced()
        fit = self.cycle.fit
        if not fit.scores_bounded(pod):  # scores beyond 0..100 (negative amounts): exact per node
            return [self.verdicts.fit_score(pod, name) for name in names]
        rows = [fit.row(name) for name in names]
        known = np.array([r for r in rows if r is not None], dtype=np.intp)
        scores = iter(fit.scores(pod, known).tolist() if len(known) else [])
        return [0 if r is None else next(scores) for r in rows]

    def is_ours(self, pod: Pod) -> bool:
        """Whether ``pod.spec.schedulerName`` is one of our scheduler names."""
        return pod.scheduler_name in self._names

    def node_names(self) -> Sequence[str]:
        """Every known node name, sorted."""
        return sorted(self.nodes)

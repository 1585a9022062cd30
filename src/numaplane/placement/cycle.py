"""One scheduling cycle of one pod over many nodes: the node-selection rule the scheduler and the simulator share.

The rule (:class:`SelectionRules`), as kube-scheduler's framework applies it with two score plugins:

* every feasible node gets ``total = numa_weight * NUMA score + fit_weight * LeastAllocated score``
  (NodeResourceTopologyMatch, 0..100, and NodeResourcesFit with kube-scheduler's non-zero defaults,
  0..100; weights are the plugins' weights in the profile, integers ``>= 0``);
* the highest total wins; ties go to the lowest node name (``tie_break="name"``, the standalone
  scheduler's rule) or to the first node in search order (``"search-order"``, the simulator's stand-in
  for kube-scheduler's own default scheduler, which picks among ties at random). :meth:`Cycle.select`
  applies either to array rows (the tests state the name rule over names and check both agree);
* which nodes are filtered at all follows ``percentage_of_nodes_to_score``
  (:mod:`numaplane.placement.arrays.sampling`): from a rotating start, window by window, until enough feasible
  nodes are found (every node below 100 nodes or at 100 %). Only the nodes the search processed report
  NUMA rejections to the cache; only the nodes it found are scored.

:class:`Cycle` is that one cycle, and owns the state such a decision reads: the NodeResourcesFit
arrays (:class:`~numaplane.placement.arrays.fit.FitArrays`) and, for a NUMA-aware scheduler, the NRT cache and
the vectorised :class:`~numaplane.placement.arrays.pipeline.Pipeline` refreshed from it before every decision.
Its node set is mutable state (:meth:`Cycle.set_node`, :meth:`Cycle.remove_node`, :meth:`Cycle.set_usage`).
The simulator drives it over a fixed node set; the standalone scheduler
(:func:`numaplane.scheduler.decision.decide`) over the informers' nodes, with the result of
kube-scheduler's node-level predicates (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
per node in Python) as an input mask of :meth:`Cycle.candidates`; the extender, whose filter and
score kube-scheduler asks for its own candidate nodes, reads the same arrays' verdicts in one call per
verb (:meth:`Cycle.filter`, :meth:`Cycle.prioritize`); the scheduler state's other askers (the requeue
check, ``FitError`` messages, the conformance kinds) read every node's verdict, score, reason code,
trust and eviction answer from one value (:meth:`Cycle.verdicts`, :class:`NumaVerdicts`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Literal

import numpy as np
import numpy.typing as npt

from numaplane.placement.arrays.fit import FitArrays
from numaplane.placement.arrays.pipeline import Evaluation, Pipeline
from numaplane.placement.arrays.reasons import EXPLAIN, FITS, REASON_MESSAGES, numa_verdicts, reason_codes
from numaplane.placement.arrays.sampling import first_window, num_feasible_nodes_to_find, search
from numaplane.placement.caches.cache import nodes_maybe_overreserved
from numaplane.placement.caches.cachebase import NRTCache
from numaplane.placement.explain.filter import DEFAULT_OPTIONS, FilterOptions
from numaplane.placement.explain.filter import filter as numa_filter
from numaplane.placement.explain.score import score as numa_score
from numaplane.placement.model.node import NodeInfo
from numaplane.placement.model.result import ALIGN_REASONS, MSG_UNEXPLAINED, Fit, Reject
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.placement.model.view import NodeTopology, NUMAZone
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = [
    "EXPLAIN",
    "FITS",
    "MIN_WINDOW",
    "REASON_MESSAGES",
    "Candidates",
    "Cycle",
    "Evaluation",
    "FilterAnswer",
    "NumaSetup",
    "NumaVerdicts",
    "SelectionRules",
    "numa_verdicts",
    "reason_codes",
]

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
Objects = npt.NDArray[np.object_]

#: Nodes per verdict window of a cycle's search (a window usually ends the search).
MIN_WINDOW = 256


@dataclass(frozen=True)
class SelectionRules:
    """How a cycle picks a node (module docstring). ``percentage_of_nodes_to_score``: kube-scheduler's
    setting, 0 = its adaptive default, 100 = every node."""

    numa_weight: int = 1
    fit_weight: int = 1
    percentage_of_nodes_to_score: int = 100
    tie_break: Literal["name", "search-order"] = "name"

    def __post_init__(self) -> None:
        if self.numa_weight < 0 or self.fit_weight < 0:
            raise ValueError("score weights must be >= 0")
        if not 0 <= self.percentage_of_nodes_to_score <= 100:
            raise ValueError("percentageOfNodesToScore must be within 0..100")
        if self.tie_break not in ("name", "search-order"):
            raise ValueError(f"unknown tie break {self.tie_break!r} (name, search-order)")


@dataclass(frozen=True)
class NumaSetup:
    """The NUMA plugin of a cycle: its NRT cache, scoring strategy and filter options. ``zones``: the
    pipeline's initial zone slots (the arrays grow when a node has more)."""

    cache: NRTCache
    strategy: ScoringStrategy
    options: FilterOptions = DEFAULT_OPTIONS
    zones: int = 8


@dataclass(frozen=True)
class Candidates:
    """The feasible nodes one cycle found (``rows``, in search order) and their NUMA scores
    (``numa_scores``, one per row; ``None`` for a scheduler without the NUMA plugin)."""

    rows: I64
    numa_scores: I64 | None


@dataclass(frozen=True)
class FilterAnswer:
    """The NUMA filter's answer on one extender request's names (:meth:`Cycle.filter`), arrays by
    request position.

    ``rows``: each name's row of the cycle's NUMA arrays (``-1``: the cycle does not hold the node — an
    unknown name, or a Node object too malformed to have a row); ``feasible``: the row's verdict (a name
    without a row fails); ``known``: the caller has a Node for the name (every name with a row);
    ``reasons``: the upstream message of each :attr:`failed` position (``None`` elsewhere);
    ``preemptible``: failed positions with a row whose ``cannot align`` rejection (``ALIGN_REASONS``)
    evicting pods could resolve — the pod fits the node's trusted zones once every zone's ``available``
    is back at its ``allocatable`` (all ``False`` when not asked for)."""

    names: Objects
    rows: I64
    feasible: B
    known: B
    reasons: Objects
    preemptible: B

    @property
    def failed(self) -> B:
        """Known names the NUMA filter rejects (with or without a row)."""
        return self.known & ~self.feasible


@dataclass(frozen=True)
class NumaVerdicts:
    """Every node's NUMA answers for one pod, from one pass over the cycle's arrays (:meth:`Cycle.verdicts`),
    arrays by row of ``index`` (name → row; a snapshot, so the value stays readable after the node set
    changes, though it then describes the old set).

    ``feasible`` and ``scores`` (0..100, every row, feasible or not: upstream's Score scores any node it
    is asked about) are :meth:`Pipeline.evaluate`'s; ``codes`` the rows' :func:`reason_codes` (``FITS`` on
    every feasible row); ``trusted`` whether the row holds trusted, readable NRT data (fresh, present, not
    malformed — the rejections the cache hears of); ``preemptible`` (``None`` unless asked for) the rejected
    rows with trusted data and at least one zone that the pod fits once the node is emptied of pods
    (every zone's ``available`` back at its ``allocatable``)."""

    index: Mapping[str, int]
    feasible: B
    scores: I64
    codes: npt.NDArray[np.int8]
    trusted: B
    preemptible: B | None = None


class Cycle:
    """The one scheduling cycle (module docstring) over a set of nodes that may change.

    State: ``fit`` (NodeResourcesFit arrays; usage is the caller's to charge:
    :meth:`FitArrays.add_vector` by row, or :meth:`set_usage` by name), ``cache`` and ``pipeline`` (the
    NUMA plugin's NRT cache and vectorised arrays; ``None`` without NUMA plugin), ``infos`` (each node's
    Node object for the NUMA filter), ``names`` (the search order: the order the nodes were added).

    Invariants: ``fit`` and ``pipeline`` hold a row for exactly the nodes of ``names``; the maps from a
    node's position in ``names`` to those rows (and the name rank used for ties) are rebuilt lazily,
    on the first use after the node set changed. While the set never changed (the simulator), position
    ``i`` is row ``i`` of both. ``start`` is kube-scheduler's ``nextStartNodeIndex``. Before every
    decision the pipeline reloads the nodes the cache reports changed (:meth:`sync`)."""

    def __init__(
        self,
        names: Sequence[str],
        allocatable: Sequence[Mapping[str, Quantity]],
        infos: Mapping[str, NodeInfo],
        rules: SelectionRules,
        numa: NumaSetup | None = None,
    ) -> None:
        self.rules = rules
        self.names = list(names)
        self.infos = dict(infos)
        self.fit = FitArrays(self.names, list(allocatable))
        self.cache: NRTCache | None = None if numa is None else numa.cache
        self.pipeline: Pipeline | None = None
        self._numa = numa
        self._emptied: Pipeline | None = None  # made on the first emptied evaluation, then kept in sync
        self._emptied_rows: I64 | None = None  # NUMA row -> emptied row; None: to rebuild (node set changed)
        if numa is not None:
            self.pipeline = Pipeline(numa.strategy, numa.options, zones=numa.zones)
            for name in self.names:
                self.pipeline.update_node(name, None, self.infos[name])
            if list(self.pipeline.cluster.index) != self.names:
                raise ValueError("node names must be unique")
        self.start = 0
        self._last_search: tuple[int, int] | None = None  # the last search's (feasible found, processed)
        self._stale = True
        self._layout()

    # --- the node set ------------------------------------------------------------------------------

    def set_node(self, name: str, info: NodeInfo, allocatable: Mapping[str, Quantity] | None = None) -> None:
        """Add node ``name`` (at the end of the search order, with no usage) or change it: its Node
        object ``info`` and, unless ``None`` (unchanged), its allocatable (a new node needs one). Its
        NUMA rows are reloaded from the cache."""
        known = name in self
        if not known:
            if allocatable is None:
                raise ValueError(f"node {name!r} is new: its allocatable is needed")
            self.names.append(name)
            self._stale = True
            self._emptied_rows = None
        if allocatable is not None:
            self.fit.set_node(name, allocatable)
        self.infos[name] = info
        self._load(name)

    def remove_node(self, name: str) -> None:
        """Forget node ``name`` (no-op when unknown)."""
        if name not in self:
            return
        self.names.remove(name)
        self._stale = True
        self._emptied_rows = None
        self.fit.remove_node(name)
        self.infos.pop(name, None)
        for pipeline in (self.pipeline, self._emptied):
            if pipeline is not None:
                pipeline.remove_node(name)

    def set_usage(self, name: str, used: Mapping[str, Quantity], pods: int) -> None:
        """Node ``name``'s usage: the exact sum of its pods' effective requests and their number."""
        self.fit.set_usage(name, used, pods)

    def __contains__(self, name: object) -> bool:
        """Whether node ``name`` is in the cycle (cheap: never rebuilds the layout)."""
        return name in self.fit.index

    def position(self, name: str) -> int | None:
        """The position of ``name`` in the search order (``None`` if unknown)."""
        self._layout()
        return self._positions.get(name)

    def sync(self) -> None:
        """Reload the NUMA rows of the nodes whose cached view changed (no-op without NUMA plugin)."""
        if self.cache is not None:
            for name in sorted(self.cache.drain_changed()):
                if name in self.infos:
                    self._load(name)

    def _load(self, name: str) -> None:
        if self.cache is None or self.pipeline is None:
            return
        cached = self.cache.get(name)
        topology, info = cached.topology, self.infos[name]
        self.pipeline.cluster.upsert(name, topology, info, fresh=cached.fresh)
        if self._emptied is not None:
            self._emptied.cluster.upsert(name, _emptied(topology), info)

    def _layout(self) -> None:
        """Rebuild the position → row maps after the node set changed (class docstring)."""
        if not self._stale:
            return
        n = len(self.names)
        self._names = np.array(self.names, dtype=object)
        self._positions = {name: i for i, name in enumerate(self.names)}
        self._fit_rows = np.array([self.fit.index[name] for name in self.names], dtype=np.int64)
        identity = np.arange(n, dtype=np.int64)
        self._numa_rows = identity
        if self.pipeline is not None:
            index = self.pipeline.cluster.index
            self._numa_rows = np.array([index[name] for name in self.names], dtype=np.int64)
        self._direct = bool(np.array_equal(self._fit_rows, identity) and np.array_equal(self._numa_rows, identity))
        # rank of each position in node-name order: ties go to the lowest rank
        self._rank = np.empty(n, dtype=np.int64)
        self._rank[np.argsort(self._names, kind="stable")] = identity
        self.to_find = num_feasible_nodes_to_find(self.rules.percentage_of_nodes_to_score, n)
        self.window = max(2 * (self.to_find + 1), MIN_WINDOW)
        self._stale = False

    # --- one decision ------------------------------------------------------------------------------

    def candidates(self, pod: Pod, passed: npt.NDArray[np.bool_] | None = None) -> Candidates:
        """Search, filter and NUMA-score ``pod`` (module docstring); moves :attr:`start` on and reports
        the processed nodes that failed only the NUMA filter on trusted, readable NRT data to the cache
        (node maybe over-reserved). ``passed``: by position, the nodes the caller's other filter plugins
        (kube-scheduler's node-level predicates) let through; ``None``: all."""
        self.sync()
        self._layout()
        pipeline, cache, direct = self.pipeline, self.cache, self._direct
        fit_all = numa_all = None
        if not direct:
            fit_all = self.fit.feasible(pod)
            numa_all = pipeline.feasible(pod) if pipeline is not None else None

        def verdicts(rows: slice) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_] | None]:
            fit = self.fit.feasible(pod, rows) if fit_all is None else fit_all[self._fit_rows[rows]]
            if passed is not None:
                fit = fit & passed[rows]
            if pipeline is None:
                return fit, None
            if numa_all is None:
                numa_rows: slice | npt.NDArray[np.int64] = rows
                numa = pipeline.feasible(pod, rows)
            else:
                numa_rows = self._numa_rows[rows]
                numa = numa_all[numa_rows]
            return fit & numa, fit & ~numa & self._trusted(numa_rows)

        window = first_window(self.to_find, self.window, self._last_search)
        found = search(len(self.names), self.start, self.to_find, window, verdicts)
        self.start = found.next_start
        self._last_search = (len(found.rows), found.processed)  # sizes the next first window (cost only)
        if pipeline is None or cache is None:
            return Candidates(found.rows, None)
        if len(found.reported):
            nodes_maybe_overreserved(cache, self._names[found.reported].tolist(), pod)
        if not len(found.rows):
            return Candidates(found.rows, None)
        return Candidates(found.rows, pipeline.scores(pod, self._numa_rows[found.rows]))

    def _trusted(self, rows: npt.NDArray[np.int64] | slice, *, zones: bool = False) -> npt.NDArray[np.bool_]:
        """Whether each NUMA row of ``rows`` (indices or a slice) holds trusted, readable NRT data (the
        rejections the cache hears of); ``zones``: and at least one zone."""
        assert self.pipeline is not None
        trusted = self.pipeline.trusted()[rows]  # the pipeline's kept mask: read, never written
        if zones:
            return trusted & (self.pipeline.cluster.nzones[rows] > 0)
        return trusted.copy() if isinstance(rows, slice) else trusted  # a view of the kept mask: copied

    def totals(self, pod: Pod, found: Candidates) -> I64:
        """The total score (module docstring) of every position of ``found``."""
        fit = self.fit.scores(pod, self._fit_rows[found.rows])
        if found.numa_scores is None:
            return fit
        return self.rules.numa_weight * found.numa_scores + self.rules.fit_weight * fit

    def pick(self, rows: I64, scores: I64) -> int:
        """The position :attr:`rules` choose among ``rows`` (at least one) with total ``scores``."""
        if self.rules.tie_break == "search-order":
            return int(rows[int(np.argmax(scores))])
        tied = rows[scores == scores.max()]
        return int(tied[int(np.argmin(self._rank[tied]))])

    def select(self, pod: Pod, found: Candidates) -> int:
        """The chosen position among ``found`` (at least one) by :attr:`rules`: :meth:`pick` over
        :meth:`totals`, asking fit scores only of the positions that can still reach the top total;
        with ``tie_break="name"`` the highest total, the lowest node name on ties."""
        rows, numa = found.rows, found.numa_scores
        numa_weight, fit_weight = self.rules.numa_weight, self.rules.fit_weight
        if numa is not None and fit_weight == 0:
            return self.pick(rows, numa_weight * numa)
        if numa is not None and numa_weight and self.fit.scores_bounded(pod):
            # fit scores lie in 0..100: a row whose weighted NUMA score trails the best by more
            # than fit_weight * 100 cannot reach the top total, so its fit score is not needed
            weighted = numa_weight * numa
            keep = weighted >= weighted.max() - fit_weight * 100
            found = Candidates(rows[keep], numa[keep])
        return self.pick(found.rows, self.totals(pod, found))

    def decide(self, pod: Pod) -> int | None:
        """One cycle: the chosen position, or ``None`` when the search found no feasible node."""
        found = self.candidates(pod)
        return self.select(pod, found) if len(found.rows) else None

    # --- the NUMA plugin's verdicts on every node, for explanations and the extender ----------------

    def verdicts(self, pod: Pod, *, preemption: bool = False) -> NumaVerdicts:
        """Every node's NUMA verdict, score, reason code and trust for ``pod`` (after :meth:`sync`) in one
        value (:class:`NumaVerdicts`); ``preemption``: also whether evicting pods would let it fit (asks
        the emptied arrays only when some row is rejected). Changes nothing but the arrays' sync."""
        pipeline = self._synced_pipeline()
        ev = pipeline.evaluate(pod)
        feasible = ev.feasible
        every = slice(0, len(feasible))  # every row, as a slice: no gather
        if feasible.all():
            codes = np.full(len(feasible), FITS, dtype=np.int8)
            preemptible = np.zeros(len(feasible), dtype=np.bool_) if preemption else None
        else:
            codes = reason_codes(pipeline, pod, ev)
            preemptible = None
            if preemption:
                preemptible = ~feasible & self._trusted(every, zones=True) & self.emptied_feasible(pod)
        return NumaVerdicts(ev.index, feasible, ev.scores, codes, self._trusted(every), preemptible)

    def emptied_evaluation(self, pod: Pod) -> Evaluation:
        """Every node's NUMA verdict for ``pod`` were the node emptied of pods: the same nodes with
        every zone's ``available`` raised to its ``allocatable`` ("would evicting pods help?")."""
        return self._emptied_pipeline().evaluate(pod)

    def _emptied_pipeline(self) -> Pipeline:
        if self._numa is None:
            raise ValueError("this cycle has no NUMA plugin")
        self.sync()
        if self._emptied is None:
            # built for the whole node set at once: its rows fit it (the arrays grow by half otherwise)
            rows = max(len(self.names), 1)
            self._emptied = Pipeline(self._numa.strategy, self._numa.options, zones=self._numa.zones, capacity=rows)
            for name in self.names:
                self._load(name)
        return self._emptied

    def numa_feasible(self, pod: Pod) -> tuple[Mapping[str, int], npt.NDArray[np.bool_]]:
        """:meth:`verdicts`' index and verdicts alone: the name → row index and every row's verdict.
        The index is the arrays' own (no copy, so lookups are plain dict ones): valid until the node
        set changes, read it at once."""
        pipeline = self._synced_pipeline()
        return pipeline.cluster.index, pipeline.feasible(pod)

    def numa_scores(self, pod: Pod) -> tuple[Mapping[str, int], I64]:
        """:meth:`verdicts`' index and scores alone: the name → row index (as for
        :meth:`numa_feasible`) and every row's score."""
        pipeline = self._synced_pipeline()
        return pipeline.cluster.index, pipeline.scores(pod)

    def emptied_feasible(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """:meth:`emptied_evaluation`'s verdicts alone, by row of the cycle's NUMA arrays (the rows of
        :meth:`numa_feasible`'s index; the emptied arrays have rows of their own)."""
        emptied = self._emptied_pipeline()
        if self._emptied_rows is None:
            assert self.pipeline is not None
            index = emptied.cluster.index
            rows = np.zeros(self.pipeline.cluster.n, dtype=np.int64)
            for name, row in self.pipeline.cluster.index.items():
                rows[row] = index[name]
            self._emptied_rows = rows
        return emptied.feasible(pod)[self._emptied_rows]

    def _synced_pipeline(self) -> Pipeline:
        if self.pipeline is None:
            raise ValueError("this cycle has no NUMA plugin")
        self.sync()
        return self.pipeline

    def reason_codes(self, pod: Pod, ev: Evaluation | npt.NDArray[np.bool_]) -> npt.NDArray[np.int8]:
        """:func:`reason_codes` of this cycle's NUMA arrays for ``ev`` (this pod's evaluation, or its
        verdicts alone: :meth:`numa_feasible`)."""
        if self.pipeline is None:
            raise ValueError("this cycle has no NUMA plugin")
        return reason_codes(self.pipeline, pod, ev)

    # --- the extender's verbs, one call each --------------------------------------------------------

    def filter(
        self,
        pod: Pod,
        names: Sequence[str],
        absent: Callable[[str], str | None],
        *,
        mark: bool = True,
        preemption: bool = True,
    ) -> FilterAnswer:
        """The NUMA filter of ``pod`` on the nodes ``names`` (kube-scheduler's candidates), answered
        from the arrays in one pass (:class:`FilterAnswer`). ``absent``: for a name the cycle holds no
        row for, why the caller's Node is unusable (the reason of its rejection), ``None`` for a name
        the caller does not know. ``mark``: report the rejections on trusted,
        readable data to the cache, in request order, as the search does (the bind-time check does
        not); ``preemption``: fill ``preemptible``. Messages come from the rows' reason codes
        (:meth:`reason_codes`); only code ``EXPLAIN`` asks the per-node explanation (:meth:`explain`),
        whose verdict equals the arrays' (property tests): were it a :class:`Fit`, the position still
        fails, with ``MSG_UNEXPLAINED``."""
        index, all_feasible = self.numa_feasible(pod)
        rows = np.fromiter(map(index.get, names, repeat(-1)), dtype=np.int64, count=len(names))
        array: Objects = np.empty(len(names), dtype=object)
        array[:] = names
        has_row = rows >= 0
        feasible = np.zeros(len(names), dtype=np.bool_)
        feasible[has_row] = all_feasible[rows[has_row]]
        known = has_row.copy()
        reasons: Objects = np.full(len(names), None, dtype=object)
        for pos in np.flatnonzero(~has_row).tolist():
            problem = absent(names[pos])
            if problem is not None:
                known[pos] = True
                reasons[pos] = problem
        rejected = has_row & ~feasible
        preemptible = np.zeros(len(names), dtype=np.bool_)
        if not rejected.any():
            return FilterAnswer(array, rows, feasible, known, reasons, preemptible)
        if mark:
            assert self.cache is not None
            report = array[rejected][self._trusted(rows[rejected])].tolist()
            if report:
                nodes_maybe_overreserved(self.cache, report, pod)
        codes = self.reason_codes(pod, all_feasible)[rows[rejected]]
        messages = _CODE_MESSAGES[codes]
        aligning = _CODE_ALIGNS[codes]
        positions = np.flatnonzero(rejected)
        for i in np.flatnonzero(codes == EXPLAIN).tolist():
            verdict = self.explain(pod, str(array[positions[i]]))
            messages[i] = verdict.reason if isinstance(verdict, Reject) else MSG_UNEXPLAINED
            aligning[i] = messages[i] in ALIGN_REASONS
        reasons[rejected] = messages
        if preemption:
            failed = rows[rejected]
            trusted = self._trusted(failed, zones=True)
            preemptible[rejected] = self.emptied_feasible(pod)[failed] & trusted & aligning
        return FilterAnswer(array, rows, feasible, known, reasons, preemptible)

    def prioritize(self, pod: Pod, names: Sequence[str], known: Container[str]) -> I64:
        """The 0..100 NUMA score of ``pod`` on each of ``names``, in request order, in one pass: the
        row's score (upstream's Score scores any node it is asked about, rejected or not); for a name
        the cycle holds no row for, the per-node score from the cached NRT when the caller ``known``s
        the node (its Node object is unusable: the score never reads it), else 0."""
        index, all_scores = self.numa_scores(pod)
        rows = np.fromiter(map(index.get, names, repeat(-1)), dtype=np.int64, count=len(names))
        has_row = rows >= 0
        out = np.zeros(len(names), dtype=np.int64)
        out[has_row] = all_scores[rows[has_row]]
        for pos in np.flatnonzero(~has_row).tolist():
            if names[pos] in known:
                out[pos] = self.numa_score(pod, names[pos])
        return out

    def explain(self, pod: Pod, name: str) -> Reject | Fit:
        """The per-node NUMA verdict of ``pod`` on node ``name`` of the cycle, with the full reason of a
        rejection (which container, which zone is short): the explaining room's ``filter`` over the
        cached view and the node's Node object."""
        if self.cache is None or self._numa is None:
            raise ValueError("this cycle has no NUMA plugin")
        cached = self.cache.get(name, pod)
        return numa_filter(pod, cached.topology, self.infos[name], fresh=cached.fresh, options=self._numa.options)

    def numa_score(self, pod: Pod, name: str) -> int:
        """The per-node NUMA score (0..100) of ``pod`` on ``name`` from the cached NRT (the Node object
        is not read: ``name`` need not be in the cycle)."""
        if self.cache is None or self._numa is None:
            raise ValueError("this cycle has no NUMA plugin")
        cached = self.cache.get(name, pod)
        return numa_score(pod, cached.topology, None, self._numa.strategy, fresh=cached.fresh)

    def fits(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """NodeResourcesFit's verdict of ``pod`` on every node, by position."""
        self._layout()
        return self.fit.feasible(pod)[self._fit_rows]


#: Message of each reason code (``None`` where the per-node explanation gives it), indexable by code.
_CODE_MESSAGES: Objects = np.array(
    [REASON_MESSAGES.get(code) for code in range(max(FITS, EXPLAIN, *REASON_MESSAGES) + 1)], dtype=object
)
#: Whether each reason code's message is a ``cannot align`` one, indexable by code.
_CODE_ALIGNS: B = np.array([message in ALIGN_REASONS for message in _CODE_MESSAGES.tolist()], dtype=np.bool_)


def _emptied(topology: NodeTopology | None) -> NodeTopology | None:
    """``topology`` with every zone's ``available`` raised to its ``allocatable`` (usable data only)."""
    if topology is None or topology.problem is not None:
        return topology
    return replace(topology, zones=tuple(map(_emptied_zone, topology.zones)))


# An emptied zone depends only on the zone's NUMA id, name, allocatable and cost maps, and views of
# nodes of one kind share those maps (placement/model/view.py): such zones share one emptied zone
# (issue 30: memory; at 5,000 nodes with every zone distinct, 20,000 zone and map copies were 3.7 MB).
# Keyed by the maps' ids; an entry holds its maps, so their ids cannot be reused while it exists.
_EMPTIED_MEMO = 1 << 14
_EMPTIED_ZONES: dict[tuple[int, str, int, int], NUMAZone] = {}


def _emptied_zone(zone: NUMAZone) -> NUMAZone:
    """``zone`` with ``available`` raised to its ``allocatable`` (the same map: views never modify
    their maps), one object per distinct (NUMA id, name, allocatable map, cost map)."""
    key = (zone.numa_id, zone.name, id(zone.allocatable), id(zone.costs))
    known = _EMPTIED_ZONES.get(key)
    if known is not None and known.allocatable is zone.allocatable and known.costs is zone.costs:
        return known
    if len(_EMPTIED_ZONES) >= _EMPTIED_MEMO:
        _EMPTIED_ZONES.clear()
    emptied = replace(zone, available=zone.allocatable)
    _EMPTIED_ZONES[key] = emptied
    return emptied

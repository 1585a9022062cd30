"""One scheduling cycle of one pod over many nodes: the node-selection rule the scheduler and the simulator share.

The rule (:class:`SelectionRules`), as kube-scheduler's framework applies it with two score plugins:

* every feasible node gets ``total = numa_weight * NUMA score + fit_weight * LeastAllocated score``
  (NodeResourceTopologyMatch, 0..100, and NodeResourcesFit with kube-scheduler's non-zero defaults,
  0..100; weights are the plugins' weights in the profile, integers ``>= 0``);
* the highest total wins; ties go to the lowest node name (``tie_break="name"``, the standalone
  scheduler's rule) or to the first node in search order (``"search-order"``, the simulator's stand-in
  for kube-scheduler's own default scheduler, which picks among ties at random). :func:`best_node`
  states the name rule over names, :meth:`Cycle.select` applies either to array rows (the same
  answer, checked by property tests);
* which nodes are filtered at all follows ``percentage_of_nodes_to_score``
  (:mod:`numaplane.placement.sampling`): from a rotating start, window by window, until enough feasible
  nodes are found (every node below 100 nodes or at 100 %). Only the nodes the search processed report
  NUMA rejections to the cache; only the nodes it found are scored.

:class:`Cycle` owns the state such a decision reads for a fixed set of nodes (row ``i`` is node
``names[i]`` everywhere): the NodeResourcesFit arrays (:class:`~numaplane.placement.fit.FitArrays`),
and for a NUMA-aware scheduler the NRT cache and the vectorised
:class:`~numaplane.placement.pipeline.Pipeline` refreshed from it before every decision. The simulator
drives it directly. The standalone scheduler and the extender, whose nodes come and go, keep the NUMA
plugin's arrays in :class:`NumaArrays` (the same pipeline, node rows by name) and the standalone
scheduler applies :func:`best_node` with the same :class:`SelectionRules` to the totals of every node
(``percentage_of_nodes_to_score`` 100).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from numaplane.placement.cache import nodes_maybe_overreserved
from numaplane.placement.cachebase import NRTCache
from numaplane.placement.cluster import POLICY_CODES
from numaplane.placement.filter import DEFAULT_OPTIONS, FilterOptions
from numaplane.placement.fit import FitArrays
from numaplane.placement.node import NodeInfo
from numaplane.placement.pipeline import Evaluation, Pipeline
from numaplane.placement.result import MSG_APP, MSG_INVALID_DATA, MSG_MALFORMED, MSG_POD
from numaplane.placement.sampling import num_feasible_nodes_to_find, search
from numaplane.placement.score import ScoringStrategy
from numaplane.placement.view import NodeTopology
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
    "NumaArrays",
    "NumaSetup",
    "SelectionRules",
    "best_node",
    "totals",
]

I64 = npt.NDArray[np.int64]

#: Nodes per verdict window of a cycle's search (a window usually ends the search).
MIN_WINDOW = 256

#: Reason codes of a node's NUMA verdict (:meth:`NumaArrays.reason_codes`): it fits; or the upstream
#: message of :data:`REASON_MESSAGES`; or ``EXPLAIN``, the message needs the per-node explanation.
FITS, UNTRUSTED, MALFORMED, CANNOT_ALIGN_POD, CANNOT_ALIGN_CONTAINER, EXPLAIN = range(6)
REASON_MESSAGES: Mapping[int, str] = {
    UNTRUSTED: MSG_INVALID_DATA,
    MALFORMED: MSG_MALFORMED,
    CANNOT_ALIGN_POD: MSG_POD,
    CANNOT_ALIGN_CONTAINER: MSG_APP,
}
_SNN = POLICY_CODES["single-numa-node"]


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


def totals(
    rules: SelectionRules, numa_scores: Mapping[str, int] | None, fit_scores: Mapping[str, int]
) -> dict[str, int]:
    """Each node's total score (module docstring): every node of ``fit_scores``, with its NUMA score
    from ``numa_scores`` (``None``: a scheduler without the NUMA plugin; then the total is the fit
    score alone, unweighted)."""
    if numa_scores is None:
        return dict(fit_scores)
    return {n: rules.numa_weight * numa_scores[n] + rules.fit_weight * s for n, s in fit_scores.items()}


def best_node(scores: Mapping[str, int]) -> str | None:
    """The node with the highest total, the lowest name on ties; ``None`` when there is none."""
    return min(scores, key=lambda n: (-scores[n], n)) if scores else None


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


class Cycle:
    """Selection state over a fixed list of nodes (module docstring): ``fit`` (usage is the caller's to
    charge: :meth:`FitArrays.add_vector`), ``cache`` and ``pipeline`` (``None`` without NUMA plugin).

    Invariant: row ``i`` of ``fit`` and of ``pipeline`` is node ``names[i]``; nodes are never added or
    removed. ``start`` is kube-scheduler's ``nextStartNodeIndex``."""

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
        if numa is not None:
            self.pipeline = Pipeline(numa.strategy, numa.options, zones=numa.zones)
            for name in self.names:
                self.pipeline.update_node(name, None, self.infos[name])
            if list(self.pipeline.cluster.index) != self.names:
                raise ValueError("node names must be unique")
        self._names = np.array(self.names, dtype=object)
        # rank of each row in node-name order: ties go to the lowest rank
        self._rank = np.empty(len(self.names), dtype=np.int64)
        self._rank[np.argsort(self._names, kind="stable")] = np.arange(len(self.names), dtype=np.int64)
        self.start = 0
        self.to_find = num_feasible_nodes_to_find(rules.percentage_of_nodes_to_score, len(self.names))
        self.window = max(2 * (self.to_find + 1), MIN_WINDOW)

    def candidates(self, pod: Pod) -> Candidates:
        """Search, filter and NUMA-score ``pod`` (module docstring); moves :attr:`start` on and reports
        the processed nodes that failed only the NUMA filter to the cache (node maybe over-reserved)."""
        pipeline, cache = self.pipeline, self.cache
        if pipeline is not None and cache is not None:
            pipeline.sync_from_cache(cache, self.infos)

        def verdicts(rows: slice) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_] | None]:
            fit = self.fit.feasible(pod, rows)
            if pipeline is None:
                return fit, None
            numa = pipeline.feasible(pod, rows)
            return fit & numa, fit & ~numa

        found = search(len(self.names), self.start, self.to_find, self.window, verdicts)
        self.start = found.next_start
        if pipeline is None or cache is None:
            return Candidates(found.rows, None)
        if len(found.reported):
            nodes_maybe_overreserved(cache, self._names[found.reported].tolist(), pod)
        if not len(found.rows):
            return Candidates(found.rows, None)
        return Candidates(found.rows, pipeline.scores(pod, found.rows))

    def select(self, pod: Pod, found: Candidates) -> int:
        """The chosen row among ``found`` (at least one row) by :attr:`rules`: with ``tie_break="name"``
        the row of :func:`best_node` over the same totals."""
        rows, numa = found.rows, found.numa_scores
        numa_weight, fit_weight = self.rules.numa_weight, self.rules.fit_weight
        if numa is None:
            scores: Any = self.fit.scores(pod, rows)
        elif fit_weight == 0:
            scores = numa_weight * numa
        else:
            if numa_weight and self.fit.scores_bounded(pod):
                # fit scores lie in 0..100: a row whose weighted NUMA score trails the best by more
                # than fit_weight * 100 cannot reach the top total, so its fit score is not needed
                weighted = numa_weight * numa
                keep = weighted >= weighted.max() - fit_weight * 100
                rows, numa = rows[keep], numa[keep]
            scores = numa_weight * numa + fit_weight * self.fit.scores(pod, rows)
        if self.rules.tie_break == "search-order":
            return int(rows[int(np.argmax(scores))])
        tied = rows[scores == scores.max()]
        return int(tied[int(np.argmin(self._rank[tied]))])

    def decide(self, pod: Pod) -> int | None:
        """One cycle: the chosen row, or ``None`` when the search found no feasible node."""
        found = self.candidates(pod)
        return self.select(pod, found) if len(found.rows) else None


class NumaArrays:
    """The NUMA plugin's vectorised verdicts over a changing set of nodes (rows by name): the pipeline
    over the cached NRT data and its *emptied* twin, the same nodes with every zone's ``available``
    raised to its ``allocatable`` ("would evicting pods help?").

    Invariant (after :meth:`refresh` of the nodes the cache reports changed): each known node's row is
    ``cache.get(name)`` with its Node object ``infos[name]``."""

    def __init__(self, strategy: ScoringStrategy, options: FilterOptions = DEFAULT_OPTIONS) -> None:
        self.pipeline = Pipeline(strategy, options)
        self._emptied = Pipeline(strategy, options)

    def refresh(self, cache: NRTCache, infos: Mapping[str, NodeInfo], names: Iterable[str]) -> None:
        """Reload ``names`` from ``cache`` (a name missing from ``infos`` is removed)."""
        for name in sorted(set(names)):
            node = infos.get(name)
            if node is None:
                self.remove(name)
                continue
            cached = cache.get(name)
            self.set_node(name, cached.topology, node, fresh=cached.fresh)

    def set_node(self, name: str, topology: NodeTopology | None, node: NodeInfo, *, fresh: bool = True) -> None:
        """(Re)load one node: its NUMA data (``None``: no NRT) and Node, and whether the data is trusted."""
        self.pipeline.update_node(name, topology, node, fresh=fresh)
        if topology is not None and topology.problem is None:
            zones = tuple(replace(z, available=dict(z.allocatable)) for z in topology.zones)
            topology = replace(topology, zones=zones)
        self._emptied.update_node(name, topology, node)

    def remove(self, name: str) -> None:
        """Forget a node."""
        self.pipeline.remove_node(name)
        self._emptied.remove_node(name)

    def evaluate(self, pod: Pod) -> Evaluation:
        """Every known node's NUMA verdict and score for ``pod``."""
        return self.pipeline.evaluate(pod)

    def evaluate_emptied(self, pod: Pod) -> Evaluation:
        """Every known node's NUMA verdict for ``pod`` were the node emptied of pods."""
        return self._emptied.evaluate(pod)

    def reason_codes(self, pod: Pod, ev: Evaluation) -> npt.NDArray[np.int8]:
        """The reason code (module constants) of every row of ``ev`` (this pod's :meth:`evaluate`),
        read from the arrays the decision used. A rejection follows from the data alone when the data
        is untrusted (``UNTRUSTED``) or unreadable (``MALFORMED``), or, on usable ``single-numa-node``
        data with zones, in pod scope (``CANNOT_ALIGN_POD``) and in container scope for a pod without
        init containers (``CANNOT_ALIGN_CONTAINER``: upstream reports every app container so); any
        other rejection is ``EXPLAIN``."""
        cl = self.pipeline.cluster
        n = len(ev.feasible)
        fresh, problem = cl.fresh[:n], cl.problem[:n]
        snn = cl.has_nrt[:n] & ~problem & (cl.policy[:n] == _SNN) & (cl.nzones[:n] > 0)
        codes = np.full(n, EXPLAIN, np.int8)
        codes[snn & cl.scope_pod[:n]] = CANNOT_ALIGN_POD
        if not pod.init_containers:
            codes[snn & ~cl.scope_pod[:n]] = CANNOT_ALIGN_CONTAINER
        codes[problem] = MALFORMED
        codes[~fresh] = UNTRUSTED
        codes[ev.feasible] = FITS
        return codes

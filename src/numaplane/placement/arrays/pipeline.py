"""Filter and score one pod over many nodes at once, vectorised with numpy.

:class:`Pipeline` keeps a :class:`~numaplane.placement.arrays.cluster.ClusterArrays` view of every node's
NUMA zones, updated node by node (:meth:`Pipeline.update_node`, :meth:`Pipeline.sync_from_cache`), and
:meth:`Pipeline.evaluate` returns, for every node, the NUMA filter verdict and the score — by
definition exactly what :func:`numaplane.placement.explain.filter.filter` and
:func:`numaplane.placement.explain.score.score` return for that node (the tests check this on random clusters).

How the vectorised path mirrors the per-node rules: per requested resource one comparison over a
``(nodes, zone slots)`` array narrows a boolean feasibility mask (the per-node NUMA bitmask); a node
fits when its mask keeps a slot; in container scope each app container is charged to the slot of the
lowest feasible NUMA id before the next is checked. Scores are computed per zone slot with the same
integer (and, for BalancedAllocation, the same floating-point) operations in the same order, then
reduced to the smallest non-zero zone score.

Nodes the arrays cannot represent exactly (irregular rows), a pod whose requests are not whole
thousandths, negative or huge (:func:`_exotic`), and restricted / best-effort nodes when kubelet admission mode is on, go through the
per-node functions instead; results are identical either way. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from numaplane.placement.arrays.cluster import I64, POLICY_CODES, B, ClusterArrays
from numaplane.placement.arrays.kernels import Requests, Rows, align, charge, count_of, unit_score
from numaplane.placement.arrays.numa_combos import Distances
from numaplane.placement.arrays.pipeline_numa import MAX_VECTOR_SLOTS, least_numa_scores
from numaplane.placement.arrays.shapes import RowMemo, pod_shape
from numaplane.placement.caches.cachebase import NRTCache
from numaplane.placement.explain.filter import DEFAULT_OPTIONS, FilterOptions, NRTInput, as_topology
from numaplane.placement.explain.filter import filter as filter_node
from numaplane.placement.explain.score import MAX_SCORE, score
from numaplane.placement.model.effective import EffectivePlacement, effective_placement
from numaplane.placement.model.node import NodeInfo, node_info
from numaplane.placement.model.requests import (
    include_non_native,
    is_numa_affine,
    pod_request,
)
from numaplane.placement.model.result import Fit, Reject
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import Container, Pod
from numaplane.resources.quantity import Quantity

__all__ = ["Evaluation", "Pipeline"]

_SNN = POLICY_CODES["single-numa-node"]
_BOUND = 1 << 59
_GATHER_SHARE = 4  # rows beyond 1/_GATHER_SHARE of the nodes are scored as part of every node
_REQUEST_MEMO = 4096  # request mappings whose lists a pipeline remembers (cleared when full)


@dataclass(frozen=True, slots=True)
class _RequestLists:
    """One request list as the kernels read it, in name order: ``nonzero``, the ``(resource,
    thousandths)`` of the non-zero requests (the filter's); ``values``, ``(resource, Value(),
    thousandths)`` of every request (the unit score's)."""

    nonzero: Requests
    values: list[tuple[str, int, int]]


@dataclass(frozen=True)
class Evaluation:
    """Results of one pod for every node: ``feasible[row]``, ``scores[row]`` (0..100), rows by ``index``.

    Scores are computed for every node, feasible or not (kube-scheduler only uses feasible ones).
    """

    index: Mapping[str, int]
    feasible: B
    scores: I64

    def feasible_nodes(self) -> list[str]:
        """Names of the nodes that pass the NUMA filter, sorted."""
        return sorted(name for name, row in self.index.items() if self.feasible[row])

    def ranking(self) -> list[tuple[str, int]]:
        """Feasible nodes with their scores, highest score first, then by name."""
        pairs = [(name, int(self.scores[row])) for name, row in self.index.items() if self.feasible[row]]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))

    def result(self, name: str) -> tuple[bool, int]:
        """``(passes the filter, score)`` of one node."""
        row = self.index[name]
        return bool(self.feasible[row]), int(self.scores[row])


@dataclass(frozen=True)
class _Masks:
    """Row selections derived from the rows' flags only (valid while ``version`` matches the
    cluster's ``flags_version``)."""

    version: int
    passthrough: B  # fresh and (no NRT, or readable with a policy that is not filtered)
    check_pod: B  # fresh, readable, single-numa-node, pod scope (and has zones, unless disabled)
    check_ctr: B  # same, container scope
    usable: B  # readable NRT, fresh
    score_pod: B  # usable, single-numa-node, pod scope
    score_ctr: B  # usable, single-numa-node, container scope
    numa_usable: B  # usable and regular (LeastNUMANodes applies to every policy)
    filter_fallback: B  # rows filtered by the per-node code
    score_fallback: B  # rows scored by the per-node code


def _milli(q: Quantity) -> int | None:
    amount = q.amount
    if amount.denominator == 1:  # an integer: no Fraction arithmetic (same value)
        milli = amount.numerator * 1000
        return milli if abs(milli) < _BOUND else None
    m = amount * 1000
    return m.numerator if m.denominator == 1 and abs(m.numerator) < _BOUND else None


class Pipeline:
    """Vectorised filter + score of one pod over all known nodes (module docstring)."""

    def __init__(
        self,
        strategy: ScoringStrategy | None = None,
        options: FilterOptions = DEFAULT_OPTIONS,
        zones: int = 8,
        capacity: int = 256,
    ) -> None:
        """``zones``/``capacity``: the arrays' initial zone slots and rows (both grow on demand)."""
        self.strategy = strategy or ScoringStrategy()
        self.options = options
        self.cluster = ClusterArrays(zones, capacity)
        self._distances = Distances()
        self._cached_masks: _Masks | None = None
        self._last_exotic: tuple[Pod, bool] | None = None
        self._verdicts: RowMemo[np.bool_] = RowMemo()
        self._score_rows: RowMemo[np.int64] = RowMemo(narrow=np.int8)  # scores 0..100: one byte per row
        self._unit_rows: RowMemo[np.int64] = RowMemo(narrow=np.int8)
        self._kept_for: tuple[ScoringStrategy, FilterOptions] = (self.strategy, self.options)
        # per request mapping (by identity, the mapping held): its filter and score request lists
        self._request_lists: dict[int, tuple[Mapping[str, Quantity], _RequestLists]] = {}

    # --- updates -----------------------------------------------------------------------------------

    def update_node(
        self, name: str, nrt: NRTInput | None, node: NodeInfo | Mapping[str, Any], *, fresh: bool = True
    ) -> None:
        """(Re)load one node: its NRT (``None``: none), its Node object and whether the data is trusted."""
        topology = None if nrt is None else as_topology(nrt)
        self.cluster.upsert(name, topology, node_info(node), fresh=fresh)

    def remove_node(self, name: str) -> None:
        self.cluster.remove(name)

    def sync_from_cache(
        self, cache: NRTCache, nodes: Mapping[str, NodeInfo | Mapping[str, Any]], names: Iterable[str] | None = None
    ) -> int:
        """Reload the nodes the cache reports as changed (or ``names``) from ``cache.get``; return how many."""
        todo = cache.drain_changed() if names is None else set(names)
        count = 0
        for name in sorted(todo):
            node = nodes.get(name)
            if node is None:
                self.remove_node(name)
                continue
            cached = cache.get(name)
            self.cluster.upsert(name, cached.topology, node_info(node), fresh=cached.fresh)
            count += 1
        return count

    # --- evaluation --------------------------------------------------------------------------------

    def _kept(self) -> None:
        """Drop the kept rows when the strategy or the options were replaced since they were computed."""
        strategy, options = self._kept_for
        if strategy is not self.strategy or options is not self.options:
            self._verdicts.clear()
            self._score_rows.clear()
            self._unit_rows.clear()
            self._kept_for = (self.strategy, self.options)

    def explain(self, pod: Pod, name: str) -> Fit | Reject:
        """The per-node verdict with its explanation for one node."""
        src = self.cluster.sources[self.cluster.index[name]]
        assert src is not None
        return filter_node(pod, src.topology, src.node, fresh=src.fresh, options=self.options)

    def _masks(self) -> _Masks:
        """Per-row selections that depend only on the cluster (recomputed when it changes)."""
        cl = self.cluster
        if self._cached_masks is not None and self._cached_masks.version == cl.flags_version:
            return self._cached_masks
        n = cl.n
        readable = cl.has_nrt[:n] & ~cl.problem[:n]
        snn = readable & (cl.policy[:n] == _SNN)
        pod_scope = cl.scope_pod[:n]
        checked = cl.fresh[:n] & snn
        if self.options.reject_without_zones:
            checked = checked & (cl.nzones[:n] > 0)
        usable = readable & cl.fresh[:n]
        fallback = cl.irregular[:n] & cl.present[:n]
        filter_fallback = fallback
        if self.options.kubelet_admission:
            filter_fallback = fallback | (cl.present[:n] & cl.has_nrt[:n] & np.isin(cl.policy[:n], (1, 2)))
        masks = _Masks(
            version=cl.flags_version,
            passthrough=cl.fresh[:n] & ~(snn | (cl.has_nrt[:n] & cl.problem[:n])),
            check_pod=checked & pod_scope,
            check_ctr=checked & ~pod_scope,
            usable=usable,
            score_pod=usable & (cl.policy[:n] == _SNN) & pod_scope,
            score_ctr=usable & (cl.policy[:n] == _SNN) & ~pod_scope,
            numa_usable=usable & ~cl.irregular[:n],
            filter_fallback=filter_fallback,
            score_fallback=fallback,
        )
        self._cached_masks = masks
        return masks

    def trusted(self) -> B:
        """Per row ``0 .. n-1``: the row holds trusted, readable NRT data (fresh, an NRT, no problem).
        Kept until a row's flags change: read it at once, never write to it."""
        return self._masks().usable

    def evaluate(self, pod: Pod) -> Evaluation:
        """Filter verdict and score of ``pod`` on every node (see :class:`Evaluation`)."""
        return Evaluation(self.cluster.index_snapshot(), self.feasible(pod), self.scores(pod))

    def feasible(self, pod: Pod, rows: slice | None = None) -> B:
        """The NUMA filter verdict of ``pod`` on every row ``0 .. n-1`` (rows by ``cluster.index``), or
        on the rows of the slice ``rows`` (``step`` 1) only: each row's verdict depends on that row alone.

        Every row: kept per pod shape, only the rows changed since recomputed (``placement/arrays/shapes.py``)."""
        if rows is not None:
            return self._feasible(pod, rows)
        cl = self.cluster
        self._kept()
        verdicts = self._verdicts.rows(
            pod_shape(pod),
            cl.stamp[: cl.n],
            cl.stamps_issued,
            lambda: self._feasible(pod, None),
            lambda at: self._feasible(pod, at),
        )
        return verdicts.copy()

    def _feasible(self, pod: Pod, rows: Rows | None) -> B:
        """:meth:`feasible` on every row, the slice ``rows`` or the ascending row indices ``rows``."""
        cl = self.cluster
        n = cl.n
        m = self._masks()
        sel, count = count_of(cl, rows)
        qos = pod.qos_class
        exotic = self._exotic(pod)
        wanted = effective_placement(pod)
        if wanted.invalid is not None:  # every node rejects it (InvalidPreference)
            return np.zeros(count, bool)
        if not wanted.is_default:
            m = self._judged_masks(wanted, m)
        if qos == "BestEffort" and not include_non_native(pod):
            feasible = np.ones(count, bool)
        elif exotic:
            feasible = np.zeros(count, bool)
        else:
            feasible = self._filter(pod, qos == "Guaranteed", m, sel)
        fallback = (cl.present[:n] if exotic else m.filter_fallback)[sel]
        if fallback.any():
            at = np.flatnonzero(fallback)
            picked = at + sel.indices(n)[0] if isinstance(sel, slice) else sel[at]
            for pos, row in zip(at.tolist(), picked.tolist(), strict=True):
                src = cl.sources[row]
                assert src is not None
                verdict = filter_node(pod, src.topology, src.node, fresh=src.fresh, options=self.options)
                feasible[pos] = isinstance(verdict, Fit)
        asked = wanted.preferences.topology_policy
        if asked is not None or wanted.pins_memory:
            known = cl.fresh[:n] & cl.has_nrt[:n] & ~cl.problem[:n]
            if asked is not None:  # a node whose known policy is stricter rejects the pod (InvalidPreference)
                feasible &= ~(known & (cl.policy[:n] > POLICY_CODES[asked]))[sel]
            if wanted.pins_memory:  # memory-pinning true: only a node whose zones list memory (effective.py)
                column = cl.columns.get("memory")
                lists = cl.listed_any[column, :n] if column is not None else np.zeros(n, bool)
                feasible &= ~(known & ~lists)[sel]
        return feasible

    def _judged_masks(self, wanted: EffectivePlacement, m: _Masks) -> _Masks:
        """The filter's row selections for a pod with its own scope or policy (``placement/model/effective.py``):
        a ``single-numa-node`` pod is checked on every readable NRT; its scope replaces each row's."""
        cl = self.cluster
        n = cl.n
        checked = m.check_pod | m.check_ctr
        passthrough = m.passthrough
        if wanted.policy == "single-numa-node":
            readable = cl.has_nrt[:n] & ~cl.problem[:n]
            checked = cl.fresh[:n] & readable
            if self.options.reject_without_zones:
                checked = checked & (cl.nzones[:n] > 0)
            passthrough = cl.fresh[:n] & ~cl.has_nrt[:n]
        if wanted.scope is None:
            pod_scope = cl.scope_pod[:n]
        else:
            pod_scope = np.full(n, wanted.scope == "pod", bool)
        return replace(m, passthrough=passthrough, check_pod=checked & pod_scope, check_ctr=checked & ~pod_scope)

    def scores(self, pod: Pod, rows: I64 | None = None) -> I64:
        """The NUMA score (0..100) of ``pod`` on every row ``0 .. n-1``, or on ``rows`` only (in that
        order; each row's score depends on that row alone, so scoring a subset gives the same values).

        Every row: kept per pod shape, only the rows changed since recomputed (``placement/arrays/shapes.py``)."""
        cl = self.cluster
        if rows is not None and len(rows) * _GATHER_SHARE <= cl.n:
            return self._scores(pod, rows)
        self._kept()
        every = self._score_rows.rows(
            pod_shape(pod),
            cl.stamp[: cl.n],
            cl.stamps_issued,
            lambda: self._scores(pod, None),
            lambda at: self._scores(pod, at),
        )
        # many rows: whole-array views (and the kept rows) beat gathering every input
        return every.astype(np.int64) if rows is None else every[rows].astype(np.int64)

    def _scores(self, pod: Pod, rows: I64 | None) -> I64:
        """:meth:`scores` on every row or the ascending row indices ``rows``, computed."""
        cl = self.cluster
        n = cl.n
        m = self._masks()
        sel, count = count_of(cl, rows)
        exotic = self._exotic(pod)
        # a pod with its own scope or policy is scored by the per-node code (it reads placement/model/effective.py)
        own = not effective_placement(pod).is_default
        scalar = exotic or own or (self.strategy.type == "LeastNUMANodes" and cl.slots > MAX_VECTOR_SLOTS)
        if pod.qos_class != "Guaranteed":
            scores = np.full(count, MAX_SCORE, np.int64)
        elif scalar:
            scores = np.zeros(count, np.int64)
        else:
            scores = self._score(pod, m, sel, count)
        fallback = (cl.present[:n] if scalar else m.score_fallback)[sel]
        if fallback.any():
            at = np.flatnonzero(fallback)
            for pos, row in zip(at.tolist(), (at if rows is None else rows[at]).tolist(), strict=True):
                src = cl.sources[row]
                assert src is not None
                scores[pos] = score(pod, src.topology, None, self.strategy, fresh=src.fresh)
        return scores

    # --- filter ------------------------------------------------------------------------------------

    def _exotic(self, pod: Pod) -> bool:
        """:func:`_exotic` of ``pod``, remembered for the last pod asked (a cycle asks several times)."""
        last = self._last_exotic
        if last is not None and last[0] is pod:
            return last[1]
        value = _exotic(pod)
        self._last_exotic = (pod, value)
        return value

    def _lists(self, requests: Mapping[str, Quantity], *, remember: bool = True) -> _RequestLists:
        """The filter's and the score's lists of one request list (:class:`_RequestLists`), remembered
        per request mapping object unless ``remember`` is false (a mapping made for this call only):
        pods of one shape share their containers' mappings, and a search asks for the same pod's lists
        once per window. Callers only read the lists."""
        known = self._request_lists.get(id(requests)) if remember else None
        if known is not None and known[0] is requests:
            return known[1]
        nonzero: Requests = []
        values: list[tuple[str, int, int]] = []
        for name in sorted(requests):
            quantity = requests[name]
            m = _milli(quantity)
            assert m is not None  # pods with such requests take the per-node path (_exotic)
            if m:
                nonzero.append((name, m))
            values.append((name, quantity.value(), m))
        lists = _RequestLists(nonzero, values)
        if remember:
            if len(self._request_lists) >= _REQUEST_MEMO:
                self._request_lists.clear()
            self._request_lists[id(requests)] = (requests, lists)  # holds the mapping: its id stays its own
        return lists

    def _requests(self, requests: Mapping[str, Quantity], *, remember: bool = True) -> Requests:
        """The non-zero ``(resource, thousandths)`` of a request list in name order (:meth:`_lists`)."""
        return self._lists(requests, remember=remember).nonzero

    def _filter(self, pod: Pod, guaranteed: bool, m: _Masks, sel: Rows) -> B:
        cl = self.cluster
        feasible = m.passthrough[sel].copy()
        check_pod, check_ctr = m.check_pod[sel], m.check_ctr[sel]
        if check_pod.any():
            fit_pod, _ = align(cl, self._requests(pod_request(pod), remember=False), {}, guaranteed, sel)
            feasible |= check_pod & fit_pod
        if check_ctr.any():
            feasible |= check_ctr & self._container_scope(pod, guaranteed, sel)
        return feasible

    def _container_scope(self, pod: Pod, guaranteed: bool, sel: Rows) -> B:
        cl = self.cluster
        ok = np.ones(count_of(cl, sel)[1], bool)
        for init in pod.init_containers:
            ok &= align(cl, self._requests(init.requests), {}, guaranteed, sel)[0]
        work: dict[int, I64] = {}
        last = len(pod.containers) - 1
        for i, app in enumerate(pod.containers):
            reqs = self._requests(app.requests)
            fit, mask = align(cl, reqs, work, guaranteed, sel)
            ok &= fit
            if i < last:  # the last container's placement does not matter
                charged = [
                    (cl.columns[name], q)
                    for name, q in reqs
                    if name in cl.columns and (guaranteed or not is_numa_affine(name))
                ]
                charge(cl, mask, charged, work, sel)
        return ok

    # --- score -------------------------------------------------------------------------------------

    def _score(self, pod: Pod, m: _Masks, sel: Rows, count: int) -> I64:
        if self.strategy.type == "LeastNUMANodes":
            rows = None if isinstance(sel, slice) else sel
            return np.where(m.numa_usable[sel], least_numa_scores(self.cluster, pod, self._distances, rows), 0)
        out = np.zeros(count, np.int64)
        score_pod = m.score_pod[sel]
        if score_pod.any():
            out = np.where(score_pod, self._unit_score(pod_request(pod), sel, remember=False), out)
        containers = pod.all_containers()
        score_ctr = m.score_ctr[sel]
        if score_ctr.any() and containers:
            out = np.where(score_ctr, self._container_scores(containers, sel), out)
        return out

    def _container_scores(self, containers: Sequence[Container], sel: Rows) -> I64:
        """Mean (floor) of the containers' unit scores per row."""
        total = self._unit_score(containers[0].requests, sel)
        for c in containers[1:]:
            total += self._unit_score(c.requests, sel)
        if len(containers) > 1:
            total //= len(containers)
        return total

    def _unit_score(self, requests: Mapping[str, Quantity], sel: Rows, *, remember: bool = True) -> I64:
        """The unit score of one request list on ``sel`` (its lists: :meth:`_lists`)."""
        values = self._lists(requests, remember=remember).values
        cl = self.cluster
        if not (isinstance(sel, slice) and sel == slice(0, cl.n)):
            return unit_score(cl, values, self.strategy, sel)
        # every row: kept per request list (the containers of many pod shapes share theirs)
        self._kept()
        kept = self._unit_rows.rows(
            tuple(values),
            cl.stamp[: cl.n],
            cl.stamps_issued,
            lambda: unit_score(cl, values, self.strategy, sel),
            lambda at: unit_score(cl, values, self.strategy, at),
        )
        return kept.astype(np.int64)


def _exotic(pod: Pod) -> bool:
    """Whether the arrays cannot represent the pod's requests exactly: such a pod is filtered and
    scored by the per-node functions on every row. That is the case when a request or the overhead

    * is not a whole number of thousandths, or is at least 2**59 thousandths (:func:`_milli`);
    * is negative (the API server never admits one; the vectorised clamps assume scores in 0..100);
    * makes the per-resource sums of the plugin's pod request (``pod_request``, a sum over containers
      plus overhead) reach 2**59 thousandths: checked on the sum of every quantity, which bounds them.
    """
    total = 0
    for q in (*(q for c in pod.all_containers() for q in c.requests.values()), *pod.overhead.values()):
        milli = _milli(q)
        if milli is None or milli < 0:
            return True
        total += milli
    return total >= _BOUND

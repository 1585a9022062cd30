"""Filter and score one pod over many nodes at once, vectorised with numpy.

:class:`Pipeline` keeps a :class:`~numaplane.placement.cluster.ClusterArrays` view of every node's
NUMA zones, updated node by node (:meth:`Pipeline.update_node`, :meth:`Pipeline.sync_from_cache`), and
:meth:`Pipeline.evaluate` returns, for every node, the NUMA filter verdict and the score — by
definition exactly what :func:`numaplane.placement.filter.filter` and
:func:`numaplane.placement.score.score` return for that node (the tests check this on random clusters).

How the vectorised path mirrors the per-node rules: per requested resource one comparison over a
``(nodes, zone slots)`` array narrows a boolean feasibility mask (the per-node NUMA bitmask); a node
fits when its mask keeps a slot; in container scope each app container is charged to the slot of the
lowest feasible NUMA id before the next is checked. Scores are computed per zone slot with the same
integer (and, for BalancedAllocation, the same floating-point) operations in the same order, then
reduced to the smallest non-zero zone score.

Nodes the arrays cannot represent exactly (irregular rows), a pod whose requests are not whole
thousandths, and restricted / best-effort nodes when kubelet admission mode is on, go through the
per-node functions instead; results are identical either way. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from numaplane.placement.cachebase import NRTCache
from numaplane.placement.cluster import I64, POLICY_CODES, B, ClusterArrays
from numaplane.placement.filter import DEFAULT_OPTIONS, FilterOptions, NRTInput, as_topology
from numaplane.placement.filter import filter as filter_node
from numaplane.placement.node import NodeInfo, node_info
from numaplane.placement.pipeline_numa import MAX_VECTOR_SLOTS, Distances, least_numa_scores
from numaplane.placement.requests import (
    ALWAYS_ALLOCATABLE,
    include_non_native,
    is_host_level,
    is_numa_affine,
    pod_request,
)
from numaplane.placement.result import Fit, Reject
from numaplane.placement.score import MAX_SCORE, ScoringStrategy, score
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["Evaluation", "Pipeline"]

_SNN = POLICY_CODES["single-numa-node"]
_BIG = np.int64(1 << 40)
_BOUND = 1 << 59
Requests = list[tuple[str, int]]  # (resource, thousandths), non-zero only


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


def _milli(q: Quantity) -> int | None:
    m = q.amount * 1000
    return m.numerator if m.denominator == 1 and abs(m.numerator) < _BOUND else None


class Pipeline:
    """Vectorised filter + score of one pod over all known nodes (module docstring)."""

    def __init__(
        self, strategy: ScoringStrategy | None = None, options: FilterOptions = DEFAULT_OPTIONS, zones: int = 8
    ) -> None:
        self.strategy = strategy or ScoringStrategy()
        self.options = options
        self.cluster = ClusterArrays(zones)
        self._distances = Distances()

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

    def explain(self, pod: Pod, name: str) -> Fit | Reject:
        """The per-node verdict with its explanation for one node."""
        src = self.cluster.sources[self.cluster.index[name]]
        assert src is not None
        return filter_node(pod, src.topology, src.node, fresh=src.fresh, options=self.options)

    def evaluate(self, pod: Pod) -> Evaluation:
        cl = self.cluster
        n = cl.n
        qos = pod.qos_class
        guaranteed = qos == "Guaranteed"
        exotic = any(_milli(q) is None for c in pod.all_containers() for q in c.requests.values())
        exotic = exotic or any(_milli(q) is None for q in pod.overhead.values())
        fallback = cl.irregular[:n] | (cl.present[:n] & exotic)
        score_fallback = fallback
        if self.options.kubelet_admission:
            fallback = fallback | (cl.has_nrt[:n] & ((cl.policy[:n] == 1) | (cl.policy[:n] == 2)))
        if self.strategy.type == "LeastNUMANodes" and cl.slots > MAX_VECTOR_SLOTS:
            score_fallback = np.ones(n, bool)
        if qos == "BestEffort" and not include_non_native(pod):
            feasible = np.ones(n, bool)
        elif exotic:
            feasible = np.zeros(n, bool)
        else:
            feasible = self._filter(pod, guaranteed)
        if not guaranteed:
            scores = np.full(n, MAX_SCORE, np.int64)
        elif exotic:
            scores = np.zeros(n, np.int64)
        else:
            scores = self._score(pod)
        for row in np.flatnonzero((fallback | score_fallback) & cl.present[:n]):
            src = cl.sources[row]
            assert src is not None
            if fallback[row]:
                verdict = filter_node(pod, src.topology, src.node, fresh=src.fresh, options=self.options)
                feasible[row] = isinstance(verdict, Fit)
            scores[row] = score(pod, src.topology, None, self.strategy, fresh=src.fresh)
        return Evaluation(dict(cl.index), feasible, scores)

    # --- filter ------------------------------------------------------------------------------------

    def _requests(self, requests: Mapping[str, Quantity]) -> Requests:
        out = []
        for name in sorted(requests):
            m = _milli(requests[name])
            if m:
                out.append((name, m))
        return out

    def _align(self, reqs: Requests, work: dict[int, I64], guaranteed: bool) -> tuple[B, B]:
        cl = self.cluster
        n = cl.n
        mask = np.ones((n, cl.slots), bool)
        ok = np.ones(n, bool)
        for name, q in reqs:
            c = cl.columns.get(name)
            if name not in ALWAYS_ALLOCATABLE:
                if c is None:
                    ok[:] = False
                    continue
                ok &= cl.adv[c][:n]
            if c is None:
                if not is_host_level(name):
                    mask[:] = False
                continue
            if not guaranteed and is_numa_affine(name):
                suit = cl.listed[c][:n]
            else:
                suit = work.get(c, cl.avail_min[c])[:n] >= q
            if is_host_level(name):
                suit = suit | ~cl.listed_any[c][:n, None]
            mask &= suit
        return ok & mask.any(axis=1), mask

    def _filter(self, pod: Pod, guaranteed: bool) -> B:
        cl = self.cluster
        n = cl.n
        checked = cl.has_nrt[:n] & ~cl.problem[:n] & (cl.policy[:n] == _SNN)
        vec = np.ones(n, bool)
        if (checked & cl.scope_pod[:n]).any():
            fit_pod, _ = self._align(self._requests(pod_request(pod)), {}, guaranteed)
            vec = np.where(cl.scope_pod[:n], fit_pod, vec)
        if (checked & ~cl.scope_pod[:n]).any():
            vec = np.where(cl.scope_pod[:n], vec, self._container_scope(pod, guaranteed))
        if self.options.reject_without_zones:
            vec &= cl.nzones[:n] > 0
        inner = np.where(cl.problem[:n], False, np.where(cl.policy[:n] == _SNN, vec, True))
        return cl.fresh[:n] & (~cl.has_nrt[:n] | inner)

    def _container_scope(self, pod: Pod, guaranteed: bool) -> B:
        cl = self.cluster
        n = cl.n
        ok = np.ones(n, bool)
        for init in pod.init_containers:
            fit, _ = self._align(self._requests(init.requests), {}, guaranteed)
            ok &= fit
        work: dict[int, I64] = {}
        rows = np.arange(n)
        for app in pod.containers:
            reqs = self._requests(app.requests)
            fit, mask = self._align(reqs, work, guaranteed)
            ok &= fit
            charged = [
                (cl.columns[name], q)
                for name, q in reqs
                if name in cl.columns and (guaranteed or not is_numa_affine(name))
            ]
            if not charged:
                continue
            key = np.where(mask & (cl.zone_id[:n] >= 0), cl.zone_id[:n], _BIG)
            slot = key.argmin(axis=1)
            for c, q in charged:
                arr = work.get(c)
                if arr is None:
                    arr = work[c] = cl.avail_min[c][:n].copy()
                sel = ok & cl.listed[c][rows, slot]
                arr[rows[sel], slot[sel]] -= q
        return ok

    # --- score -------------------------------------------------------------------------------------

    def _score(self, pod: Pod) -> I64:
        cl = self.cluster
        n = cl.n
        usable = cl.has_nrt[:n] & cl.fresh[:n] & ~cl.problem[:n]
        if self.strategy.type == "LeastNUMANodes":
            if cl.slots > MAX_VECTOR_SLOTS:
                return np.zeros(n, np.int64)  # every row is scored by the per-node code
            return np.where(usable, least_numa_scores(cl, pod, self._distances), 0)
        scored = usable & (cl.policy[:n] == _SNN)
        out = np.zeros(n, np.int64)
        if (scored & cl.scope_pod[:n]).any():
            out = np.where(cl.scope_pod[:n], self._unit_score(pod_request(pod)), out)
        if (scored & ~cl.scope_pod[:n]).any():
            containers = pod.all_containers()
            if containers:
                total = np.zeros(n, np.int64)
                for c in containers:
                    total += self._unit_score(c.requests)
                out = np.where(cl.scope_pod[:n], out, total // len(containers))
        return np.where(scored, out, 0)

    def _unit_score(self, requests: Mapping[str, Quantity]) -> I64:
        cl = self.cluster
        n = cl.n
        values = [(name, math.ceil(requests[name].amount)) for name in sorted(requests)]
        zeros = np.zeros((n, cl.slots), np.int64)
        if self.strategy.type == "BalancedAllocation":
            zone = _balanced(cl, values, zeros)
        else:
            most = self.strategy.type == "MostAllocated"
            total = zeros.copy()
            weights = 0
            for name, req in values:
                c = cl.columns.get(name)
                av = cl.avail_v[c][:n] if c is not None else zeros
                bad = (av == 0) | (req > av)
                safe = np.where(bad, 1, av)
                part = (req * MAX_SCORE) // safe if most else ((av - req) * MAX_SCORE) // safe
                w = self.strategy.weight(name)
                total += np.where(bad, 0, part) * w
                weights += w
            zone = total // weights if weights else zeros
        zone = np.where(cl.zone_id[:n] >= 0, zone, 0)
        low = np.where(zone == 0, _BIG, zone).min(axis=1)
        return np.where(low == _BIG, 0, low)


def _balanced(cl: ClusterArrays, values: list[tuple[str, int]], zeros: I64) -> I64:
    n = cl.n
    count = len(values)
    if count == 0:
        return zeros
    over = np.zeros(zeros.shape, bool)
    fractions = []
    for name, req in values:
        c = cl.columns.get(name)
        av = cl.avail_v[c][:n] if c is not None else zeros
        f = np.where(av == 0, 1.0, np.float64(req) / np.where(av == 0, 1, av).astype(np.float64))
        over |= f > 1
        fractions.append(f)
    if count == 1:
        return np.where(over, 0, MAX_SCORE).astype(np.int64)
    mean = np.zeros(zeros.shape, np.float64)
    for f in fractions:
        mean += f
    mean /= count
    squares = np.zeros(zeros.shape, np.float64)
    comp = np.zeros(zeros.shape, np.float64)
    for f in fractions:
        d = f - mean
        squares += d * d
        comp += d
    variance = (squares - comp * comp / count) / (count - 1)
    # masked first: a fraction above 1 can make the variance huge, and its cast is meaningless anyway
    return np.trunc(np.where(over, 0.0, (1 - variance) * MAX_SCORE)).astype(np.int64)

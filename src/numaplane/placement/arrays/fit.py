"""Vectorised NodeResourcesFit: the resource part of kube-scheduler's filter and its default score,
for every node at once.

The rule is that of :func:`numaplane.placement.explain.predicates.fits_node` without the node-level predicates
(unschedulable, node name, affinity, taints), and the score that of
:func:`numaplane.placement.explain.predicates.default_score`, exactly, for any quantities:

* a pod fits node ``row`` iff the node's pod count is below ``max_pods[row]`` (the ceiling of its
  ``pods`` allocatable; no limit when it has none) and, for every resource the pod requests with a
  non-zero amount ``q``, ``q <= allocatable - used`` (a missing entry counts 0);
* the score is LeastAllocated over ``cpu`` and ``memory`` with the scheduler's non-zero defaults
  (100m, 200Mi), 0–100 per resource, their sum halved (floor).

What lives where:

* :mod:`~numaplane.placement.model.fit_quantity` — thousandths, the bounds of exact rows, the exact formulas,
  and a pod's requests prepared for the arrays;
* :mod:`~numaplane.placement.arrays.fit_store` — :class:`~numaplane.placement.arrays.fit_store.FitStore`, the arrays
  (layout, exact and inexact rows, stable rows) and the ways to keep nodes and usage;
* here — :class:`FitArrays`, the store plus request vectors, verdicts and scores.

Verdicts and scores of exact rows come from the int64 arrays; inexact rows are evaluated with the
predicates' formulas, one by one. Requests the int path cannot score (sub-milli, negative or huge
cpu/memory) are scored with exact arithmetic. Scores exceed 100 only through negative amounts
(:meth:`FitArrays.scores_bounded`).

LeastAllocated parts are memoised per (resource, request) and refreshed only for the rows changed
since (``stamp``: per row, the update that last changed it).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from numaplane.placement.arrays.fit_store import FitStore
from numaplane.placement.model.fit_quantity import (
    DEFAULTS,
    I64,
    MEMO_LIMIT,
    REFRESH_SHARE,
    Inexact,
    Parts,
    Request,
    exact_part,
)
from numaplane.resources.pod import Pod

__all__ = ["INPUT_REQUESTS", "FitArrays"]

#: Sets of request inputs whose :class:`Request` a :class:`FitArrays` keeps (all dropped when full).
INPUT_REQUESTS = 4096


class FitArrays(FitStore):
    """Allocatable, used and free resources per resource (array rows) and node (array columns), in
    thousandths, with per-node pod counts (module docstring); NodeResourcesFit verdicts and scores."""

    # --- requests ---------------------------------------------------------------------------------

    def _request(self, pod: Pod) -> Request:
        """The pod's :class:`Request`: remembered for the last pod asked and per the very objects its
        effective requests are computed from (containers, init containers, overhead, pod-level
        requests: copies of one pod, e.g. a workload's pods of one shape, share them and so share one
        request, its charge vector included) while no column is added. An equal pod made of other
        objects gets its own (equal) request."""
        last = self._last
        if last is not None and self._last_pod is pod and last.columns == len(self.columns):
            return last
        inputs = (pod.containers, pod.init_containers, pod.overhead, pod.pod_requests_spec)
        key = (id(inputs[0]), id(inputs[1]), id(inputs[2]), id(inputs[3]))
        known = self._input_requests.get(key)
        if (
            known is not None
            and known[0][0] is inputs[0]
            and known[0][1] is inputs[1]
            and known[0][2] is inputs[2]
            and known[0][3] is inputs[3]
            and known[1].columns == len(self.columns)
        ):
            req = known[1]
        else:
            req = Request(pod, self.columns)
            if len(self._input_requests) >= INPUT_REQUESTS:
                self._input_requests.clear()
            self._input_requests[key] = (inputs, req)  # holds the inputs: their ids stay theirs
        self._last, self._last_pod = req, pod
        return req

    def vector_of(self, pod: Pod) -> I64:
        """The pod's charge vector (:meth:`request_vector` of its effective requests) as
        :meth:`add_vector` takes it (read-only, remembered for the last pod asked)."""
        req = self._request(pod)
        if req.vector is None:
            vec = self.request_vector(pod.effective_requests())[0]
            vec.flags.writeable = False
            req.vector = vec
        return req.vector

    # --- verdicts and scores ----------------------------------------------------------------------

    def feasible(self, pod: Pod, rows: slice | None = None) -> npt.NDArray[np.bool_]:
        """Per row: whether the pod's effective requests fit the node (vacant rows: False); for the
        rows of the slice ``rows`` only (``step`` 1) when given."""
        lo, hi = (0, len(self.names)) if rows is None else rows.indices(len(self.names))[:2]
        req = self._request(pod)
        if req.impossible:
            return np.zeros(max(hi - lo, 0), dtype=np.bool_)
        out: npt.NDArray[np.bool_] = self.count[lo:hi] < self.max_pods[lo:hi]
        for col, value in req.checks:
            out &= self.free[col, lo:hi] >= value
        for row, inexact in self._inexact.items():
            if lo <= row < hi:
                out[row - lo] = self._fits_exactly(req, row, inexact)
        return out

    def _fits_exactly(self, req: Request, row: int, inexact: Inexact) -> bool:
        if int(self.count[row]) >= int(self.max_pods[row]):
            return False
        zero = Fraction(0)
        return all(q <= inexact.alloc.get(r, zero) - inexact.used.get(r, zero) for r, q in req.exact.items())

    @property
    def bounded(self) -> bool:
        """Whether every row is exact: then a pod without negative requests scores 0–100 everywhere."""
        return not self._inexact

    def scores_bounded(self, pod: Pod) -> bool:
        """Whether every score of ``pod`` lies in 0–100, so :meth:`scores` equals ``default_score``
        everywhere. Only negative cpu or memory amounts (the pod's requests, or a node's usage charged
        with such requests) make a score exceed 100, without limit; :meth:`scores` clips each resource's
        part at ``2**62 - 1`` then."""
        req = self._request(pod)
        if any(req.exact.get(name, DEFAULTS[name]) < 0 for name in ("cpu", "memory")):
            return False
        return all(inexact.used.get(name, 0) >= 0 for inexact in self._inexact.values() for name in ("cpu", "memory"))

    def scores(self, pod: Pod, rows: npt.NDArray[np.intp] | None = None) -> I64:
        """LeastAllocated over cpu and memory with the scheduler's non-zero defaults (0–100 unless
        :meth:`scores_bounded` says otherwise); for the nodes ``rows`` only (in that order) when given."""
        if rows is not None and len(rows) * REFRESH_SHARE > len(self.names):
            return self.scores(pod)[rows]  # many nodes: the memoised parts are cheaper than a gather
        req = self._request(pod)
        if rows is not None and self._cpu is not None and self._mem is not None:
            (cpu, cpu_fast), (mem, mem_fast) = req.score["cpu"], req.score["memory"]
            if cpu_fast and mem_fast:
                total = self._compute_both(cpu, mem, rows)
                if self._inexact:
                    self._score_inexact(req, total, rows)
                return total
        total = np.zeros(len(self.names) if rows is None else len(rows), dtype=np.int64)
        for col, name in ((self._cpu, "cpu"), (self._mem, "memory")):
            if col is None:
                continue
            milli, fast = req.score[name]
            if fast:
                total += self._part(col, milli) if rows is None else self._compute(col, milli, rows)
            else:
                total += self._exact_parts(col, req.exact.get(name, DEFAULTS[name]), rows)
        total //= 2
        if self._inexact:
            self._score_inexact(req, total, rows)
        return total

    def _score_inexact(self, req: Request, total: I64, rows: npt.NDArray[np.intp] | None) -> None:
        """Overwrite the scores of inexact rows with the predicates' formula."""
        if rows is None:
            where: Iterable[tuple[int, int]] = ((row, row) for row in self._inexact)
        else:
            where = ((i, int(row)) for i, row in enumerate(rows.tolist()) if row in self._inexact)
        zero = Fraction(0)
        for i, row in where:
            inexact = self._inexact[row]
            score = 0
            for name in ("cpu", "memory"):
                cap = inexact.alloc.get(name)
                if cap is not None:
                    score += exact_part(cap, inexact.used.get(name, zero), req.exact.get(name, DEFAULTS[name]))
            total[i] = score // 2

    def _exact_parts(self, col: int, req: Fraction, rows: npt.NDArray[np.intp] | None) -> I64:
        """One resource's parts by exact arithmetic (requests the int path cannot take: sub-milli,
        negative or huge). Exact rows only; the others are overwritten afterwards."""
        cap = self.alloc[col] if rows is None else self.alloc[col, rows]
        used = self.used[col] if rows is None else self.used[col, rows]
        out = np.zeros(len(cap), dtype=np.int64)
        for i, (c, u) in enumerate(zip(cap.tolist(), used.tolist(), strict=True)):
            if c > 0:
                out[i] = exact_part(Fraction(c, 1000), Fraction(u, 1000), req)
        return out

    def _part(self, col: int, req: int) -> I64:
        """One resource's LeastAllocated part for every node (memoised while nodes are unchanged)."""
        memo = self._memo.get((col, req))
        if memo is None:
            if len(self._memo) >= MEMO_LIMIT * 2:
                self._memo.clear()
            memo = self._memo[(col, req)] = Parts(self._compute(col, req, slice(None)), self.stamp.copy())
            return memo.parts
        stale = np.flatnonzero(memo.stamps != self.stamp)
        if len(stale) * REFRESH_SHARE > len(self.names):
            memo.parts = self._compute(col, req, slice(None))
            memo.stamps = self.stamp.copy()
        elif len(stale):
            memo.parts[stale] = self._compute(col, req, stale)
            memo.stamps[stale] = self.stamp[stale]
        return memo.parts

    def _compute_both(self, cpu: int, memory: int, rows: npt.NDArray[np.intp]) -> I64:
        """``(cpu part + memory part) // 2`` on ``rows``: :meth:`_compute` of both resources (requests
        ``cpu`` and ``memory`` thousandths) in one pass over a ``(2, rows)`` gather — the same integer
        operations per cell, a few hundred rows cost numpy's per-call overhead once instead of twice."""
        assert self._cpu is not None and self._mem is not None
        cols = np.array([[self._cpu], [self._mem]], dtype=np.intp)
        cap = self.alloc[cols, rows]
        requested = self.used[cols, rows]
        requested += np.array([[cpu], [memory]], dtype=np.int64)
        ok = (cap > 0) & (requested <= cap)
        part: I64 = np.where(ok, ((cap - requested) * 100) // np.where(cap > 0, cap, 1), 0)
        total: I64 = part[0] + part[1]
        total //= 2
        return total

    def _compute(self, col: int, req: int, rows: slice | npt.NDArray[np.intp]) -> I64:
        """``floor((cap - used - req) * 100 / cap)`` where ``0 < cap`` and ``used + req <= cap``, else 0
        (``0 <= req < 2**56``; exact for exact rows)."""
        cap = self.alloc[col, rows]
        requested = self.used[col, rows] + req
        ok = (cap > 0) & (requested <= cap)
        part: I64 = np.where(ok, ((cap - requested) * 100) // np.where(cap > 0, cap, 1), 0)
        return part

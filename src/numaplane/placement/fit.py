"""Vectorised NodeResourcesFit: free resources of every node as numpy columns (used by the simulator).

The same rule as :func:`numaplane.placement.predicates.fits_node` for what the simulator models
(resources and the pod count; the simulated pods carry no node selectors, affinity or tolerations
and the nodes no taints), and the same LeastAllocated default score as
:func:`numaplane.placement.predicates.default_score`, computed for all nodes at once. Quantities are
held exactly as int64 thousandths.

Layout and invariants: ``alloc``, ``used`` and ``free`` (= ``alloc - used``) are ``(columns, nodes)``
arrays, so each resource is one contiguous vector. ``negative[row]`` counts the columns where a node's
``free`` is below 0 (``clean``: none). A node fits a request vector ``vec`` (every entry >= 0) iff it has no negative
column and ``free[c] >= vec[c]`` for every requested column — the same as ``used + vec <= alloc`` over
all columns. Default-score parts are memoised per (resource, request) and refreshed only for the rows
changed since (``stamp``). Values of 2**60 thousandths or more, and negative requests, take the direct
formulas instead, so int64 arithmetic behaves exactly as before in every case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["FitArrays"]

_DEFAULT_CPU_MILLI = 100
_DEFAULT_MEMORY_MILLI = 200 * 1024 * 1024 * 1000
_SAFE = 1 << 60  # below this, no sum or product of the fast paths can leave int64
_MEMO_LIMIT = 64  # memoised score parts per resource
_REFRESH_SHARE = 4  # a memo with more than 1/_REFRESH_SHARE of its rows stale is recomputed whole


def _milli(amount: Fraction) -> int:
    return -((-amount.numerator * 1000) // amount.denominator)  # ceil, like MilliValue


class _Parts:
    """One resource's LeastAllocated part of every node for one request, valid at ``stamps``."""

    __slots__ = ("parts", "stamps")

    def __init__(self, parts: npt.NDArray[np.int64], stamps: npt.NDArray[np.int64]) -> None:
        self.parts = parts
        self.stamps = stamps


class FitArrays:
    """Free and allocatable resources per resource (rows of the arrays) and node (columns), in thousandths."""

    def __init__(self, names: Sequence[str], allocatable: Sequence[Mapping[str, Quantity]]) -> None:
        columns: list[str] = []
        for alloc in allocatable:
            for r in alloc:
                if r not in columns:
                    columns.append(r)
        self.names = list(names)
        self.columns = {r: i for i, r in enumerate(columns)}
        self.alloc = np.zeros((len(columns), len(names)), dtype=np.int64)
        for row, alloc in enumerate(allocatable):
            for r, q in alloc.items():
                self.alloc[self.columns[r], row] = _milli(q.amount)
        self.used = np.zeros_like(self.alloc)
        self.free = self.alloc.copy()
        self.negative = (self.free < 0).sum(axis=0)
        self.clean = self.negative == 0  # nodes without a negative column
        self.stamp = np.zeros(len(names), dtype=np.int64)  # per node: the update that last changed it
        self._stamps = 0
        self._big = bool(len(names)) and bool(np.abs(self.alloc).max(initial=0) >= _SAFE)
        self._memo: dict[tuple[int, int], _Parts] = {}
        self._cpu = self.columns.get("cpu")
        self._mem = self.columns.get("memory")
        self._pods = self.columns.get("pods")
        self._last: tuple[Pod, npt.NDArray[np.int64], bool] | None = None
        self._last_fast: tuple[list[tuple[int, int]], bool] = ([], True)  # its non-zero entries; all in 0..2**60

    def request_vector(self, requests: Mapping[str, Quantity]) -> tuple[npt.NDArray[np.int64], bool]:
        """The pod's request column (plus one pod) and whether every requested resource is known."""
        vec = np.zeros(len(self.columns), dtype=np.int64)
        known = True
        for r, q in requests.items():
            if q.is_zero():
                continue
            col = self.columns.get(r)
            if col is None:
                known = False
                continue
            vec[col] = _milli(q.amount)
        if self._pods is not None:
            vec[self._pods] = 1000
        return vec, known

    def _vector(self, pod: Pod) -> tuple[npt.NDArray[np.int64], bool]:
        """:meth:`request_vector` of the pod's effective requests, remembered for the last pod asked
        (read-only)."""
        last = self._last
        if last is not None and last[0] is pod:
            return last[1], last[2]
        vec, known = self.request_vector(pod.effective_requests())
        vec.flags.writeable = False
        values = vec.tolist()
        requested = [(col, v) for col, v in enumerate(values) if v]
        simple = all(0 <= v < _SAFE for v in values)
        self._last = (pod, vec, known)
        self._last_fast = (requested, simple)
        return vec, known

    def vector_of(self, pod: Pod) -> npt.NDArray[np.int64]:
        """The pod's request vector as :meth:`add_vector` takes it (read-only)."""
        return self._vector(pod)[0]

    def feasible(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """Nodes where the pod's effective requests fit in allocatable − used."""
        vec, known = self._vector(pod)
        if not known:
            return np.zeros(len(self.names), dtype=np.bool_)
        requested, simple = self._last_fast
        if self._big or not simple:
            fits: npt.NDArray[np.bool_] = np.all(self.used + vec[:, None] <= self.alloc, axis=0)
            return fits
        out: npt.NDArray[np.bool_] = self.clean.copy()
        for col, value in requested:
            out &= self.free[col] >= value
        return out

    @property
    def bounded(self) -> bool:
        """Whether every score is within 0–100 (no quantity large enough to overflow int64 math)."""
        return not self._big

    def scores(self, pod: Pod, rows: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.int64]:
        """LeastAllocated over cpu and memory with the scheduler's non-zero defaults, 0–100; for the
        nodes ``rows`` only (in that order) when given."""
        if rows is not None and len(rows) * _REFRESH_SHARE > len(self.names):
            return self.scores(pod)[rows]  # many nodes: the memoised parts are cheaper than a gather
        reqs = pod.effective_requests()
        total = np.zeros(len(self.names) if rows is None else len(rows), dtype=np.int64)
        for col, name, default in (
            (self._cpu, "cpu", _DEFAULT_CPU_MILLI),
            (self._mem, "memory", _DEFAULT_MEMORY_MILLI),
        ):
            if col is None:
                continue
            q = reqs.get(name)
            req = _milli(q.amount) if q is not None and not q.is_zero() else default
            total += self._part(col, req) if rows is None else self._compute(col, req, rows)
        return total // 2

    def _part(self, col: int, req: int) -> npt.NDArray[np.int64]:
        """One resource's LeastAllocated part for every node (memoised while nodes are unchanged)."""
        if self._big or not 0 <= req < _SAFE:
            return self._compute(col, req, slice(None))
        memo = self._memo.get((col, req))
        if memo is None:
            if len(self._memo) >= _MEMO_LIMIT * 2:
                self._memo.clear()
            memo = self._memo[(col, req)] = _Parts(self._compute(col, req, slice(None)), self.stamp.copy())
            return memo.parts
        stale = np.flatnonzero(memo.stamps != self.stamp)
        if len(stale) * _REFRESH_SHARE > len(self.names):
            memo.parts = self._compute(col, req, slice(None))
            memo.stamps = self.stamp.copy()
        elif len(stale):
            memo.parts[stale] = self._compute(col, req, stale)
            memo.stamps[stale] = self.stamp[stale]
        return memo.parts

    def _compute(self, col: int, req: int, rows: slice | npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        cap = self.alloc[col, rows]
        requested = self.used[col, rows] + req
        ok = (cap > 0) & (requested <= cap)
        part: npt.NDArray[np.int64] = np.where(ok, ((cap - requested) * 100) // np.where(cap > 0, cap, 1), 0)
        return part

    def add(self, row: int, requests: Mapping[str, Quantity], sign: int = 1) -> None:
        """Charge (``sign`` 1) or release (-1) ``requests`` (plus one pod) on node ``row``."""
        self.add_vector(row, self.request_vector(requests)[0], sign)

    def add_vector(self, row: int, vec: npt.NDArray[np.int64], sign: int = 1) -> None:
        """:meth:`add` with the request vector already computed."""
        used = self.used[:, row]
        used += sign * vec
        free = self.alloc[:, row] - used
        self.free[:, row] = free
        negative = sum(1 for x in free.tolist() if x < 0)
        self.negative[row] = negative
        self.clean[row] = negative == 0
        if not self._big:
            values = used.tolist()
            if values and (max(values) >= _SAFE or min(values) <= -_SAFE):
                self._big = True  # from now on the direct formulas (a cautious switch is harmless)
        self._stamps += 1
        self.stamp[row] = self._stamps

    def cpu_used_fraction(self) -> float:
        if self._cpu is None:
            return 0.0
        cap = int(self.alloc[self._cpu].sum())
        return float(self.used[self._cpu].sum()) / cap if cap else 0.0

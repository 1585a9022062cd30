"""Vectorised NodeResourcesFit: the resource part of kube-scheduler's filter and its default score,
for every node at once.

The rule is that of :func:`numaplane.placement.predicates.fits_node` without the node-level predicates
(unschedulable, node name, affinity, taints), and the score that of
:func:`numaplane.placement.predicates.default_score`, exactly, for any quantities:

* a pod fits node ``row`` iff the node's pod count is below ``max_pods[row]`` (the ceiling of its
  ``pods`` allocatable; no limit when it has none) and, for every resource the pod requests with a
  non-zero amount ``q``, ``q <= allocatable - used`` (a missing entry counts 0);
* the score is LeastAllocated over ``cpu`` and ``memory`` with the scheduler's non-zero defaults
  (100m, 200Mi), 0–100 per resource, their sum halved (floor).

Layout: one column per resource name (``columns``; only ever appended) and one row per node (``names``,
``index``). ``alloc``, ``used`` and ``free`` (= ``alloc - used``) are ``(columns, rows)`` int64 arrays of
*thousandths*, so each resource is one contiguous vector; ``count`` is each node's pod count and
``max_pods`` its limit. A row is *exact* when every allocatable amount is a whole number of thousandths
of magnitude below ``2**56`` and every used amount a whole number of thousandths in ``[0, 2**56)``:
then the int64 arithmetic below cannot overflow and equals the Fraction arithmetic of the predicates
(a request ``q`` exceeds a whole number ``f`` of thousandths iff ``ceil(1000 q) > f``, so requests are
compared as rounded-up thousandths, like ``MilliValue``). Other rows (sub-milli, huge, or negative
usage) keep their exact values as Fractions and are evaluated with the predicates' formulas, one by
one; their array entries are clipped approximations that no verdict or score is taken from. Requests
the int path cannot score (sub-milli, negative or huge cpu/memory) are scored with exact arithmetic.
Scores exceed 100 only through negative amounts (:meth:`FitArrays.scores_bounded`).

Rows are stable: a node keeps its row while it exists; a removed node's row becomes *vacant*
(``names[row] is None``, ``max_pods`` 0, so nothing fits there) and is reused, lowest first, by the
next node added. Two ways to keep usage:

* the simulator's: a fixed node list, pods charged and released with :meth:`add_vector` (the request
  vector of :meth:`vector_of`, in rounded-up thousandths, plus one pod);
* a long-running scheduler's: :meth:`set_node` (added or allocatable changed), :meth:`remove_node`,
  and :meth:`set_usage` with the exact sum of the node's pods' requests and their count.

LeastAllocated parts are memoised per (resource, request) and refreshed only for the rows changed
since (``stamp``: per row, the update that last changed it).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["FitArrays"]

I64 = npt.NDArray[np.int64]

_DEFAULT_CPU_MILLI = 100
_DEFAULT_MEMORY_MILLI = 200 * 1024 * 1024 * 1000
_DEFAULTS = {"cpu": Fraction(_DEFAULT_CPU_MILLI, 1000), "memory": Fraction(_DEFAULT_MEMORY_MILLI, 1000)}
# Exact rows hold |alloc| < _SAFE and 0 <= used < _SAFE thousandths: free stays within ±2**57, a
# score's used + request below 2**57 and (alloc - requested) * 100 of a fitting node below 2**63.
_SAFE = 1 << 56
_CLIP = 1 << 62  # requests compared with exact rows are clipped to ±_CLIP: the verdicts are unchanged
_APPROX = 1 << 60  # the array entries of inexact rows are clipped to ±_APPROX (their difference fits int64)
_NO_LIMIT = 1 << 62  # max_pods of a node without a pods allocatable
_PART_CLIP = (1 << 62) - 1  # score parts above 100 (negative requests only) are clipped here: sums fit int64
_MEMO_LIMIT = 64  # memoised score parts per resource
_REFRESH_SHARE = 4  # a memo with more than 1/_REFRESH_SHARE of its rows stale is recomputed whole


def _milli(amount: Fraction) -> int:
    return -((-amount.numerator * 1000) // amount.denominator)  # ceil, like MilliValue


def _whole_milli(amount: Fraction) -> bool:
    """Whether ``amount`` is a whole number of thousandths."""
    return 1000 % amount.denominator == 0


def _clip(value: int, bound: int) -> int:
    return -bound if value < -bound else bound if value > bound else value


def _max_pods(allocatable: Mapping[str, Quantity]) -> int:
    pods = allocatable.get("pods")
    return _NO_LIMIT if pods is None else _clip(pods.value(), _NO_LIMIT)


def _exact_part(cap: Fraction, used: Fraction, req: Fraction) -> int:
    """One resource's LeastAllocated part, as :func:`~numaplane.placement.predicates.default_score`
    (never negative), clipped to ``_PART_CLIP``."""
    if cap <= 0:
        return 0
    requested = used + req
    if requested > cap:
        return 0
    return min(int((cap - requested) * 100 / cap), _PART_CLIP)


class _Parts:
    """One resource's LeastAllocated part of every node for one request, valid at ``stamps``."""

    __slots__ = ("parts", "stamps")

    def __init__(self, parts: I64, stamps: I64) -> None:
        self.parts = parts
        self.stamps = stamps


class _Inexact:
    """The exact allocatable and used amounts (in units, not thousandths) of a row that is not exact."""

    __slots__ = ("alloc", "used")

    def __init__(self, alloc: dict[str, Fraction], used: dict[str, Fraction]) -> None:
        self.alloc = alloc
        self.used = used


class _Request:
    """A pod's effective requests as the arrays compare them (built for :attr:`FitArrays.columns` of a
    given size: a new column can make an unknown resource known)."""

    __slots__ = ("checks", "columns", "exact", "impossible", "pod", "score", "vector")

    def __init__(self, pod: Pod, columns: Mapping[str, int]) -> None:
        self.pod = pod
        self.columns = len(columns)
        self.exact: dict[str, Fraction] = {}  # non-zero requests
        self.checks: list[tuple[int, int]] = []  # (column, rounded-up thousandths clipped to ±_CLIP)
        self.impossible = False  # a positive request of a resource no node has nor uses
        # per score resource: (thousandths, True) when the memoised int path applies, else (0, False)
        self.score: dict[str, tuple[int, bool]] = {
            "cpu": (_DEFAULT_CPU_MILLI, True),
            "memory": (_DEFAULT_MEMORY_MILLI, True),
        }
        for r, q in pod.effective_requests().items():
            amount = q.amount
            if not amount:
                continue
            self.exact[r] = amount
            milli = _milli(amount)
            if r in self.score:
                self.score[r] = (milli, True) if _whole_milli(amount) and 0 <= milli < _SAFE else (0, False)
            col = columns.get(r)
            if col is None:
                self.impossible = self.impossible or amount > 0
                continue
            self.checks.append((col, -_CLIP if milli < -_CLIP else _CLIP if milli > _CLIP else milli))
        self.vector: I64 | None = None


class FitArrays:
    """Allocatable, used and free resources per resource (array rows) and node (array columns), in
    thousandths, with per-node pod counts (module docstring)."""

    def __init__(self, names: Sequence[str], allocatable: Sequence[Mapping[str, Quantity]]) -> None:
        if len(names) != len(allocatable):
            raise ValueError("one allocatable map per node name")
        columns: dict[str, int] = {}
        for alloc in allocatable:
            for r in alloc:
                columns.setdefault(r, len(columns))
        n = len(names)
        self.columns = columns
        self.names: list[str | None] = list(names)
        self.index: dict[str, int] = {name: row for row, name in enumerate(names)}
        if len(self.index) != n:
            raise ValueError("node names must be unique")
        self._alloc_buf = np.zeros((len(columns), n), dtype=np.int64)
        self._used_buf = np.zeros_like(self._alloc_buf)
        self._free_buf = np.zeros_like(self._alloc_buf)
        self._count_buf = np.zeros(n, dtype=np.int64)
        self._max_buf = np.zeros(n, dtype=np.int64)
        self._stamp_buf = np.zeros(n, dtype=np.int64)
        self._bind_views()
        self._vacant: list[int] = []  # heap of vacant rows
        self._inexact: dict[int, _Inexact] = {}
        self._stamps = 0
        self._memo: dict[tuple[int, int], _Parts] = {}
        self._last: _Request | None = None
        self._cpu = columns.get("cpu")
        self._mem = columns.get("memory")
        for row, alloc in enumerate(allocatable):
            self.max_pods[row] = _max_pods(alloc)
            exact = {r: q.amount for r, q in alloc.items()}
            if all(self._alloc_ok(v) for v in exact.values()):
                for r, amount in exact.items():
                    self.alloc[columns[r], row] = amount.numerator * 1000 // amount.denominator
            else:
                self._write(row, exact, {})
        self.free[:] = self.alloc

    # --- layout ---------------------------------------------------------------------------------

    def _bind_views(self) -> None:
        n = len(self.names)
        self.alloc: I64 = self._alloc_buf[:, :n]
        self.used: I64 = self._used_buf[:, :n]
        self.free: I64 = self._free_buf[:, :n]
        self.count: I64 = self._count_buf[:n]
        self.max_pods: I64 = self._max_buf[:n]
        self.stamp: I64 = self._stamp_buf[:n]

    def _grow(self, rows: int, columns: int) -> None:
        """Room for at least ``rows`` rows and exactly ``columns`` columns (amortised doubling)."""
        cap = self._count_buf.shape[0]
        new_cap = cap if rows <= cap else max(rows, 2 * cap, 16)
        if new_cap != cap or columns != self._alloc_buf.shape[0]:
            old_cols = self._alloc_buf.shape[0]
            for attr in ("_alloc_buf", "_used_buf", "_free_buf"):
                buf = np.zeros((columns, new_cap), dtype=np.int64)
                buf[:old_cols, :cap] = getattr(self, attr)
                setattr(self, attr, buf)
            for attr in ("_count_buf", "_max_buf", "_stamp_buf"):
                buf1 = np.zeros(new_cap, dtype=np.int64)
                buf1[:cap] = getattr(self, attr)
                setattr(self, attr, buf1)
        self._bind_views()

    def _ensure_columns(self, resources: Iterable[str]) -> None:
        """Append a column (all zeros) for every resource not yet known."""
        added = False
        for r in resources:
            if r not in self.columns:
                self.columns[r] = len(self.columns)
                added = True
        if added:
            self._grow(len(self.names), len(self.columns))
            self._cpu = self.columns.get("cpu")
            self._mem = self.columns.get("memory")

    @staticmethod
    def _alloc_ok(amount: Fraction) -> bool:
        """Whether an allocatable amount can be held exactly in an exact row."""
        return 1000 % amount.denominator == 0 and -_SAFE < amount.numerator * 1000 // amount.denominator < _SAFE

    @staticmethod
    def _used_ok(amount: Fraction) -> bool:
        """Whether a used amount can be held exactly in an exact row."""
        return 1000 % amount.denominator == 0 and 0 <= amount.numerator * 1000 // amount.denominator < _SAFE

    def _exact_values(self, row: int) -> tuple[dict[str, Fraction], dict[str, Fraction]]:
        """The row's exact allocatable and used amounts (entries at 0 may be left out)."""
        inexact = self._inexact.get(row)
        if inexact is not None:
            return dict(inexact.alloc), dict(inexact.used)
        alloc = self.alloc[:, row].tolist()
        used = self.used[:, row].tolist()
        names = list(self.columns)
        return (
            {names[c]: Fraction(v, 1000) for c, v in enumerate(alloc) if v},
            {names[c]: Fraction(v, 1000) for c, v in enumerate(used) if v},
        )

    def _write(self, row: int, alloc: dict[str, Fraction], used: dict[str, Fraction]) -> None:
        """Store a row's exact amounts (adding columns for new names), exact or not, and stamp it."""
        self._ensure_columns([*alloc, *used])
        exact = all(self._alloc_ok(v) for v in alloc.values()) and all(self._used_ok(v) for v in used.values())
        a = [0] * len(self.columns)
        u = [0] * len(self.columns)
        for r, v in alloc.items():
            a[self.columns[r]] = _clip(_milli(v), _APPROX)
        for r, v in used.items():
            u[self.columns[r]] = _clip(_milli(v), _APPROX)
        self.alloc[:, row] = a
        self.used[:, row] = u
        self.free[:, row] = self.alloc[:, row] - self.used[:, row]
        if exact:
            self._inexact.pop(row, None)
        else:
            self._inexact[row] = _Inexact(dict(alloc), dict(used))
        self._touch(row)

    def _touch(self, row: int) -> None:
        self._stamps += 1
        self.stamp[row] = self._stamps

    # --- nodes at run time ------------------------------------------------------------------------

    def row(self, name: str) -> int | None:
        """The row of node ``name`` (``None`` if unknown)."""
        return self.index.get(name)

    def set_node(self, name: str, allocatable: Mapping[str, Quantity]) -> int:
        """Add node ``name`` with no pods, or change its allocatable keeping its usage; returns its row.

        A new node takes the lowest vacant row, or a new row at the end (arrays grow by doubling)."""
        row = self.index.get(name)
        if row is None:
            if self._vacant:
                row = heapq.heappop(self._vacant)
            else:
                row = len(self.names)
                self.names.append(name)
                self._grow(row + 1, len(self.columns))
                self._memo.clear()  # memoised parts cover the old rows only
            self.names[row] = name
            self.index[name] = row
            used: dict[str, Fraction] = {}
            self.count[row] = 0
        else:
            used = self._exact_values(row)[1]
        self.max_pods[row] = _max_pods(allocatable)
        self._write(row, {r: q.amount for r, q in allocatable.items()}, used)
        return row

    def remove_node(self, name: str) -> None:
        """Forget node ``name`` (no-op when unknown): its row becomes vacant."""
        row = self.index.pop(name, None)
        if row is None:
            return
        self.names[row] = None
        self.count[row] = 0
        self.max_pods[row] = 0
        self._write(row, {}, {})
        heapq.heappush(self._vacant, row)

    def set_usage(self, name: str, used: Mapping[str, Quantity], pods: int) -> None:
        """Set node ``name``'s usage: ``used`` the exact sum of its pods' effective requests, ``pods``
        their number (no-op for an unknown node)."""
        row = self.index.get(name)
        if row is None:
            return
        self.count[row] = pods
        alloc = self._exact_values(row)[0] if row in self._inexact else None
        if alloc is None and all(self._used_ok(q.amount) for q in used.values()) and used.keys() <= self.columns.keys():
            values = [0] * len(self.columns)
            for r, q in used.items():
                values[self.columns[r]] = q.amount.numerator * 1000 // q.amount.denominator
            self.used[:, row] = values
            self.free[:, row] = self.alloc[:, row] - self.used[:, row]
            self._touch(row)
            return
        if alloc is None:
            alloc = self._exact_values(row)[0]
        self._write(row, alloc, {r: q.amount for r, q in used.items()})

    # --- requests ---------------------------------------------------------------------------------

    def _request(self, pod: Pod) -> _Request:
        last = self._last
        if last is not None and last.pod is pod and last.columns == len(self.columns):
            return last
        req = self._last = _Request(pod, self.columns)
        return req

    def request_vector(self, requests: Mapping[str, Quantity]) -> tuple[I64, bool]:
        """The requests as a charge vector (rounded-up thousandths per column) and whether every
        requested resource has a column (those without are left out)."""
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
        return vec, known

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

    def _fits_exactly(self, req: _Request, row: int, inexact: _Inexact) -> bool:
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
        if any(req.exact.get(name, _DEFAULTS[name]) < 0 for name in ("cpu", "memory")):
            return False
        return all(inexact.used.get(name, 0) >= 0 for inexact in self._inexact.values() for name in ("cpu", "memory"))

    def scores(self, pod: Pod, rows: npt.NDArray[np.intp] | None = None) -> I64:
        """LeastAllocated over cpu and memory with the scheduler's non-zero defaults (0–100 unless
        :meth:`scores_bounded` says otherwise); for the nodes ``rows`` only (in that order) when given."""
        if rows is not None and len(rows) * _REFRESH_SHARE > len(self.names):
            return self.scores(pod)[rows]  # many nodes: the memoised parts are cheaper than a gather
        req = self._request(pod)
        total = np.zeros(len(self.names) if rows is None else len(rows), dtype=np.int64)
        for col, name in ((self._cpu, "cpu"), (self._mem, "memory")):
            if col is None:
                continue
            milli, fast = req.score[name]
            if fast:
                total += self._part(col, milli) if rows is None else self._compute(col, milli, rows)
            else:
                total += self._exact_parts(col, req.exact.get(name, _DEFAULTS[name]), rows)
        total //= 2
        if self._inexact:
            self._score_inexact(req, total, rows)
        return total

    def _score_inexact(self, req: _Request, total: I64, rows: npt.NDArray[np.intp] | None) -> None:
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
                    score += _exact_part(cap, inexact.used.get(name, zero), req.exact.get(name, _DEFAULTS[name]))
            total[i] = score // 2

    def _exact_parts(self, col: int, req: Fraction, rows: npt.NDArray[np.intp] | None) -> I64:
        """One resource's parts by exact arithmetic (requests the int path cannot take: sub-milli,
        negative or huge). Exact rows only; the others are overwritten afterwards."""
        cap = self.alloc[col] if rows is None else self.alloc[col, rows]
        used = self.used[col] if rows is None else self.used[col, rows]
        out = np.zeros(len(cap), dtype=np.int64)
        for i, (c, u) in enumerate(zip(cap.tolist(), used.tolist(), strict=True)):
            if c > 0:
                out[i] = _exact_part(Fraction(c, 1000), Fraction(u, 1000), req)
        return out

    def _part(self, col: int, req: int) -> I64:
        """One resource's LeastAllocated part for every node (memoised while nodes are unchanged)."""
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

    def _compute(self, col: int, req: int, rows: slice | npt.NDArray[np.intp]) -> I64:
        """``floor((cap - used - req) * 100 / cap)`` where ``0 < cap`` and ``used + req <= cap``, else 0
        (``0 <= req < 2**56``; exact for exact rows)."""
        cap = self.alloc[col, rows]
        requested = self.used[col, rows] + req
        ok = (cap > 0) & (requested <= cap)
        part: I64 = np.where(ok, ((cap - requested) * 100) // np.where(cap > 0, cap, 1), 0)
        return part

    # --- the simulator's usage --------------------------------------------------------------------

    def add(self, row: int, requests: Mapping[str, Quantity], sign: int = 1) -> None:
        """Charge (``sign`` 1) or release (-1) ``requests`` and one pod on node ``row``, exactly
        (resources without a column get one)."""
        self._ensure_columns(r for r, q in requests.items() if not q.is_zero())
        if row not in self._inexact and all(self._used_ok(abs(q.amount)) for q in requests.values()):
            self.add_vector(row, self.request_vector(requests)[0], sign)
            return
        alloc, used = self._exact_values(row)
        for r, q in requests.items():
            used[r] = used.get(r, Fraction(0)) + sign * q.amount
        self.count[row] += sign
        self._write(row, alloc, used)

    def add_vector(self, row: int, vec: I64, sign: int = 1) -> None:
        """:meth:`add` with the charge vector already computed (:meth:`vector_of`; rounded-up
        thousandths)."""
        self.count[row] += sign
        if row not in self._inexact:
            old = self.used[:, row].tolist()
            new = [u + sign * v for u, v in zip(old, vec.tolist(), strict=True)]
            if not new or (min(new) >= 0 and max(new) < _SAFE):
                self.used[:, row] = new
                self.free[:, row] = self.alloc[:, row] - self.used[:, row]
                self._stamps += 1
                self.stamp[row] = self._stamps
                return
        alloc, used = self._exact_values(row)
        names = list(self.columns)
        for c, v in enumerate(vec.tolist()):
            if v:
                used[names[c]] = used.get(names[c], Fraction(0)) + Fraction(sign * v, 1000)
        self._write(row, alloc, used)

    def cpu_used_fraction(self) -> float:
        """Used over allocatable CPU summed over all nodes (0.0 without CPUs)."""
        if self._cpu is None:
            return 0.0
        cap = int(self.alloc[self._cpu].sum())
        return float(self.used[self._cpu].sum()) / cap if cap else 0.0

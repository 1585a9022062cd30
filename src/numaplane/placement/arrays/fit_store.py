"""The array store under :class:`~numaplane.placement.arrays.fit.FitArrays`: nodes, allocatable and usage.

Layout: one column per resource name (``columns``; only ever appended) and one row per node (``names``,
``index``). ``alloc``, ``used`` and ``free`` (= ``alloc - used``) are ``(columns, rows)`` int64 arrays of
*thousandths*, so each resource is one contiguous vector; ``count`` is each node's pod count and
``max_pods`` its limit. A row is *exact* when every allocatable amount is a whole number of thousandths
of magnitude below ``2**56`` and every used amount a whole number of thousandths in ``[0, 2**56)``:
then the int64 arithmetic of :mod:`~numaplane.placement.arrays.fit` cannot overflow and equals the Fraction
arithmetic of the predicates (a request ``q`` exceeds a whole number ``f`` of thousandths iff
``ceil(1000 q) > f``, so requests are compared as rounded-up thousandths, like ``MilliValue``). Other
rows (sub-milli, huge, or negative usage) keep their exact values as Fractions (``_inexact``) and are
evaluated with the predicates' formulas, one by one; their array entries are clipped approximations
that no verdict or score is taken from.

Rows are stable: a node keeps its row while it exists; a removed node's row becomes *vacant*
(``names[row] is None``, ``max_pods`` 0, so nothing fits there) and is reused, lowest first, by the
next node added. Two ways to keep usage:

* the simulator's: a fixed node list, pods charged and released with :meth:`FitStore.add_vector` (the
  request vector of :meth:`~numaplane.placement.arrays.fit.FitArrays.vector_of`, in rounded-up thousandths,
  plus one pod);
* a long-running scheduler's: :meth:`FitStore.set_node` (added or allocatable changed),
  :meth:`FitStore.remove_node`, and :meth:`FitStore.set_usage` with the exact sum of the node's pods'
  requests and their count.

Every change stamps the row (``stamp``: per row, the update that last changed it), for the memoised
score parts of :mod:`~numaplane.placement.arrays.fit`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import numpy as np

from numaplane.placement.model.fit_quantity import (
    APPROX,
    I64,
    SAFE,
    Inexact,
    Parts,
    Request,
    clip,
    max_pods_of,
    milli_of,
)
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["FitStore"]


class FitStore:
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
        self._inexact: dict[int, Inexact] = {}
        self._stamps = 0
        self._memo: dict[tuple[int, int], Parts] = {}
        self._last: Request | None = None
        self._last_pod: Pod | None = None  # the pod ``_last`` was asked for
        # ids of a pod's request inputs → (those inputs, its request) (FitArrays._request)
        self._input_requests: dict[tuple[int, int, int, int], tuple[tuple[object, ...], Request]] = {}
        self._cpu = columns.get("cpu")
        self._mem = columns.get("memory")
        for row, alloc in enumerate(allocatable):
            self.max_pods[row] = max_pods_of(alloc)
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
        return 1000 % amount.denominator == 0 and -SAFE < amount.numerator * 1000 // amount.denominator < SAFE

    @staticmethod
    def _used_ok(amount: Fraction) -> bool:
        """Whether a used amount can be held exactly in an exact row."""
        return 1000 % amount.denominator == 0 and 0 <= amount.numerator * 1000 // amount.denominator < SAFE

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
            a[self.columns[r]] = clip(milli_of(v), APPROX)
        for r, v in used.items():
            u[self.columns[r]] = clip(milli_of(v), APPROX)
        self.alloc[:, row] = a
        self.used[:, row] = u
        self.free[:, row] = self.alloc[:, row] - self.used[:, row]
        if exact:
            self._inexact.pop(row, None)
        else:
            self._inexact[row] = Inexact(dict(alloc), dict(used))
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
        self.max_pods[row] = max_pods_of(allocatable)
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

    # --- charge vectors and the simulator's usage -------------------------------------------------

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
            vec[col] = milli_of(q.amount)
        return vec, known

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
            if not new or (min(new) >= 0 and max(new) < SAFE):
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

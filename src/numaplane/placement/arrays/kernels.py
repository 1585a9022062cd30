"""Vectorised filter and score kernels over a :class:`~numaplane.placement.arrays.cluster.ClusterArrays`.

Arrays are ``(slots, rows)``; every kernel computes one value per selected row — ``sel`` is
``slice(0, n)`` (every row, the default: cheap views) or an ascending array of row indices (gathered
copies; results are the same per row, so callers may recompute only the rows that changed) — and is
the exact twin of a per-node rule (the row must be *regular*, see :mod:`numaplane.placement.arrays.cluster`):

* :func:`align` is :func:`numaplane.placement.explain.filter.align`: per requested resource one comparison
  narrows a ``(slots, rows)`` feasibility mask; a row fits when a slot survives. Slots are in ascending
  NUMA id order on regular rows, so "lowest feasible id" is "first feasible slot" (:func:`charge`).
* :func:`unit_score` is the per-zone Most/LeastAllocated or BalancedAllocation score reduced to the
  smallest non-zero zone score. Integer floor divisions are done in float64: with values below 2**46
  (guaranteed for regular rows) the numerators are exact and ``floor(a / b)`` of the correctly rounded
  quotient equals the integer quotient, because the quotient is at most 100 and its distance to the next
  integer is at least ``1 / b``, far above the rounding error ``100 * 2**-53``. BalancedAllocation uses
  the same float operations in the same order as the scalar code.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from functools import lru_cache

import numpy as np

from numaplane.placement.arrays.cluster import F64, I64, B, ClusterArrays
from numaplane.placement.explain.score import MAX_SCORE
from numaplane.placement.model.requests import ALWAYS_ALLOCATABLE, is_host_level, is_numa_affine
from numaplane.placement.model.strategies import ScoringStrategy

__all__ = ["Requests", "Rows", "align", "charge", "count_of", "first_slot", "unit_score"]

Requests = list[tuple[str, int]]  # (resource, thousandths), non-zero only, in name order
Rows = slice | I64  # a row selection: ``slice(0, n)`` or ascending row indices
_NO_SCORE = 1e9


def count_of(cl: ClusterArrays, sel: Rows | None) -> tuple[Rows, int]:
    """``(selection, number of rows it selects)``; ``None`` selects every row ``0 .. n-1``."""
    if sel is None:
        return slice(0, cl.n), cl.n
    if isinstance(sel, slice):
        return sel, len(range(*sel.indices(cl.n)))
    return sel, len(sel)


@lru_cache(maxsize=1024)
def _classes(name: str) -> tuple[bool, bool, bool]:
    """``(always in the node's allocatable list, host-level, NUMA-affine)`` of a resource name."""
    return name in ALWAYS_ALLOCATABLE, is_host_level(name), is_numa_affine(name)


def align(
    cl: ClusterArrays, reqs: Requests, work: Mapping[int, I64], guaranteed: bool, sel: Rows | None = None
) -> tuple[B, B | None]:
    """``(fits per row, feasibility mask (slots, rows) or None when nothing constrained the rows)``
    for the rows ``sel`` (``work`` arrays hold those rows only)."""
    sel, n = count_of(cl, sel)
    ok = np.ones(n, bool)
    mask: B | None = None
    for name, q in reqs:
        c = cl.columns.get(name)
        always, host_level, numa_affine = _classes(name)
        if not always:
            if c is None:
                ok[:] = False
                continue
            ok &= cl.adv[c][sel]
        if c is None:
            if not host_level:
                mask = np.zeros((cl.slots, n), bool)
            continue
        if not guaranteed and numa_affine:
            suit = cl.listed[c][:, sel]
        else:
            suit = work[c] >= q if c in work else cl.avail_min[c][:, sel] >= q
        if host_level:
            suit = suit | ~cl.listed_any[c][sel]
        if mask is None:
            mask = suit.copy()
        else:
            mask &= suit
    if mask is None:
        return ok, None
    return ok & np.logical_or.reduce(mask, axis=0), mask


def first_slot(mask: B) -> B:
    """``(slots, rows)``: only the first True of each row of ``mask`` kept (all False where none).

    Slot s is weighted ``slots - s`` (uint8 up to 255 slots): the largest weight of a row's True slots
    is its first one, and no False slot matches it because weights are >= 1. Reductions along axis 0
    are elementwise over rows, unlike ``argmax`` or ``accumulate`` along the strided axis."""
    slots = mask.shape[0]
    dtype = np.uint8 if slots < 256 else np.int64
    weights = np.arange(slots, 0, -1, dtype=dtype)[:, None]
    top = np.multiply(mask, weights).max(axis=0) if slots else np.zeros(mask.shape[1], dtype)
    out: B = weights == top
    return out


def charge(
    cl: ClusterArrays,
    mask: B | None,
    charged: list[tuple[int, int]],
    work: MutableMapping[int, I64],
    sel: Rows | None = None,
) -> None:
    """Subtract each ``(column, thousandths)`` from the first feasible slot of every row of ``sel``
    (in ``work``, which holds those rows)."""
    if mask is None or not charged:
        return  # unconstrained rows: every requested resource is unlisted, nothing to take
    sel, _ = count_of(cl, sel)
    first = first_slot(mask)  # the first feasible slot of each row
    for c, q in charged:
        arr = work.get(c)
        if arr is None:
            arr = work[c] = cl.avail_min[c][:, sel].copy()
        arr -= q * (first & cl.listed[c][:, sel])


def _min_non_zero(cl: ClusterArrays, zone: F64, sel: Rows) -> I64:
    """Smallest non-zero value over a row's real zone slots (0 if none), for zone scores in 0..100.

    As uint8, ``score - 1`` wraps 0 to 255 and padding slots are forced to 255, so a plain minimum
    skips zero scores and missing zones. The cast truncates toward zero, so a zone score in [0, 101)
    needs no ``trunc`` first."""
    low = zone.astype(np.uint8)
    low -= np.uint8(1)
    low |= cl.pad[:, sel]
    least = low.min(axis=0)
    least += np.uint8(1)  # wraps 255 (no non-zero zone score) to 0
    out: I64 = least.astype(np.int64)
    return out


def unit_score(
    cl: ClusterArrays, values: list[tuple[str, int, int]], strategy: ScoringStrategy, sel: Rows | None = None
) -> I64:
    """Node score per row of ``sel`` for one request list of ``(resource, Value(), thousandths)`` in name
    order.

    Per resource with ``req >= 1`` (``y = 100 * req / avail``): LeastAllocated scores
    ``100 - min(ceil(y), 100)``, summed as ``100 * W - sum(w * min(ceil(y), 100))``; MostAllocated
    scores ``floor(y)``. Both score 0 where the exact request exceeds the exact available (thousandths,
    upstream ``Cmp``: 300m does not fit 200m although both values are 1) or nothing is available.
    ``req == 0`` scores 100 where anything is available (Least) and 0 (Most)."""
    sel, n = count_of(cl, sel)
    if strategy.type == "BalancedAllocation":
        requests = [(name, req) for name, req, _ in values]
        if not isinstance(sel, slice):
            return _min_non_zero(cl, _balanced_gathered(cl, requests, sel), sel)
        return _min_non_zero(cl, _balanced(cl, requests, sel, n), sel)
    if not isinstance(sel, slice):
        return _unit_score_gathered(cl, values, strategy, sel)
    most = strategy.type == "MostAllocated"
    parts = _UnitParts.of(cl, values, strategy)
    if parts.weights == 0:
        return np.zeros(n, np.int64)
    shape = (cl.slots, n)
    acc: F64 | None = None
    y = np.empty(shape)
    for c, numerator, milli, w in parts.scored:
        # branch-free clamps: masked copies mispredict on mixed masks and cost several times more
        fits = cl.avail_m[c][:, sel] >= milli  # exact; implies y <= 100
        if most:
            np.divide(numerator, cl.avail_finf[c][:, sel], out=y)
            np.floor(y, out=y)
            y *= fits
        else:
            np.divide(numerator, cl.avail_fs[c][:, sel], out=y)
            np.ceil(y, out=y)
            np.minimum(y, float(MAX_SCORE), out=y)
            np.maximum(y, ~fits * float(MAX_SCORE), out=y)
        if w != 1:
            y *= w
        if acc is None:
            acc, y = y, np.empty(shape)
        else:
            acc += y
    if acc is None:
        acc = np.zeros(shape)
    return _unit_zone_score(cl, parts, acc, most, sel)


class _UnitParts:
    """A request list's parts for :func:`unit_score` (Least/MostAllocated): ``weights`` (the sum of
    every request's weight), ``base`` (the constant part of the accumulated sum: LeastAllocated's
    resources listed in no zone, which score 0 everywhere), ``scored`` (``(column, 100 * Value(),
    thousandths, weight)`` of the requests with ``Value() >= 1`` listed in some zone) and ``zeros``
    (``(column, weight)`` of LeastAllocated's listed requests with ``Value() == 0``; MostAllocated scores
    them 0). Every per-resource zone value is an integer below ``100 * weight``, so the float64 sum over
    the resources is exact in any order."""

    __slots__ = ("base", "scored", "weights", "zeros")

    def __init__(self) -> None:
        self.weights = 0
        self.base = 0.0
        self.scored: list[tuple[int, float, int, int]] = []
        self.zeros: list[tuple[int, int]] = []

    @staticmethod
    def of(cl: ClusterArrays, values: list[tuple[str, int, int]], strategy: ScoringStrategy) -> _UnitParts:
        most = strategy.type == "MostAllocated"
        parts = _UnitParts()
        for name, req, milli in values:
            w = strategy.weight(name)
            parts.weights += w
            c = cl.columns.get(name)
            if c is None:
                if not most:
                    parts.base += MAX_SCORE * w  # not listed anywhere: the zone's value is 0, so this scores 0
                continue
            if req == 0:
                if not most:
                    parts.zeros.append((c, w))
                continue
            parts.scored.append((c, req * float(MAX_SCORE), milli, w))
        return parts


def _unit_zone_score(cl: ClusterArrays, parts: _UnitParts, acc: F64, most: bool, sel: Rows) -> I64:
    """The node score from the summed per-resource zone values ``acc`` (``(slots, rows)``, consumed):
    LeastAllocated's zero requests added (100 where anything is available), turned into the zone
    score (``100 * W - base - acc`` for Least, ``acc`` for Most), divided by the weights, and the
    smallest non-zero zone score of each row."""
    for c, w in parts.zeros:
        acc += (cl.avail_f[c][:, sel] == 0) * float(MAX_SCORE * w)
    zone = acc if most else np.subtract(float(MAX_SCORE * parts.weights) - parts.base, acc, out=acc)
    if parts.weights != 1:
        np.floor(zone / parts.weights, out=zone)
    return _min_non_zero(cl, zone, sel)


def _unit_score_gathered(
    cl: ClusterArrays, values: list[tuple[str, int, int]], strategy: ScoringStrategy, sel: I64
) -> I64:
    """:func:`unit_score` (Least/MostAllocated) on the ascending row indices ``sel``, every scored
    resource at once: one gather of ``(resources, slots, rows)`` per input array and one pass of each
    operation over it, instead of one small gather and pass per resource (the per-call cost of numpy
    dominates on a search's few hundred rows).

    The per-cell operations are those of :func:`unit_score` (same divisions, ceil/floor and clamps);
    each resource's zone value is an integer below ``100 * weight``, so summing the resources in any
    order (here a reduction over the first axis) gives the exact same float64 sum."""
    most = strategy.type == "MostAllocated"
    parts = _UnitParts.of(cl, values, strategy)
    if parts.weights == 0:
        return np.zeros(len(sel), np.int64)
    acc: F64
    if parts.scored:
        cols, numerators, millis, weights = zip(*parts.scored, strict=True)
        flat = _cells(cl, np.asarray(cols, np.int64), sel)
        fits = np.take(cl.avail_m, flat) >= np.asarray(millis, np.int64)[:, None, None]  # exact; y <= 100
        numerator = np.asarray(numerators)[:, None, None]
        if most:
            y = np.divide(numerator, np.take(cl.avail_finf, flat))
            np.floor(y, out=y)
            y *= fits
        else:
            y = np.divide(numerator, np.take(cl.avail_fs, flat))
            np.ceil(y, out=y)
            np.minimum(y, float(MAX_SCORE), out=y)
            np.maximum(y, ~fits * float(MAX_SCORE), out=y)
        if any(w != 1 for w in weights):
            y *= np.asarray(weights, dtype=np.float64)[:, None, None]
        acc = y[0] if len(cols) == 1 else y.sum(axis=0)
    else:
        acc = np.zeros((cl.slots, len(sel)))
    return _unit_zone_score(cl, parts, acc, most, sel)


def _cells(cl: ClusterArrays, cols: I64, sel: I64) -> I64:
    """Flat positions, in the ``(columns, slots, capacity)`` zone arrays, of the ``(resource, slot,
    row)`` cells of columns ``cols`` and rows ``sel``: for ``np.take`` of every resource at once."""
    out: I64 = (cols[:, None, None] * cl.slots + _slot_range(cl.slots)) * cl.capacity + sel
    return out


@lru_cache(maxsize=64)
def _slot_range(slots: int) -> I64:
    """``(1, slots, 1)``: the slot numbers, for flat positions (read-only, one per slot count)."""
    out = np.arange(slots, dtype=np.int64)[None, :, None]
    out.flags.writeable = False
    return out


def _balanced_gathered(cl: ClusterArrays, values: list[tuple[str, int]], sel: I64) -> F64:
    """:func:`_balanced` on the row indices ``sel`` with every resource's fractions in one
    ``(resources, slots, rows)`` array: one gather and one pass per operation instead of one per
    resource. Each cell sees the same float operations as in :func:`_balanced`, the sums (mean,
    deviations, squares) added one resource after another in the same order; only the maximum, which
    does not depend on the order, is one reduction."""
    n = len(sel)
    shape = (cl.slots, n)
    count = len(values)
    if not count:
        return np.zeros(shape)
    columns = [cl.columns.get(name) for name, _ in values]
    listed = [i for i, c in enumerate(columns) if c is not None]
    fractions: F64
    if listed:
        cols = np.asarray([columns[i] for i in listed], np.int64)
        flat = _cells(cl, cols, sel)
        requests = np.asarray([float(values[i][1]) for i in listed])[:, None, None]
        # req / inf = 0 where nothing is available, plus 1.0 there: the fraction is 1
        got = np.divide(requests, np.take(cl.avail_finf, flat))
        got += np.take(cl.avail_zero, flat)
        if len(listed) == count:
            fractions = got
        else:
            fractions = np.ones((count, *shape))  # a resource no zone lists: fraction 1
            fractions[listed] = got
    else:
        fractions = np.ones((count, *shape))
    highest = fractions[0] if count == 1 else np.maximum.reduce(fractions, axis=0)
    hundred: F64 = np.less_equal(highest, 1).astype(np.float64)
    hundred *= MAX_SCORE
    if count == 1:
        return hundred
    mean = fractions[0] + fractions[1]
    for i in range(2, count):
        mean += fractions[i]
    _divide(mean, count)
    d = fractions - mean
    comp = d[0] + d[1]
    for i in range(2, count):
        comp += d[i]
    d *= d
    squares = d[0] + d[1]
    for i in range(2, count):
        squares += d[i]
    return _balanced_score(comp, squares, count, hundred)


def _balanced_score(comp: F64, squares: F64, count: int, hundred: F64) -> F64:
    """Zone scores from the summed deviations ``comp`` and squared deviations ``squares`` of ``count``
    fractions (both consumed): ``(1 - (squares - comp**2 / count) / (count - 1)) * hundred`` with the
    scalar code's float operations in its order (``hundred``: 100, or 0 where a fraction is above 1).
    Scores lie in [0, 100] (+ rounding): ``_min_non_zero``'s cast truncates like ``int``."""
    comp *= comp
    _divide(comp, count)
    variance = np.subtract(squares, comp, out=squares)
    if count != 2:
        variance /= count - 1
    score: F64 = np.subtract(1, variance, out=variance)
    score *= hundred
    return score


def _divide(values: F64, count: int) -> None:
    """``values /= count`` in place; by a power of two as a multiplication by its inverse, which gives
    the same value (both round the same exact quotient) without the slow division."""
    if count & (count - 1) == 0:
        values *= 1.0 / count
    else:
        values /= count


def _balanced(cl: ClusterArrays, values: list[tuple[str, int]], sel: Rows, n: int) -> F64:
    """Zone scores, with the scalar code's float operations in its order. Where the scalar code adds to
    0.0 first, the first term is taken as is (``0.0 + x == x`` for every x that is not -0.0, and a
    -0.0 only ever enters a square); a division by ``count - 1 == 1`` is left out and one by a power of two is a multiplication (both exact)."""
    shape = (cl.slots, n)
    if not values:
        return np.zeros(shape)
    fractions: list[F64] = []
    for name, req in values:
        c = cl.columns.get(name)
        if c is None:
            f = np.ones(shape)
        else:  # req / inf = 0 where nothing is available, plus 1.0 there: the fraction is 1
            f = np.divide(float(req), cl.avail_finf[c][:, sel])
            f += cl.avail_zero[c][:, sel]
        fractions.append(f)
    count = len(fractions)
    highest = fractions[0] if count == 1 else np.maximum(fractions[0], fractions[1])
    for f in fractions[2:]:
        np.maximum(highest, f, out=highest)
    # some fraction above 1: the zone scores 0; multiplying by 0.0 instead of MAX_SCORE gives a (signed)
    # zero there — the scalar code returns before its last multiplication, the same zone score
    # (a select or a mixed bool-float product mispredicts or casts per element: both cost several passes)
    hundred: F64 = np.less_equal(highest, 1).astype(np.float64)
    hundred *= MAX_SCORE
    if count == 1:
        return hundred
    mean = fractions[0] + fractions[1]
    for f in fractions[2:]:
        mean += f
    _divide(mean, count)
    d = np.subtract(fractions[0], mean)
    squares = d * d
    comp = d
    d = np.empty(shape)
    for f in fractions[1:]:
        np.subtract(f, mean, out=d)
        comp += d
        d *= d
        squares += d
    return _balanced_score(comp, squares, count, hundred)

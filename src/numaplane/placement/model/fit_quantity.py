"""Quantities and requests as :mod:`numaplane.placement.arrays.fit` compares them: thousandths, exactness
bounds and the exact (Fraction) formulas for what the int64 arrays cannot hold.

* the bounds of an *exact* row (``SAFE``) and the clipping of requests and approximate entries;
* :func:`milli_of` (rounded-up thousandths, like ``MilliValue``) and :func:`exact_part`, one resource's
  LeastAllocated part by exact arithmetic;
* :class:`Request`, a pod's effective requests prepared for the arrays (non-zero exact amounts, column
  checks in rounded-up thousandths, the score path per resource); :class:`Inexact`, the exact amounts
  of a row that is not exact; :class:`Parts`, memoised score parts.

Shared by the ``fit`` modules (:mod:`~numaplane.placement.arrays.fit_store`, :mod:`~numaplane.placement.arrays.fit`); not used elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

I64 = npt.NDArray[np.int64]

_DEFAULT_CPU_MILLI = 100
_DEFAULT_MEMORY_MILLI = 200 * 1024 * 1024 * 1000
DEFAULTS = {"cpu": Fraction(_DEFAULT_CPU_MILLI, 1000), "memory": Fraction(_DEFAULT_MEMORY_MILLI, 1000)}
# Exact rows hold |alloc| < SAFE and 0 <= used < SAFE thousandths: free stays within ±2**57, a
# score's used + request below 2**57 and (alloc - requested) * 100 of a fitting node below 2**63.
SAFE = 1 << 56
_CLIP = 1 << 62  # requests compared with exact rows are clipped to ±_CLIP: the verdicts are unchanged
APPROX = 1 << 60  # the array entries of inexact rows are clipped to ±APPROX (their difference fits int64)
_NO_LIMIT = 1 << 62  # max_pods of a node without a pods allocatable
_PART_CLIP = (1 << 62) - 1  # score parts above 100 (negative requests only) are clipped here: sums fit int64
MEMO_LIMIT = 64  # memoised score parts per resource
REFRESH_SHARE = 4  # a memo with more than 1/REFRESH_SHARE of its rows stale is recomputed whole


def milli_of(amount: Fraction) -> int:
    return -((-amount.numerator * 1000) // amount.denominator)  # ceil, like MilliValue


def _whole_milli(amount: Fraction) -> bool:
    """Whether ``amount`` is a whole number of thousandths."""
    return 1000 % amount.denominator == 0


def clip(value: int, bound: int) -> int:
    return -bound if value < -bound else bound if value > bound else value


def max_pods_of(allocatable: Mapping[str, Quantity]) -> int:
    pods = allocatable.get("pods")
    return _NO_LIMIT if pods is None else clip(pods.value(), _NO_LIMIT)


def exact_part(cap: Fraction, used: Fraction, req: Fraction) -> int:
    """One resource's LeastAllocated part, as :func:`~numaplane.placement.explain.predicates.default_score`
    (never negative), clipped to ``_PART_CLIP``."""
    if cap <= 0:
        return 0
    requested = used + req
    if requested > cap:
        return 0
    return min(int((cap - requested) * 100 / cap), _PART_CLIP)


class Parts:
    """One resource's LeastAllocated part of every node for one request, valid at ``stamps``."""

    __slots__ = ("parts", "stamps")

    def __init__(self, parts: I64, stamps: I64) -> None:
        self.parts = parts
        self.stamps = stamps


class Inexact:
    """The exact allocatable and used amounts (in units, not thousandths) of a row that is not exact."""

    __slots__ = ("alloc", "used")

    def __init__(self, alloc: dict[str, Fraction], used: dict[str, Fraction]) -> None:
        self.alloc = alloc
        self.used = used


class Request:
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
            milli = milli_of(amount)
            if r in self.score:
                self.score[r] = (milli, True) if _whole_milli(amount) and 0 <= milli < SAFE else (0, False)
            col = columns.get(r)
            if col is None:
                self.impossible = self.impossible or amount > 0
                continue
            self.checks.append((col, -_CLIP if milli < -_CLIP else _CLIP if milli > _CLIP else milli))
        self.vector: I64 | None = None

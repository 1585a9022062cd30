"""The kubelet's ``iterateCombinations``, with Go's slice aliasing reproduced exactly.

``takeByTopologyNUMADistributed`` walks n-choose-k NUMA combinations with a recursive helper that
builds each combination by ``append(accum, n[i])``, and it *keeps* the slice it was handed
(``bestCombo = combo``, ``bestRemainder = subset``) without copying it. A Go ``append`` writes in
place whenever the backing array still has room, so combinations that share a prefix share one
backing array: the kept slice is overwritten by every later sibling combination. What the kubelet
finally allocates from is therefore the *last* combination written into that array, not the one
whose balance won — e.g. with 8 free NUMA nodes and k = 4 the winner ``[0 1 2 3]`` is read back as
``[0 1 2 7]``, and a remainder subset may even name a NUMA node outside the chosen combination.

This has been upstream behaviour since the distributed algorithm landed (v1.23) and is still the
behaviour of v1.36.2 (``../shared/conformance/cpu-take-oracle.jsonl`` pins it), so numaplane keeps
it, deterministically. :class:`AliasedSlice` is the slice header (backing list, length);
:meth:`AliasedSlice.values` reads the backing list *now*.

Go's growth rule for ``[]int`` below 256 elements doubles the capacity (or takes the needed length
when that is larger) and rounds the byte size up to a malloc size class; for the lengths that occur
here (at most 64 NUMA nodes) that gives capacities 1, 2, 4, 8, 16, 32, 64.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["AliasedSlice", "go_append_capacity", "iterate_combinations", "kept_positions"]

# Go runtime malloc size classes (bytes) up to 2 KiB: enough for []int of up to 256 elements.
_SIZE_CLASSES = (
    8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352,
    384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
)  # fmt: skip
_INT_BYTES = 8


def go_append_capacity(old_cap: int, needed: int) -> int:
    """Capacity of the new backing array when ``append`` outgrows ``old_cap`` (``growslice``, ``[]int``)."""
    new_cap = needed if needed > 2 * old_cap else 2 * old_cap
    if old_cap >= 256 and needed <= 2 * old_cap:
        new_cap = old_cap
        while new_cap < needed:
            new_cap += (new_cap + 3 * 256) // 4
    size = new_cap * _INT_BYTES
    for cls in _SIZE_CLASSES:
        if cls >= size:
            return cls // _INT_BYTES
    return new_cap  # beyond the table: large allocations are page-rounded; never reached here


@dataclass(frozen=True, eq=False)
class AliasedSlice:
    """A Go slice header: ``length`` elements of the shared, mutable ``backing`` list."""

    backing: list[int]
    length: int

    def values(self) -> tuple[int, ...]:
        """The elements as they are in the backing array at this moment."""
        return tuple(self.backing[: self.length])


def iterate_combinations(items: Sequence[int], k: int) -> Iterator[AliasedSlice]:
    """Every k-combination of ``items`` in the kubelet's order, as Go would hand it to the callback.

    Lazy: the next combination is written into the shared arrays only when it is requested, exactly as
    the Go callback sees it (a ``Break`` after a combination leaves the arrays as they are then).
    """
    if k < 1:
        return
    yield from _helper(items, k, 0, [], 0, 0)


def _helper(
    items: Sequence[int], k: int, start: int, backing: list[int], length: int, cap: int
) -> Iterator[AliasedSlice]:
    if k == 0:
        yield AliasedSlice(backing, length)
        return
    for i in range(start, len(items) - k + 1):
        if length < cap:
            child, child_cap = backing, cap  # append writes in place: siblings share this array
        else:
            child_cap = go_append_capacity(cap, length + 1)
            child = backing[:length] + [0] * (child_cap - length)
        child[length] = items[i]
        yield from _helper(items, k - 1, i + 1, child, length + 1, child_cap)


@functools.lru_cache(maxsize=1 << 12)
def kept_positions(n: int, k: int, kept: int, handed_out: int | None = None) -> tuple[int, ...]:
    """What the ``kept``-th (0-based) k-combination of ``n`` items reads as, by position, once the
    walk has handed out ``handed_out`` combinations (``None``: all of them, ``math.comb(n, k)``).

    Callers that score combinations with :func:`itertools.combinations` (same lexicographic order,
    no aliasing, no allocation per combination) keep only the winner's index and ask here which
    items the kubelet then reads from the slice it kept. Pure function of its arguments (cached).
    Precondition: ``0 <= kept < handed_out <= math.comb(n, k)``.
    """
    total = math.comb(n, k)
    limit = total if handed_out is None else handed_out
    if not 0 <= kept < limit <= total:
        raise ValueError(f"combination {kept} of {limit} handed out ({n} choose {k} = {total})")
    kept_slice: AliasedSlice | None = None
    for at, aliased in enumerate(iterate_combinations(range(n), k)):
        if at == kept:
            kept_slice = aliased
        if at + 1 == limit:
            break
    assert kept_slice is not None
    return kept_slice.values()

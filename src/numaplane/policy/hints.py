"""NUMA bitmasks and topology hints (the kubelet's ``topologymanager/bitmask`` and ``TopologyHint``).

A :class:`NUMAMask` is an immutable set of NUMA node ids stored as an int bitmask. The kubelet's
masks cover ids 0–63; the kubelet-exact contract covers those, but this type accepts any
non-negative id so machines with CPU-less GPU-memory nodes (ids 250+) can still be modelled.

Ordering (kubelet ``IsNarrowerThan``): fewer bits is narrower; with equal counts the numerically
smaller mask (more lower-numbered bits) is narrower: ``{0} < {1} < {0,1} < {0,2} < {1,2} < {0,1,2}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

__all__ = [
    "ANY_PREFERRED",
    "NO_AFFINITY",
    "UNSATISFIABLE",
    "MaskTable",
    "NUMAMask",
    "TopologyHint",
    "achievable_ands",
    "all_masks",
    "hint_of",
    "iterate_masks",
    "mask_table",
]

KUBELET_MAX_NUMA_ID = 63


@dataclass(frozen=True, slots=True, order=False)
class NUMAMask:
    """An immutable set of NUMA node ids (bit *i* ⇔ node *i*). Invariant: ``bits >= 0``."""

    bits: int = 0

    @staticmethod
    def of(*ids: int) -> NUMAMask:
        bits = 0
        for i in ids:
            if i < 0:
                raise ValueError(f"negative NUMA id {i}")
            bits |= 1 << i
        return NUMAMask(bits)

    @staticmethod
    def from_ids(ids: Iterable[int]) -> NUMAMask:
        return NUMAMask.of(*ids)

    def ids(self) -> tuple[int, ...]:
        """Ascending node ids (kubelet ``GetBits``)."""
        out = []
        bits = self.bits
        while bits:
            low = bits & -bits
            out.append(low.bit_length() - 1)
            bits ^= low
        return tuple(out)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids())

    def count(self) -> int:
        return self.bits.bit_count()

    def __len__(self) -> int:
        return self.bits.bit_count()

    def is_empty(self) -> bool:
        return self.bits == 0

    def __contains__(self, numa: object) -> bool:
        return isinstance(numa, int) and numa >= 0 and (self.bits >> numa) & 1 == 1

    def is_set(self, numa: int) -> bool:
        return (self.bits >> numa) & 1 == 1

    def __and__(self, other: NUMAMask) -> NUMAMask:
        return NUMAMask(self.bits & other.bits)

    def __or__(self, other: NUMAMask) -> NUMAMask:
        return NUMAMask(self.bits | other.bits)

    def is_narrower_than(self, other: NUMAMask) -> bool:
        """Kubelet ``IsNarrowerThan``: fewer bits, or equal count and numerically smaller."""
        a, b = self.count(), other.count()
        if a == b:
            return self.bits < other.bits
        return a < b

    def is_subset_of(self, other: NUMAMask) -> bool:
        return self.bits & ~other.bits == 0

    def any_set(self, other: NUMAMask) -> bool:
        """Kubelet ``AnySet``: whether the two masks share at least one node."""
        return self.bits & other.bits != 0

    def is_less_than(self, other: NUMAMask) -> bool:
        """Kubelet ``IsLessThan``: numeric comparison of the bitmasks."""
        return self.bits < other.bits

    def kubelet_string(self) -> str:
        """Kubelet ``String()``: binary digits zero-padded to the smallest even width ``w`` with
        ``bits > 2^(w-2)`` (so an exact power of two at an even position keeps its odd width, as upstream)."""
        top = max(62, self.bits.bit_length() + 1)
        for shift in range(top - top % 2, 0, -2):
            if self.bits > (1 << shift):
                return format(self.bits, f"0{shift + 2}b")
        return format(self.bits, "02b")

    def to_list(self) -> list[int]:
        return list(self.ids())

    def __repr__(self) -> str:
        return f"NUMAMask({list(self.ids())})"


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A provider's or the merged NUMA preference. ``numa is None`` means "no NUMA affinity"."""

    numa: NUMAMask | None
    preferred: bool

    def to_dict(self) -> dict[str, object]:
        """The conformance format: ``{"numa": [ids] | null, "preferred": bool}``."""
        return {"numa": None if self.numa is None else self.numa.to_list(), "preferred": self.preferred}

    @staticmethod
    def from_dict(doc: dict[str, object] | None) -> TopologyHint:
        if doc is None:
            return TopologyHint(None, False)
        numa = doc.get("numa")
        preferred = bool(doc.get("preferred", False))
        if numa is None:
            return TopologyHint(None, preferred)
        if not isinstance(numa, list) or not all(isinstance(i, int) and i >= 0 for i in numa):
            raise ValueError(f"invalid NUMA mask {numa!r}: expected a list of node ids")
        return TopologyHint(NUMAMask.from_ids(numa), preferred)


NO_AFFINITY = TopologyHint(None, False)
"""The zero hint: what the ``none`` policy stores and what an unknown container's affinity is."""
ANY_PREFERRED = TopologyHint(None, True)
"""A provider's "don't care" (nil list, nil or empty map after normalisation)."""
UNSATISFIABLE = TopologyHint(None, False)
"""What an empty hint list normalises to ("cannot be satisfied")."""


@lru_cache(maxsize=1 << 16)
def hint_of(bits: int | None, preferred: bool) -> TopologyHint:
    """A shared, immutable hint for ``(mask bits or None, preferred)``; avoids re-allocating hot hints."""
    return TopologyHint(None if bits is None else NUMAMask(bits), preferred)


@lru_cache(maxsize=256)
def all_masks(ids: tuple[int, ...]) -> tuple[NUMAMask, ...]:
    """:func:`iterate_masks` of ``ids``, computed once per distinct id tuple (2^n - 1 masks)."""
    return tuple(iterate_masks(ids))


@dataclass(frozen=True, eq=False)
class MaskTable:
    """Every subset of a node tuple under a *dense* index (bit ``k`` ⇔ ``nodes[k]``), for providers
    that score all masks: ``order`` lists dense indices in kubelet ``IterateBitMasks`` order (empty
    set excluded); ``bits[d]`` is the real NUMA bitmask, ``counts[d]`` its size, ``hints[d]`` the
    shared ``(non-preferred, preferred)`` hints. Build with :func:`mask_table` (cached per tuple)."""

    nodes: tuple[int, ...]
    position: Mapping[int, int]
    order: tuple[int, ...]
    bits: tuple[int, ...]
    counts: tuple[int, ...]
    hints: tuple[tuple[TopologyHint, TopologyHint], ...]

    @staticmethod
    def subset_sums(values: Sequence[int]) -> list[int]:
        """``sums[d]`` = sum of ``values[k]`` over the positions ``k`` in dense mask ``d``."""
        sums = [0]
        for v in values:
            sums += [s + v for s in sums]
        return sums

    def dense(self, ids: Iterable[int]) -> int | None:
        """Dense index of a set of node ids (``None`` if one of them is not in the table)."""
        out = 0
        for i in ids:
            k = self.position.get(i)
            if k is None:
                return None
            out |= 1 << k
        return out


@lru_cache(maxsize=64)
def mask_table(nodes: tuple[int, ...]) -> MaskTable:
    """The :class:`MaskTable` of ``nodes`` (sorted, unique)."""
    position = {n: k for k, n in enumerate(nodes)}
    size = 1 << len(nodes)
    bits = tuple(sum(1 << nodes[k] for k in range(len(nodes)) if (d >> k) & 1) for d in range(size))
    order = tuple(
        NUMAMask(sum(1 << k for k in combo)).bits
        for r in range(1, len(nodes) + 1)
        for combo in combinations(range(len(nodes)), r)
    )
    hints = tuple((hint_of(b, False), hint_of(b, True)) for b in bits)
    return MaskTable(nodes, position, order, bits, tuple(d.bit_count() for d in range(size)), hints)


def iterate_masks(ids: Iterable[int]) -> Iterator[NUMAMask]:
    """All non-empty subsets of ``ids``: by increasing size, lexicographic within a size
    (kubelet ``bitmask.IterateBitMasks``)."""
    nodes = sorted(ids)
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            yield NUMAMask.of(*combo)


# Above this many pairwise ANDs per step, switch to the transform (when the universe is small enough).
_PAIRWISE_LIMIT = 2048
_TRANSFORM_MAX_BITS = 20


def achievable_ands(universe: int, mask_sets: Sequence[set[int]]) -> set[int]:
    """Every value of ``universe & m1 & ... & mk`` with each ``mi`` taken from ``mask_sets[i]``.

    Masks should be subsets of ``universe``. Small sets are combined pairwise; large ones with a
    superset-sum transform over the subsets of ``universe`` (``O(k · n · 2^n)`` for ``n`` nodes):
    the number of tuples whose AND contains ``S`` is the product of the per-set counts of masks
    containing ``S``, and Möbius inversion turns that into exact-AND counts, positive iff achievable.
    """
    result = {universe}
    for i, masks in enumerate(mask_sets):
        if len(result) * len(masks) > _PAIRWISE_LIMIT and universe.bit_count() <= _TRANSFORM_MAX_BITS:
            return _achievable_by_transform(universe, result, mask_sets[i:])
        result = {r & m for r in result for m in masks}
    return result


def _achievable_by_transform(universe: int, start: set[int], rest: Sequence[set[int]]) -> set[int]:
    import numpy as np

    positions = NUMAMask(universe).ids()
    n = len(positions)
    size = 1 << n
    identity = universe == size - 1

    def compress(bits: int) -> int:
        out = 0
        for k, p in enumerate(positions):
            if (bits >> p) & 1:
                out |= 1 << k
        return out

    def expand(dense: int) -> int:
        out = 0
        for k, p in enumerate(positions):
            if (dense >> k) & 1:
                out |= 1 << p
        return out

    # Counts stay below 2^(n·(lists+1)): combine as many lists at once as int64 allows.
    chunk = max(1, 62 // max(n, 1) - 1)
    current = [b if identity else compress(b) for b in start]
    pending = [[m & universe if identity else compress(m & universe) for m in masks] for masks in rest]
    while pending:
        group, pending = [current, *pending[: chunk - 1]], pending[chunk - 1 :]
        counts = np.zeros((len(group), size), dtype=np.int64)
        for row, dense in enumerate(group):
            counts[row, dense] = 1
        for j in range(n):  # superset sums, every list at once
            view = counts.reshape(len(group), -1, 2, 1 << j)
            view[:, :, 0, :] += view[:, :, 1, :]
        exact = counts.prod(axis=0)
        for j in range(n):  # Moebius inversion back to exact-AND tuple counts
            view = exact.reshape(-1, 2, 1 << j)
            view[:, 0, :] -= view[:, 1, :]
        current = np.flatnonzero(exact > 0).tolist()
    return set(current) if identity else {expand(d) for d in current}

"""NUMA bitmasks and topology hints (the kubelet's ``topologymanager/bitmask`` and ``TopologyHint``).

A :class:`NUMAMask` is an immutable set of NUMA node ids stored as an int bitmask. The kubelet's
masks cover ids 0–63; the kubelet-exact contract covers those, but this type accepts any
non-negative id so machines with CPU-less GPU-memory nodes (ids 250+) can still be modelled.

Ordering (kubelet ``IsNarrowerThan``): fewer bits is narrower; with equal counts the numerically
smaller mask (more lower-numbered bits) is narrower: ``{0} < {1} < {0,1} < {0,2} < {1,2} < {0,1,2}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import combinations

__all__ = ["NUMAMask", "TopologyHint", "iterate_masks"]

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


def iterate_masks(ids: Iterable[int]) -> Iterator[NUMAMask]:
    """All non-empty subsets of ``ids``: by increasing size, lexicographic within a size
    (kubelet ``bitmask.IterateBitMasks``)."""
    nodes = sorted(ids)
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            yield NUMAMask.of(*combo)

"""The kubelet Topology Manager's hint merging (``HintMerger`` of ``topologymanager/policy.go``), fast and exact.

Merging (:meth:`HintMerger.merge`) returns exactly what the kubelet's ``HintMerger`` returns
when it folds ``compare`` over the cross product of every resource's hint list, but without
enumerating the cross product (8 NUMA nodes and 3-4 resources would be millions of permutations):

* ``compare`` is a total order on merged hints (ties only between equal masks, see
  :meth:`HintMerger.compare`), so the fold is the maximum of the *set* of merged hints;
* the preferred merged hints are exactly the masks ``M`` that every list offers as a preferred hint
  (or for which the list has a preferred "don't care" hint), ANDed with the default affinity;
* when none exists, the non-preferred candidates are the achievable ANDs of one mask per list,
  computed as a set (pairwise, or by a superset-sum / Möbius transform when the sets are large).

``HintMerger.merge_exhaustive`` is the literal permutation fold, kept as the reference for tests.
NUMA ids are not limited to 0–63 here (the kubelet's bitmask is); the results agree on 0–63.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product

from numaplane.policy.hints import ANY_PREFERRED, UNSATISFIABLE, NUMAMask, TopologyHint, achievable_ands, hint_of

__all__ = ["HintMerger", "ProviderHints", "filter_providers_hints", "max_of_min_affinity_counts"]

ProviderHints = Mapping[str, Sequence[TopologyHint] | None] | None
"""What a provider returns: ``None`` / ``{}`` = no preference; a ``None`` list = no preference for
that resource; an empty list = cannot be satisfied."""


def filter_providers_hints(providers_hints: Sequence[ProviderHints]) -> list[Sequence[TopologyHint]]:
    """Normalise providers' results to one hint list per resource (kubelet ``filterProvidersHints``)."""
    out: list[Sequence[TopologyHint]] = []
    for hints in providers_hints:
        if not hints:
            out.append((ANY_PREFERRED,))
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                out.append((ANY_PREFERRED,))
            elif len(resource_hints) == 0:
                out.append((UNSATISFIABLE,))
            else:
                out.append(resource_hints)
    return out


def max_of_min_affinity_counts(hint_lists: Sequence[Sequence[TopologyHint]]) -> int:
    """Max over the lists of the bit count of each list's narrowest non-nil hint (0 if none).

    The narrowest mask (kubelet ``IsNarrowerThan``) always has the list's smallest bit count, so
    only counts are compared."""
    best = 0
    for hints in hint_lists:
        fewest = min((h.numa.bits.bit_count() for h in hints if h.numa is not None), default=0)
        best = max(best, fewest)
    return best


class HintMerger:
    """Merges normalised hint lists for one machine (kubelet ``HintMerger``).

    ``default_bits`` is the mask of every NUMA node; ``distances[i][j]`` the SLIT distances (needed
    only when ``closest``). Per-mask ranks are cached on the instance, so keep one merger per
    machine and policy (the :class:`TopologyManager` does).
    """

    def __init__(self, default_bits: int, *, closest: bool = False, distances: Mapping[int, Mapping[int, int]] = {}):
        self.default_bits = default_bits
        self.closest = closest
        self._distances = distances
        self._rank: dict[int, tuple[int, int, int]] = {}

    # -- the kubelet's pairwise comparisons (reference semantics) ---------------------------------
    def distance_sum(self, bits: int) -> int:
        """Sum of distance[i][j] over all ordered pairs of mask nodes, diagonal included."""
        ids = NUMAMask(bits).ids()
        return sum(self._distances[i][j] for i in ids for j in ids)

    def mask_winner(self, current: NUMAMask, candidate: NUMAMask) -> NUMAMask:
        """``Narrowest`` or (with ``closest``) ``Closest`` of two different masks."""
        if self.closest and current.count() == candidate.count():
            d_cur, d_cand = self.distance_sum(current.bits), self.distance_sum(candidate.bits)
            if d_cur == d_cand:
                return current if current.is_less_than(candidate) else candidate
            return current if d_cur < d_cand else candidate
        return current if current.is_narrower_than(candidate) else candidate

    def _compare_masks(self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        assert current.numa is not None and candidate.numa is not None
        if current.numa == candidate.numa:
            return current
        return current if self.mask_winner(current.numa, candidate.numa) == current.numa else candidate

    def compare(
        self, current: TopologyHint | None, candidate: TopologyHint, best_non_preferred: int
    ) -> TopologyHint | None:
        """Kubelet ``HintMerger.compare``: which of the running best and a merged candidate wins."""
        assert candidate.numa is not None
        if candidate.numa.count() == 0:
            return current
        if current is None:
            return candidate
        assert current.numa is not None
        if current.preferred != candidate.preferred:
            return candidate if candidate.preferred else current
        if current.preferred:
            return self._compare_masks(current, candidate)
        cur, cand, b = current.numa.count(), candidate.numa.count(), best_non_preferred
        if cur > b:
            return self._compare_masks(current, candidate)
        if cur == b:
            return self._compare_masks(current, candidate) if cand == b else current
        if cand > b:
            return current
        if cand == b:
            return candidate
        if cand != cur:
            return candidate if cand > cur else current
        return self._compare_masks(current, candidate)

    def merge_exhaustive(self, hint_lists: Sequence[Sequence[TopologyHint]]) -> TopologyHint:
        """The kubelet's literal fold over every permutation (exponential; for tests)."""
        best_np = max_of_min_affinity_counts(hint_lists)
        best: TopologyHint | None = None
        for perm in product(*hint_lists):
            merged = self.default_bits
            preferred = True
            first: int | None = None
            for hint in perm:
                if hint.numa is not None:
                    merged &= hint.numa.bits
                    if first is None:
                        first = hint.numa.bits
                    elif hint.numa.bits != first:
                        preferred = False
                if not hint.preferred:
                    preferred = False
            best = self.compare(best, TopologyHint(NUMAMask(merged), preferred), best_np)
        return best if best is not None else TopologyHint(NUMAMask(self.default_bits), False)

    # -- the fast, equivalent merge ---------------------------------------------------------------
    def rank(self, bits: int) -> tuple[int, int, int]:
        """Total order of masks under ``mask_winner``: smaller wins (count, distance sum, value)."""
        r = self._rank.get(bits)
        if r is None:
            r = (bits.bit_count(), self.distance_sum(bits) if self.closest else 0, bits)
            self._rank[bits] = r
        return r

    def merge(self, hint_lists: Sequence[Sequence[TopologyHint]]) -> TopologyHint:
        """Same result as :meth:`merge_exhaustive`, in time linear in the hints (see module doc)."""
        default = self.default_bits
        if any(len(hints) == 0 for hints in hint_lists):
            return hint_of(default, False)
        restricted: list[set[int]] = []
        offered: set[int] = set()
        for hints in hint_lists:
            masks: set[int] = set()
            any_nil = False
            for hint in hints:
                if hint.preferred:
                    if hint.numa is None:
                        any_nil = True
                    else:
                        masks.add(hint.numa.bits)
            offered |= masks
            if not any_nil:
                restricted.append(masks)
        if restricted:
            restricted.sort(key=len)
            common = restricted[0].intersection(*restricted[1:])
            candidates = {m & default for m in common}
        else:
            candidates = {m & default for m in offered}
            candidates.add(default)
        candidates.discard(0)
        if candidates:
            return hint_of(min(candidates, key=self.rank), True)
        # every mask a list offers (-1 marks a nil mask, which merges as the default affinity)
        raw = [{-1 if h.numa is None else h.numa.bits for h in hints} for hints in hint_lists]
        per_list = [{default if m < 0 else m & default for m in masks} for masks in raw]
        achievable = achievable_ands(default, per_list)
        achievable.discard(0)
        if not achievable:
            return hint_of(default, False)
        # non-preferred order: count == B first, then the largest count below B, then the narrowest
        b = max((min(map(int.bit_count, masks - {-1})) for masks in raw if masks != {-1}), default=0)
        at_b = [m for m in achievable if m.bit_count() == b]
        if not at_b:
            below = [m for m in achievable if m.bit_count() < b]
            if below:
                top = max(m.bit_count() for m in below)
                at_b = [m for m in below if m.bit_count() == top]
            else:
                at_b = list(achievable)
        return hint_of(min(at_b, key=self.rank), False)

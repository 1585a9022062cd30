"""Go's slice aliasing in ``iterateCombinations`` and its effect on the distributed algorithm.

The kubelet keeps the combination slice it is handed (``bestCombo = combo``) without copying it;
later combinations that share its backing array overwrite it. These tests pin that behaviour with
values worked out by hand from Go's ``append`` rules, and the allocation it leads to.
"""

from __future__ import annotations

import math
from itertools import combinations

import pytest
from helpers_cpu import fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.policy.cpu_assignment import index_for, take_distributed
from numaplane.policy.cpu_combinations import go_append_capacity, iterate_combinations, kept_positions
from numaplane.topology.cpuset import CPUSet


def test_capacities_follow_go_growth_for_int_slices() -> None:
    assert [go_append_capacity(c, c + 1) for c in (0, 1, 2, 4, 8, 16, 32)] == [1, 2, 4, 8, 16, 32, 64]
    assert go_append_capacity(2, 3) == 4  # doubling, not "just enough"
    assert go_append_capacity(0, 3) == 3  # 24 bytes is a size class


def test_order_at_yield_time_is_lexicographic() -> None:
    seen = [c.values() for c in iterate_combinations([0, 1, 2, 3, 4], 3)]
    assert seen == list(combinations([0, 1, 2, 3, 4], 3))


def test_kept_slice_is_overwritten_by_later_siblings() -> None:
    kept = next(iter(iterate_combinations(list(range(8)), 4)))
    assert kept.values() == (0, 1, 2, 3)
    for _ in iterate_combinations(list(range(8)), 4):
        pass  # a different walk: separate arrays, the kept one is untouched
    assert kept.values() == (0, 1, 2, 3)
    walk = iterate_combinations(list(range(8)), 4)
    first = next(walk)
    for _ in walk:
        pass
    # [0 1 2 x] share the depth-3 array (cap 4): the last sibling written was [0 1 2 7].
    assert first.values() == (0, 1, 2, 7)


def test_slices_that_reallocated_are_not_shared() -> None:
    walk = iterate_combinations([0, 1, 2], 2)
    first = next(walk)
    list(walk)
    # depth 2 appends to a cap-1 slice: every pair gets its own array
    assert first.values() == (0, 1)


def test_distributed_reads_back_the_aliased_combination() -> None:
    """oracle-cpu-take-2811: 127 CPUs over 8 free NUMA nodes; [0 1 2 3] wins, [0 1 2 7] is allocated."""
    topo = fixture("topoDualSocketMultiNumaPerSocketHTLarge")
    idx = index_for(topo)
    got = take_distributed(idx, idx.all_mask, 127)
    assert str(CPUSet.from_mask(got)) == "0-47,112-175,240-254"


def test_remainder_may_come_from_a_node_outside_the_combination() -> None:
    """oracle-cpu-take-0386: 202 CPUs; the aliased remainder subset names NUMA node 5 (not in the combo)."""
    topo = fixture("topoDualSocketMultiNumaPerSocketHTLarge")
    idx = index_for(topo)
    got = CPUSet.from_mask(take_distributed(idx, idx.all_mask, 202))
    assert (
        str(got)
        == "0-14,16-30,32-46,48-62,64-78,80,96-109,112-125,128-141,144-157,160-173,176-189,192-205,224-237,240-253"
    )


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_kept_positions_read_what_the_aliased_walk_leaves_in_the_kept_slice(data: st.DataObject) -> None:
    """The fast distributed path scores with itertools and reads the winner back through
    kept_positions: it must name exactly what the aliased slice holds once the walk stopped."""
    n = data.draw(st.integers(1, 9), label="n")
    k = data.draw(st.integers(1, n), label="k")
    total = math.comb(n, k)
    handed_out = data.draw(st.integers(1, total), label="handed_out")
    kept = data.draw(st.integers(0, handed_out - 1), label="kept")
    items = [10 * i + 3 for i in range(n)]
    slices = []
    for at, aliased in enumerate(iterate_combinations(items, k)):
        slices.append(aliased)
        if at + 1 == handed_out:
            break
    assert tuple(items[p] for p in kept_positions(n, k, kept, handed_out)) == slices[kept].values()
    if handed_out == total:
        assert kept_positions(n, k, kept) == kept_positions(n, k, kept, total)
    with pytest.raises(ValueError):
        kept_positions(n, k, handed_out, handed_out)

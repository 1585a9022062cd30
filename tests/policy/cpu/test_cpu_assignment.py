"""CPU assignment algorithms: fixes (a) and (b), rounding, orderings, errors."""

from __future__ import annotations

import pytest
from helpers_cpu import fixture, machine, with_offline

from numaplane.policy.cpu_assignment import Accumulator, balance, go_round3, index_for, take_distributed, take_packed
from numaplane.policy.errors import UnexpectedAdmissionError
from numaplane.topology.cpuset import CPUSet


def mask(text: str) -> int:
    return CPUSet.parse(text).mask


def fmt(m: int) -> str:
    return CPUSet.from_mask(m).format()


def test_go_rounding_is_half_away_from_zero() -> None:
    assert go_round3(0.0005) == 0.001  # Python's round() would give 0.0 (banker's rounding)
    assert go_round3(-0.0005) == -0.001
    assert go_round3(1.2344) == 1.234
    assert balance([1, 1, 1, 3]) == 0.866


def test_not_enough_cpus_message_counts_the_given_set() -> None:
    idx = index_for(fixture("topoSingleSocketHT"))
    with pytest.raises(UnexpectedAdmissionError) as err:
        take_packed(idx, mask("0,2,4,6"), 5)
    assert str(err.value) == "not enough cpus available to satisfy request: requested=5, available=4"


def test_fix_a_socket_free_uses_real_count() -> None:
    # 2 sockets x 2 NUMA x 2 cores x 2 threads (socketsFirst). CPU 4 (socket 1, NUMA 2) is offline and
    # CPU 6 (socket 1, NUMA 3) is in use. Socket 0 has all 8 CPUs free, but the integer average is
    # 15 // 2 = 7: v1.35 never sees socket 0 as free and takes NUMA 2 + NUMA 0 + one more CPU across
    # both sockets. With the real count (fix (a)) socket 0 is taken whole.
    topo = with_offline(machine(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2), {4})
    idx = index_for(topo)
    assert topo.cpus_per_socket == 7
    assert not idx.numa_first
    got = take_packed(idx, idx.all_mask & ~(1 << 6), 8)
    assert got == idx.socket_mask[0]


def test_fix_a_core_free_uses_real_count() -> None:
    # A core whose sibling is offline is "free" when its one online CPU is free.
    topo = with_offline(machine(sockets=1, numa_per_socket=1, cores_per_numa=4, threads_per_core=2), {4})
    acc = Accumulator(index_for(topo), index_for(topo).all_mask, 0)
    assert acc.free_cores() == [0, 1, 2, 3]


def test_fix_b_group_two_terminates_with_odd_free_counts() -> None:
    # Upstream PR 140730 test vector: v1.35 loops forever here.
    idx = index_for(fixture("topoDualSocketMultiNumaPerSocketHT"))
    got = take_distributed(idx, mask("0-4,10-14,20-24,30-34"), 14, 2)
    assert fmt(got) == "0-3,10-13,20-23,30-31"


@pytest.mark.timeout(20)
def test_fix_b_never_spins_on_any_odd_layout() -> None:
    idx = index_for(fixture("topoDualSocketMultiNumaPerSocketHT"))
    for per_numa in range(1, 10, 2):
        free = 0
        for numa in idx.numa_ids:
            cpus = list(CPUSet.from_mask(idx.numa_mask[numa]))[:per_numa]
            free |= CPUSet(cpus).mask
        for n in range(2, free.bit_count() + 1, 2):
            got = take_distributed(idx, free, n, 2)
            assert got.bit_count() == n
            assert got & ~free == 0


def test_distributed_falls_back_to_packed_when_request_not_multiple_of_group() -> None:
    idx = index_for(fixture("topoDualSocketHT"))
    free = mask("1-5,7-11")
    assert take_distributed(idx, free, 1, 2) == take_packed(idx, free, 1)


def test_uncore_alignment_odd_request_uses_one_thread_of_last_core() -> None:
    idx = index_for(fixture("topoUncoreSingleSocketSMT"))
    assert fmt(take_packed(idx, mask("2-7,10-15"), 6, uncore=True)) == "4-6,12-14"
    assert fmt(take_packed(idx, mask("0-15"), 3, uncore=True)) == "0-1,8"


def test_spread_skips_whole_cores_and_orders_by_id() -> None:
    idx = index_for(fixture("topoDualSocketHT"))
    assert fmt(take_packed(idx, mask("0-11"), 8, spread=True)) == "0-4,6,8,10"
    assert fmt(take_packed(idx, mask("0-11"), 8)) == "0-2,4,6-8,10"  # socket 0, then whole core 1/7


def test_index_is_cached_per_topology_object() -> None:
    topo = fixture("topoSingleSocketHT")
    assert index_for(topo) is index_for(topo)
    other = fixture("topoSingleSocketHT")
    assert index_for(other) is not index_for(topo)

"""The kubelet CPU Manager's CPU assignment algorithms (``cpu_assignment.go``), on int bitmasks.

Three entry points, each returning a CPU bitmask (bit *i* ⇔ CPU *i*) or raising
:class:`~numaplane.policy.errors.UnexpectedAdmissionError` with the kubelet's message:

* :func:`take_packed` — ``takeByTopologyNUMAPacked``: whole NUMA nodes / sockets, (optionally) uncore
  caches, whole cores, then single CPUs, always filling the most used unit first;
* :func:`take_distributed` — ``takeByTopologyNUMADistributed`` (``distribute-cpus-across-numa``);
* :class:`Accumulator` — the ``cpuAccumulator`` with its orderings (``free_sockets`` … ``cpu_order``).

Invariants and conventions (kubelet-managers.md A.3–A.6):

* every ordering sorts by the number of *free* CPUs ascending, ties by ascending id (a total order, so
  results are deterministic); free lists and CPU orders are computed once per step;
* "numaFirst" iff ``num_sockets >= num_numa_nodes`` (the model's counts), else "socketsFirst";
* a NUMA node / socket / core / uncore cache is *free* when its free CPU count equals that object's
  real online CPU count (DESIGN fix (a); v1.35 compares sockets and cores with the machine-wide integer
  averages, which agree on every symmetric machine);
* with a CPU group size above 1 the distributed algorithm counts remainder capacity in whole groups and
  so never loops forever (DESIGN fix (b), upstream PR 140730); any other dead end falls back to packed.
* the distributed algorithm keeps its best NUMA combination and remainder subset the way Go does, as
  slices that later combinations overwrite (:mod:`numaplane.policy.cpu_combinations`): what is allocated
  is what the kubelet allocates, not the combination whose balance won.

The per-topology :class:`TopologyIndex` (masks and membership lists) is built once per ``Topology``
object and cached; all hot loops work on ints.

Why one module over 400 lines: it follows ``pkg/kubelet/cm/cpumanager/cpu_assignment.go`` step for step
(the ``cpuAccumulator`` and its orderings, ``takeByTopologyNUMAPacked``, ``takeByTopologyNUMADistributed``)
so a reviewer can read the two side by side; :class:`TopologyIndex` is that file's ``CPUDetails`` queries
precomputed as bitmasks.
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from numaplane.policy.cpu_combinations import kept_positions
from numaplane.policy.errors import UnexpectedAdmissionError
from numaplane.topology.model import Topology

__all__ = ["Accumulator", "TopologyIndex", "bits", "index_for", "take_distributed", "take_packed"]


def bits(mask: int) -> Iterator[int]:
    """Set bit positions of ``mask``, ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _group(pairs: Iterable[tuple[int, int]]) -> dict[int, tuple[int, ...]]:
    out: dict[int, set[int]] = {}
    for key, value in pairs:
        out.setdefault(key, set()).add(value)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


@dataclass(frozen=True, eq=False)
class TopologyIndex:
    """Precomputed masks of one topology (online CPUs only). Ids are the model's ids.

    It holds no reference to the ``Topology`` itself, so the cache entry dies with the topology.

    ``*_mask[id]`` are CPU bitmasks; ``*_size[id]`` their real CPU counts; ``socket_numas[s]`` etc. list
    the member ids ascending. ``cpus_per_core`` is the kubelet's integer average ``CPUsPerCore``.
    """

    all_mask: int
    numa_first: bool
    cpus_per_core: int
    cpu_core: dict[int, int]
    cpu_numa: dict[int, int]
    cpu_socket: dict[int, int]
    numa_ids: tuple[int, ...]
    socket_ids: tuple[int, ...]
    numa_mask: dict[int, int]
    socket_mask: dict[int, int]
    core_mask: dict[int, int]
    uncore_mask: dict[int, int]
    numa_size: dict[int, int]
    socket_size: dict[int, int]
    core_size: dict[int, int]
    uncore_size: dict[int, int]
    socket_numas: dict[int, tuple[int, ...]]
    numa_sockets: dict[int, tuple[int, ...]]
    socket_cores: dict[int, tuple[int, ...]]
    numa_cores: dict[int, tuple[int, ...]]
    numa_uncores: dict[int, tuple[int, ...]]
    uncore_cores: dict[int, tuple[int, ...]]

    @staticmethod
    def build(topology: Topology) -> TopologyIndex:
        cpus = topology.online_cpus

        def masks(key: str) -> dict[int, int]:
            out: dict[int, int] = {}
            for c in cpus:
                k = getattr(c, key)
                out[k] = out.get(k, 0) | (1 << c.cpu)
            return dict(sorted(out.items()))

        numa_mask, socket_mask = masks("numa"), masks("socket")
        core_mask, uncore_mask = masks("core"), masks("uncore")
        return TopologyIndex(
            all_mask=topology.all_cpus.mask,
            numa_first=topology.num_sockets >= topology.num_numa_nodes,
            cpus_per_core=topology.cpus_per_core,
            cpu_core={c.cpu: c.core for c in cpus},
            cpu_numa={c.cpu: c.numa for c in cpus},
            cpu_socket={c.cpu: c.socket for c in cpus},
            numa_ids=tuple(numa_mask),
            socket_ids=tuple(socket_mask),
            numa_mask=numa_mask,
            socket_mask=socket_mask,
            core_mask=core_mask,
            uncore_mask=uncore_mask,
            numa_size={k: m.bit_count() for k, m in numa_mask.items()},
            socket_size={k: m.bit_count() for k, m in socket_mask.items()},
            core_size={k: m.bit_count() for k, m in core_mask.items()},
            uncore_size={k: m.bit_count() for k, m in uncore_mask.items()},
            socket_numas=_group((c.socket, c.numa) for c in cpus),
            numa_sockets=_group((c.numa, c.socket) for c in cpus),
            socket_cores=_group((c.socket, c.core) for c in cpus),
            numa_cores=_group((c.numa, c.core) for c in cpus),
            numa_uncores=_group((c.numa, c.uncore) for c in cpus),
            uncore_cores=_group((c.uncore, c.core) for c in cpus),
        )

    def numa_cpus(self, numa_bits: int) -> int:
        """CPU mask of the NUMA nodes in ``numa_bits`` (bit *n* ⇔ node *n*)."""
        mask = 0
        for n in bits(numa_bits):
            mask |= self.numa_mask.get(n, 0)
        return mask


_Cache = dict[int, tuple["weakref.ref[Topology]", TopologyIndex]]
_INDEXES: _Cache = {}


def index_for(topology: Topology) -> TopologyIndex:
    """The cached :class:`TopologyIndex` of ``topology`` (built on first use, dropped with it)."""
    key = id(topology)
    entry = _INDEXES.get(key)
    if entry is not None and entry[0]() is topology:
        return entry[1]
    idx = TopologyIndex.build(topology)

    def _drop(_ref: weakref.ref[Topology], k: int = key, cache: _Cache = _INDEXES) -> None:
        cache.pop(k, None)

    _INDEXES[key] = (weakref.ref(topology, _drop), idx)
    return idx


class Accumulator:
    """The ``cpuAccumulator``: ``free`` (still-free CPUs), ``need`` (CPUs still wanted), ``result``.

    ``take`` moves CPUs from free to result. Orderings read only ``free`` (see module docstring).
    """

    __slots__ = ("free", "idx", "need", "result", "spread")

    def __init__(self, idx: TopologyIndex, available: int, need: int, *, spread: bool = False) -> None:
        self.idx = idx
        self.free = available & idx.all_mask
        self.need = need
        self.result = 0
        self.spread = spread

    # -- state ----------------------------------------------------------------------------------
    def take(self, cpus: int) -> None:
        self.result |= cpus
        self.free &= ~self.result
        self.need -= cpus.bit_count()

    def satisfied(self) -> bool:
        return self.need < 1

    def failed(self) -> bool:
        return self.need > self.free.bit_count()

    # -- orderings ------------------------------------------------------------------------------
    def _sort(self, ids: Iterable[int], masks: dict[int, int]) -> list[int]:
        free = self.free
        keyed = sorted(((free & masks[i]).bit_count(), i) for i in ids)
        return [i for _, i in keyed]

    def _present(self, ids: Iterable[int], masks: dict[int, int], within: int) -> list[int]:
        """The ids among ``ids`` that have a free CPU inside ``within``."""
        live = self.free & within
        return [i for i in ids if live & masks[i]]

    def sorted_numas(self) -> list[int]:
        idx = self.idx
        if idx.numa_first:
            return self._sort(self._present(idx.numa_ids, idx.numa_mask, -1), idx.numa_mask)
        out: list[int] = []
        for s in self.sorted_sockets():
            out += self._sort(self._present(idx.socket_numas[s], idx.numa_mask, idx.socket_mask[s]), idx.numa_mask)
        return out

    def sorted_sockets(self) -> list[int]:
        idx = self.idx
        if not idx.numa_first:
            return self._sort(self._present(idx.socket_ids, idx.socket_mask, -1), idx.socket_mask)
        out: list[int] = []
        for n in self.sorted_numas():
            out += self._sort(self._present(idx.numa_sockets[n], idx.socket_mask, idx.numa_mask[n]), idx.socket_mask)
        return out

    def sorted_cores(self) -> list[int]:
        idx = self.idx
        out: list[int] = []
        if idx.numa_first:
            for s in self.sorted_sockets():
                out += self._sort(self._present(idx.socket_cores[s], idx.core_mask, idx.socket_mask[s]), idx.core_mask)
        else:
            for n in self.sorted_numas():
                out += self._sort(self._present(idx.numa_cores[n], idx.core_mask, idx.numa_mask[n]), idx.core_mask)
        return out

    def sorted_uncores(self) -> list[int]:
        idx = self.idx
        out: list[int] = []
        for n in self.sorted_numas():
            out += self._sort(self._present(idx.numa_uncores[n], idx.uncore_mask, idx.numa_mask[n]), idx.uncore_mask)
        return out

    def _whole(self, ids: list[int], masks: dict[int, int], sizes: dict[int, int]) -> list[int]:
        free = self.free
        return [i for i in ids if (free & masks[i]).bit_count() == sizes[i]]

    def free_numas(self) -> list[int]:
        return self._whole(self.sorted_numas(), self.idx.numa_mask, self.idx.numa_size)

    def free_sockets(self) -> list[int]:
        return self._whole(self.sorted_sockets(), self.idx.socket_mask, self.idx.socket_size)

    def free_cores(self) -> list[int]:
        return self._whole(self.sorted_cores(), self.idx.core_mask, self.idx.core_size)

    def free_uncores(self) -> list[int]:
        return self._whole(self.sorted_uncores(), self.idx.uncore_mask, self.idx.uncore_size)

    def cpu_order(self) -> list[int]:
        """Packed: each sorted core's free CPUs ascending. Spread: each sorted socket's free CPUs ascending."""
        out: list[int] = []
        if self.spread:
            for s in self.sorted_sockets():
                out += bits(self.free & self.idx.socket_mask[s])
        else:
            for c in self.sorted_cores():
                out += bits(self.free & self.idx.core_mask[c])
        return out

    # -- taking whole units ---------------------------------------------------------------------
    def _take_whole(self, free_ids: list[int], masks: dict[int, int], sizes: dict[int, int]) -> None:
        for i in free_ids:
            if self.need >= sizes[i]:
                self.take(masks[i])

    def _fits_any(self, sizes: dict[int, int]) -> bool:
        # Shortcut only: a unit is taken only when the need is at least its size.
        return self.need >= min(sizes.values(), default=0)

    def take_full_numas(self) -> None:
        if self._fits_any(self.idx.numa_size):
            self._take_whole(self.free_numas(), self.idx.numa_mask, self.idx.numa_size)

    def take_full_sockets(self) -> None:
        if self._fits_any(self.idx.socket_size):
            self._take_whole(self.free_sockets(), self.idx.socket_mask, self.idx.socket_size)

    def take_full_cores(self) -> None:
        if self._fits_any(self.idx.core_size):
            self._take_whole(self.free_cores(), self.idx.core_mask, self.idx.core_size)

    def take_full_uncores(self) -> None:
        self._take_whole(self.free_uncores(), self.idx.uncore_mask, self.idx.uncore_size)

    def take_partial_uncore(self, uncore: int) -> None:
        """Claim CPUs of the lowest-id cores with free CPUs in ``uncore``, only if they fit the need exactly."""
        idx = self.idx
        per_core = idx.cpus_per_core or 1
        cores_needed = (self.need + per_core - 1) // per_core
        live = self.free & idx.uncore_mask[uncore]
        cores = [c for c in idx.uncore_cores[uncore] if live & idx.core_mask[c]][:cores_needed]
        cpus = 0
        for c in cores:
            cpus |= self.free & idx.core_mask[c]
        if self.need % 2 != 0 and idx.cpus_per_core > 1 and cpus.bit_count() > self.need:
            cpus &= ~(1 << (cpus.bit_length() - 1))  # an odd need uses one thread of the last core
        if cpus.bit_count() == self.need:
            self.take(cpus)

    def take_uncore_caches(self) -> None:
        """Whole uncore caches where the need allows, else one partial cache (best effort)."""
        for uncore in self.sorted_uncores():
            if self.need >= self.idx.uncore_size[uncore]:
                self.take_full_uncores()
            if self.satisfied():
                return
            self.take_partial_uncore(uncore)
            if self.satisfied():
                return

    def take_remaining_cpus(self) -> None:
        for cpu in self.cpu_order():
            self.take(1 << cpu)
            if self.satisfied():
                return


def _not_enough(requested: int, available: int) -> UnexpectedAdmissionError:
    return UnexpectedAdmissionError(
        f"not enough cpus available to satisfy request: requested={requested}, available={available.bit_count()}"
    )


def take_packed(idx: TopologyIndex, available: int, count: int, *, spread: bool = False, uncore: bool = False) -> int:
    """``takeByTopologyNUMAPacked``: ``count`` CPUs out of ``available`` (a CPU mask)."""
    acc = Accumulator(idx, available, count, spread=spread)
    if acc.satisfied():
        return 0
    if acc.failed():
        raise _not_enough(count, available)
    if idx.numa_first:
        acc.take_full_numas()
        if acc.satisfied():
            return acc.result
        acc.take_full_sockets()
    else:
        acc.take_full_sockets()
        if acc.satisfied():
            return acc.result
        acc.take_full_numas()
    if acc.satisfied():
        return acc.result
    if uncore:
        acc.take_uncore_caches()
        if acc.satisfied():
            return acc.result
    if not spread:
        acc.take_full_cores()
        if acc.satisfied():
            return acc.result
    acc.take_remaining_cpus()
    if acc.satisfied():
        return acc.result
    raise UnexpectedAdmissionError("failed to allocate cpus")


def go_round3(value: float) -> float:
    """``math.Round(value*1000)/1000`` as Go computes it (half away from zero)."""
    scaled = value * 1000.0
    whole = float(math.trunc(scaled))
    if abs(scaled - whole) >= 0.5:
        whole += math.copysign(1.0, scaled)
    return whole / 1000.0


def balance(values: list[int]) -> float:
    """Population standard deviation with the kubelet's rounding (mean and result to 3 decimals)."""
    # The ints are small (CPU counts): their sum is exact as a float, so ``sum(values) / n`` is the
    # kubelet's float sum divided by n, and ``v - mean`` its ``float64(v) - mean``; the squares are
    # added left to right as the kubelet adds them.
    n = len(values)
    mean = go_round3(sum(values) / n)
    spread = sum([(v - mean) * (v - mean) for v in values])
    return go_round3(math.sqrt(spread / n))


@functools.lru_cache(maxsize=1 << 12)
def _balance_of(values: tuple[int, ...]) -> float:
    """:func:`balance` of ``values`` (the same floating-point operations in the same order; cached:
    the distributed walk scores the same free-CPU vectors many times; 4,096 entries, about 1 MiB)."""
    return balance(list(values))


#: A remainder subset as the kubelet keeps it: (the candidates' positions, subset size, its index
#: among the size's combinations) -- read back through :func:`kept_positions` once the walk is over.
_KeptSubset = tuple[tuple[int, ...], int, int]


def _best_remainder(
    after: list[int], candidates: tuple[int, ...], remainder: int, group: int
) -> tuple[float, _KeptSubset | None]:
    """Best subset of ``candidates`` (positions into ``after``) to take ``remainder`` CPUs from,
    ``group`` at a time (lowest balance; the first of equals, in the kubelet's order)."""
    best: float = math.inf
    best_subset: _KeptSubset | None = None
    for size in range(len(candidates), 0, -1):
        for index, members in enumerate(itertools.combinations(candidates, size)):
            if sum(after[p] // group for p in members) * group < remainder:
                continue  # fix (b): capacity in whole groups, so the hand-out below always ends
            local = after.copy()
            left = remainder
            while left > 0:
                for p in members:
                    if left == 0:
                        break
                    if local[p] >= group:
                        local[p] -= group
                        left -= group
            score = _balance_of(tuple(local))
            if score < best:
                best, best_subset = score, (candidates, size, index)
    return best, best_subset


def take_distributed(idx: TopologyIndex, available: int, count: int, group: int = 1, *, spread: bool = False) -> int:
    """``takeByTopologyNUMADistributed``: spread ``count`` CPUs evenly over the fewest NUMA nodes.

    CPUs are handed out ``group`` at a time (1, or threads per core with ``full-pcpus-only``).
    Combinations are scored by position with :func:`itertools.combinations` (the kubelet's order);
    the NUMA nodes finally allocated from are those the kubelet reads from the slices it kept, Go's
    aliasing included (:func:`~numaplane.policy.cpu_combinations.kept_positions`).
    """
    group = max(group, 1)
    if count % group != 0:
        return take_packed(idx, available, count, spread=spread)
    acc = Accumulator(idx, available, count, spread=spread)
    if acc.satisfied():
        return 0
    if acc.failed():
        raise _not_enough(count, available)
    numas = acc.sorted_numas()
    free_of = [(acc.free & idx.numa_mask[n]).bit_count() for n in numas]
    groups_of = [free // group for free in free_of]
    total_groups = (idx.all_mask.bit_count() - 1) // group + 1
    per_numa = (total_groups - 1) // max(len(idx.numa_ids), 1) + 1
    needed = (count - 1) // group + 1
    lowest, highest = (needed - 1) // per_numa + 1, min(needed, len(numas))
    for k in range(lowest, highest + 1):
        best: float = math.inf
        best_at = -1
        best_rest: _KeptSubset | None = None
        handed_out = 0
        share = (count // k // group) * group
        remainder = count - share * k
        for at, combo in enumerate(itertools.combinations(range(len(numas)), k)):
            handed_out = at + 1
            if best == 0:
                break
            if sum(free_of[p] for p in combo) < count or sum(groups_of[p] for p in combo) * group < count:
                continue
            if any(free_of[p] < share for p in combo):
                continue
            after = free_of.copy()
            for p in combo:
                after[p] -= share
            rest: _KeptSubset | None = None
            if remainder == 0:
                local = _balance_of(tuple(after))
            else:
                local, rest = _best_remainder(after, tuple(p for p in combo if after[p] >= group), remainder, group)
            if local < best:
                best, best_at, best_rest = local, at, rest
        if best_at >= 0:
            # Read the kept slices only now, as the kubelet does: later combinations that shared their
            # backing arrays have overwritten them (cpu_combinations explains the aliasing).
            combo_now = tuple(numas[p] for p in kept_positions(len(numas), k, best_at, handed_out))
            rest_now: tuple[int, ...] = ()
            if best_rest is not None:
                candidates, size, index = best_rest
                rest_now = tuple(numas[candidates[p]] for p in kept_positions(len(candidates), size, index))
            return _allocate_distribution(acc, available, count, group, combo_now, rest_now)
    return take_packed(idx, available, count, spread=spread)


def _allocate_distribution(
    acc: Accumulator, available: int, count: int, group: int, combo: tuple[int, ...], rest: tuple[int, ...]
) -> int:
    idx = acc.idx
    share = (count // len(combo) // group) * group

    def packed(numa: int, n: int) -> int:
        try:
            return take_packed(idx, acc.free & idx.numa_mask[numa], n, spread=acc.spread)
        except UnexpectedAdmissionError:
            return 0  # upstream ignores this error; the accounting check below reports it

    for numa in combo:
        acc.take(packed(numa, share))
    remainder = count - share * len(combo)
    while remainder > 0:
        progressed = False
        for numa in rest:
            if remainder == 0:
                break
            if (acc.free & idx.numa_mask[numa]).bit_count() < group:
                continue
            acc.take(packed(numa, group))
            remainder -= group
            progressed = True
        if not progressed:  # cannot happen after fix (b); never spin
            return take_packed(idx, available, count, spread=acc.spread)
    if acc.need > 0:
        raise UnexpectedAdmissionError(f"accounting error, not enough CPUs allocated, remaining: {acc.need}")
    if acc.need < 0:
        raise UnexpectedAdmissionError(f"accounting error, too many CPUs allocated, remaining: {acc.need}")
    return acc.result

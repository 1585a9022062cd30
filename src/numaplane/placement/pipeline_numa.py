"""LeastNUMANodes over many nodes at once (the vectorised twin of :mod:`numaplane.placement.least_numa`).

For each set size k the k-combinations of zone *slots* are enumerated once, in lexicographic order, as a
0/1 membership matrix ``(combos, slots)``. Restricted to combinations whose slots all exist on a node
(largest slot < the node's zone count) that is exactly the node's own lexicographic order, so "first
fitting combination" means the same thing. Per node and combination, integer matrix products give how
many slots list each requested resource (valid iff all k do — zero-quantity requests included, as
upstream's ``isValidCombineResources``), the summed ``available`` (fits iff >= the non-zero request) and the distance sum (from the node's cost matrix; cached per row until the row changes).
Nodes are resolved at the smallest k with a fit; the score is ``100 - k * step`` plus ``step // 2``
when the chosen combination has the optimal distance for k. Container scope charges each container
to its chosen zones in NUMA id order, as much as possible from each, before the next container.

Only Guaranteed pods reach this module (others score 100 before). Sums stay exact: each quantity is
below 2**59 thousandths and at most 16 slots are summed (:data:`MAX_VECTOR_SLOTS`; the pipeline uses
the scalar code beyond that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import combinations
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from numaplane.placement.cluster import I64, B, ClusterArrays
from numaplane.placement.least_numa import MAX_SCORE
from numaplane.placement.requests import pod_request
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["MAX_VECTOR_SLOTS", "Distances", "least_numa_scores"]

MAX_VECTOR_SLOTS = 16
_T = TypeVar("_T", bound=np.generic)
_BIG = np.int64(1 << 62)


@cache
def _combos(slots: int, k: int) -> tuple[I64, I64]:
    """``(membership (C, slots) int64, largest slot of each combination (C,))``, lexicographic order."""
    combos = list(combinations(range(slots), k))
    member = np.zeros((len(combos), slots), np.int64)
    for i, combo in enumerate(combos):
        member[i, list(combo)] = 1
    return member, np.array([c[-1] for c in combos], np.int64)


@dataclass
class Distances:
    """Distance sums per (row, k-combination), recomputed only for rows whose stamp changed."""

    slots: int = 0
    tables: dict[int, I64] = field(default_factory=dict)
    stamps: dict[int, I64] = field(default_factory=dict)

    def get(self, cl: ClusterArrays, k: int, rows: I64) -> I64:
        if self.slots != cl.slots:
            self.slots, self.tables, self.stamps = cl.slots, {}, {}
        member, _ = _combos(cl.slots, k)
        table, stamps = self.tables.get(k), self.stamps.get(k)
        if table is None or stamps is None or len(table) < cl.capacity:
            new_table = np.zeros((cl.capacity, len(member)), np.int64)
            new_stamps = np.full(cl.capacity, -1, np.int64)
            if table is not None and stamps is not None:
                new_table[: len(table)] = table
                new_stamps[: len(stamps)] = stamps
            table, stamps = self.tables[k], self.stamps[k] = new_table, new_stamps
        stale = rows[stamps[rows] != cl.stamp[rows]]
        if len(stale):
            table[stale] = np.einsum("cz,nzw,cw->nc", member, cl.costs[stale], member)
            stamps[stale] = cl.stamp[stale]
        return table[rows]


@dataclass
class _Search:
    """Per-row outcome of one minimal-set search: size k (0 = none), optimal flag, chosen membership,
    and the chosen slot when k = 1 (-1 otherwise)."""

    k: I64
    optimal: B
    member: I64
    slot: I64


def _cols(arr: npt.NDArray[_T], rows: I64, n: int) -> npt.NDArray[_T]:
    """``arr[:, rows]`` as a cheap slice when ``rows`` is every row ``0..n-1``."""
    return arr[:, :n] if len(rows) == n else arr[:, rows]


def _singletons(
    cl: ClusterArrays, rows: I64, reqs: list[tuple[int, int]], listed: list[int], work: Mapping[int, I64]
) -> tuple[B, B, I64]:
    """k = 1 in slot-major form: ``(has fit, optimal, chosen slot)`` per row.

    A singleton's distance is the zone's cost to itself, so the optimum is the smallest self-cost
    among the row's zones; the pick is the first optimal fitting slot, else the first fitting slot
    with the smallest self-cost."""
    n = cl.n
    valid = _cols(cl.pad, rows, n) == 0
    fits = valid.copy()
    for c, q in reqs:
        fits &= _cols(cl.listed[c], rows, n)
        fits &= _cols(work[c] if c in work else cl.avail_m[c], rows, n) >= q
    for c in listed:
        fits &= _cols(cl.listed[c], rows, n)
    has_fit = np.logical_or.reduce(fits, axis=0)
    self_cost = _cols(cl.self_cost, rows, n)
    best = np.where(valid, self_cost, _BIG).min(axis=0)
    opt = fits & (self_cost == best)
    has_opt = np.logical_or.reduce(opt, axis=0)
    fallback = np.where(fits, self_cost, _BIG).argmin(axis=0)
    pick = np.where(has_opt, opt.argmax(axis=0), fallback)
    return has_fit, has_opt, pick


def _search(
    cl: ClusterArrays,
    dist: Distances,
    rows: I64,
    reqs: list[tuple[int | None, int]],
    work: Mapping[int, I64],
    zero: Sequence[int | None] = (),
) -> _Search:
    """Minimal fitting zone set for ``reqs`` ((column, thousandths), non-zero) on each of ``rows``; the
    columns ``zero`` (zero-quantity requests) must only be listed by every zone of the set.

    ``work`` holds full-size working copies of ``avail_m`` columns (container-scope accounting)."""
    m = len(rows)
    n = cl.n
    found_k = np.zeros(m, np.int64)
    optimal = np.zeros(m, bool)
    chosen = np.zeros((m, cl.slots), np.int64)
    nz = cl.nzones[rows]
    if any(c is None for c, _ in reqs) or any(c is None for c in zero):
        return _Search(found_k, optimal, chosen, np.full(m, -1))  # a requested resource no zone lists
    known = [(c, q) for c, q in reqs if c is not None]
    must_list = [c for c in zero if c is not None]
    # A row whose zones together cannot hold a request never fits: settle those before searching.
    possible = np.ones(m, bool)
    for c, q in known:
        possible &= _cols(work[c] if c in work else cl.avail_m[c], rows, n).sum(axis=0) >= q
    has_fit, has_opt, pick = _singletons(cl, rows, known, must_list, work)
    found_k[has_fit] = 1
    optimal[has_fit] = has_opt[has_fit]
    chosen[np.flatnonzero(has_fit), pick[has_fit]] = 1
    single = np.where(has_fit, pick, -1)
    todo = np.flatnonzero(possible & ~has_fit)
    for k in range(2, cl.slots + 1):
        todo = todo[nz[todo] >= k]
        if not len(todo):
            break
        sub = rows[todo]
        member, largest = _combos(cl.slots, k)
        valid = largest[None, :] < nz[todo][:, None]
        fits = valid.copy()
        for c, q in known:
            listed = cl.listed[c][:, sub].T.astype(np.int64) @ member.T
            total = (work[c] if c in work else cl.avail_m[c])[:, sub].T @ member.T
            fits &= (listed == k) & (total >= q)
        for c in must_list:
            fits &= (cl.listed[c][:, sub].T.astype(np.int64) @ member.T) == k
        fit_k = fits.any(axis=1)
        if not fit_k.any():
            continue
        distance = dist.get(cl, k, sub)
        best = np.where(valid, distance, _BIG).min(axis=1)
        opt = fits & (distance == best[:, None])
        opt_k = opt.any(axis=1)
        pick_k = np.where(opt_k, opt.argmax(axis=1), np.where(fits, distance, _BIG).argmin(axis=1))
        hit = todo[fit_k]
        found_k[hit] = k
        optimal[hit] = opt_k[fit_k]
        chosen[hit] = member[pick_k[fit_k]]
        todo = todo[~fit_k]
    return _Search(found_k, optimal, chosen, single)


def _normalize(cl: ClusterArrays, rows: I64, k: I64, optimal: B) -> I64:
    step = MAX_SCORE // cl.max_numa[rows]
    return MAX_SCORE - k * step + np.where(optimal, step // 2, 0)


def _nonzero(cl: ClusterArrays, requests: Mapping[str, Quantity]) -> list[tuple[int | None, int]]:
    out: list[tuple[int | None, int]] = []
    for name, q in requests.items():
        milli = q.amount * 1000
        if milli != 0:
            out.append((cl.columns.get(name), int(milli)))
    return out


def _zero(cl: ClusterArrays, requests: Mapping[str, Quantity]) -> list[int | None]:
    """Columns of the zero-quantity requests (they must be listed, nothing more)."""
    return [cl.columns.get(name) for name, q in requests.items() if q.amount == 0]


def _listed_anywhere(cl: ClusterArrays, rows: I64, requests: Mapping[str, Quantity]) -> B:
    out = np.zeros(len(rows), bool)
    for name in requests:
        c = cl.columns.get(name)
        if c is not None:
            out |= cl.listed_any[c][rows]
    return out


def _pod_scope(cl: ClusterArrays, dist: Distances, rows: I64, pod: Pod) -> I64:
    reqs = pod_request(pod)
    numa = _listed_anywhere(cl, rows, reqs)
    out = np.full(len(rows), MAX_SCORE, np.int64)
    idx = np.flatnonzero(numa)
    found = _search(cl, dist, rows[idx], _nonzero(cl, reqs), {}, _zero(cl, reqs))
    scored = _normalize(cl, rows[idx], found.k, found.optimal)
    out[idx] = np.where(found.k > 0, scored, 0)
    return out


def _container_scope(cl: ClusterArrays, dist: Distances, rows: I64, pod: Pod) -> I64:
    m = len(rows)
    largest = np.zeros(m, np.int64)
    all_optimal = np.ones(m, bool)
    failed = np.zeros(m, bool)
    work: dict[int, I64] = {}
    containers = pod.all_containers()
    for i, container in enumerate(containers):
        idx = np.flatnonzero(_listed_anywhere(cl, rows, container.requests) & ~failed)
        if not len(idx):
            continue
        sub = rows[idx]
        reqs = _nonzero(cl, container.requests)
        found = _search(cl, dist, sub, reqs, work, _zero(cl, container.requests))
        failed[idx[found.k == 0]] = True
        ok = found.k > 0
        largest[idx] = np.where(ok, np.maximum(largest[idx], found.k), largest[idx])
        all_optimal[idx] &= np.where(ok, found.optimal, True)
        if i < len(containers) - 1:  # the last container's accounting does not matter
            _take(cl, work, sub[ok], found.member[ok], found.slot[ok], reqs)
    score = _normalize(cl, rows, largest, all_optimal)
    return np.where(failed, 0, np.where(largest == 0, MAX_SCORE, score))


def _take(
    cl: ClusterArrays, work: dict[int, I64], rows: I64, member: I64, slot: I64, reqs: list[tuple[int | None, int]]
) -> None:
    """Take each request from the chosen slots in NUMA id order (slot order on regular rows), as much as
    possible from each. A single chosen zone fitted the request, so it simply gives all of it."""
    if not len(rows):
        return
    single = slot >= 0
    rows1, slot1 = rows[single], slot[single]
    multi = ~single
    rows, member = rows[multi], member[multi]
    for c, q in reqs:
        if c is None:
            continue
        arr = work.get(c)
        if arr is None:
            arr = work[c] = cl.avail_m[c].copy()
        arr[slot1, rows1] -= q
        if not len(rows):
            continue
        left = np.full(len(rows), q, np.int64)
        for zone in range(cl.slots):
            here = (member[:, zone] > 0) & cl.listed[c][zone, rows] & (left > 0)
            avail = arr[zone, rows]
            take = np.where(here, np.maximum(np.minimum(avail, left), 0), 0)
            arr[zone, rows] = avail - take
            left -= take


def least_numa_scores(cl: ClusterArrays, pod: Pod, dist: Distances, sel: I64 | None = None) -> I64:
    """LeastNUMANodes score of a Guaranteed ``pod`` for every row ``0..n-1``, or for the distinct rows
    ``sel`` only (in that order; each row's score depends on that row alone). Unusable rows: anything."""
    n = cl.n
    if sel is not None and len(sel) > 1 and bool(np.any(sel[1:] < sel[:-1])):
        order = np.argsort(sel, kind="stable")  # the search wants ascending rows (see _cols)
        out = np.empty(len(sel), np.int64)
        out[order] = least_numa_scores(cl, pod, dist, sel[order])
        return out
    if sel is None:
        out = np.zeros(n, np.int64)
        rows = np.flatnonzero(cl.present[:n] & cl.has_nrt[:n] & ~cl.problem[:n] & ~cl.irregular[:n])
        at = rows
    else:
        out = np.zeros(len(sel), np.int64)
        at = np.flatnonzero(cl.present[sel] & cl.has_nrt[sel] & ~cl.problem[sel] & ~cl.irregular[sel])
        rows = sel[at]
    pod_scope = cl.scope_pod[rows]
    pod_rows, ctr_rows = rows[pod_scope], rows[~pod_scope]
    if len(pod_rows):
        out[at[pod_scope]] = _pod_scope(cl, dist, pod_rows, pod)
    if len(ctr_rows):
        out[at[~pod_scope]] = _container_scope(cl, dist, ctr_rows, pod)
    return out

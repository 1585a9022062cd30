"""LeastNUMANodes over many nodes at once (the vectorised twin of :mod:`numaplane.placement.explain.least_numa`).

For each set size k the k-combinations of zone *slots* are enumerated once, in lexicographic order, as a
0/1 membership matrix ``(combos, slots)``. Restricted to combinations whose slots all exist on a node
(largest slot < the node's zone count) that is exactly the node's own lexicographic order, so "first
fitting combination" means the same thing. Per node and combination, gathers over the combination's
slots give whether every slot lists each requested resource (valid iff all k do — zero-quantity
requests included, as upstream's ``isValidCombineResources``), the summed ``available`` (fits iff >= the
non-zero request) and the distance sum (from the node's cost matrix; cached per row until the row changes).
k = 1, which settles most nodes, is done slot-major with one comparison per resource (unlisted cells
hold ``INT64_MIN``) and per-row caches of the distance-optimal slots and of the score step; the chosen
zones are only worked out when a later container is charged to them.
Nodes are resolved at the smallest k with a fit; the score is ``100 - k * step`` plus ``step // 2``
when the chosen combination has the optimal distance for k. Container scope charges each container
to its chosen zones in NUMA id order, as much as possible from each, before the next container.

Only Guaranteed pods reach this module (others score 100 before). Sums stay exact: each quantity is
below 2**59 thousandths and at most 16 slots are summed (:data:`MAX_VECTOR_SLOTS`; the pipeline uses
the scalar code beyond that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from numaplane.placement.arrays.cluster import I64, B, ClusterArrays
from numaplane.placement.arrays.kernels import first_slot
from numaplane.placement.arrays.numa_combos import Distances, combo_slots, combos
from numaplane.placement.explain.least_numa import MAX_SCORE
from numaplane.placement.model.requests import pod_request
from numaplane.resources.pod import Pod
from numaplane.resources.quantity import Quantity

__all__ = ["MAX_VECTOR_SLOTS", "least_numa_scores"]

MAX_VECTOR_SLOTS = 16
_T = TypeVar("_T", bound=np.generic)
_BIG = np.int64(1 << 62)


@dataclass
class _Search:
    """Per-row outcome of one minimal-set search: size k (0 = none), optimal flag, the chosen slot when
    k = 1 as a ``(slots, rows)`` one-hot (all False otherwise; ``None`` unless the picks were asked
    for), and the chosen membership of the rows at positions ``multi`` (k >= 2, only with the picks)."""

    k: I64
    optimal: B
    single: B | None
    multi: I64
    member: I64


def _every(rows: I64, n: int) -> bool:
    """Whether the ascending distinct ``rows`` are every row ``0..n-1``."""
    return len(rows) == n


def _cols(arr: npt.NDArray[_T], rows: I64, n: int) -> npt.NDArray[_T]:
    """``arr[:, rows]`` as a cheap slice when ``rows`` is every row ``0..n-1``."""
    return arr[:, :n] if _every(rows, n) else arr[:, rows]


def _singletons(
    cl: ClusterArrays,
    dist: Distances,
    rows: I64,
    reqs: list[tuple[int, int]],
    listed: list[int],
    work: Mapping[int, I64],
    pick: bool,
) -> tuple[B, B, B | None]:
    """k = 1 in slot-major form: ``(has fit, optimal, chosen slot as a (slots, rows) one-hot or None
    unless pick)`` per row.

    A singleton's distance is the zone's cost to itself, so the optimum is the smallest self-cost
    among the row's zones; the pick is the first optimal fitting slot, else the first fitting slot
    with the smallest self-cost."""
    n = cl.n
    fits: B | None = None
    for c, q in reqs:
        if c in work or q <= 0:
            ge = _cols(work[c] if c in work else cl.avail_m[c], rows, n) >= q
            ge &= _cols(cl.listed[c], rows, n)
        else:  # INT64_MIN where unlisted (padding slots included): one comparison
            ge = _cols(cl.avail_min[c], rows, n) >= q
        if fits is None:
            fits = ge
        else:
            fits &= ge
    for c in listed:  # zero-quantity requests: the zone must list them, nothing more
        ge = _cols(cl.listed[c], rows, n)
        fits = ge if fits is None else fits & ge
    if fits is None:
        fits = _cols(cl.pad, rows, n) == 0
    has_fit = np.logical_or.reduce(fits, axis=0)
    opt = fits & _cols(dist.optimal_singletons(cl), rows, n)
    has_opt = np.logical_or.reduce(opt, axis=0)
    if not pick:
        return has_fit, has_opt, None
    chosen = first_slot(opt)
    other = np.flatnonzero(has_fit & ~has_opt)
    if len(other):
        sub = rows[other]
        best = np.where(fits[:, other], cl.self_cost[:, sub], _BIG).argmin(axis=0)
        chosen[:, other] = np.arange(cl.slots)[:, None] == best
    return has_fit, has_opt, chosen


def _search(
    cl: ClusterArrays,
    dist: Distances,
    rows: I64,
    reqs: list[tuple[int | None, int]],
    work: Mapping[int, I64],
    zero: Sequence[int | None] = (),
    pick: bool = False,
) -> _Search:
    """Minimal fitting zone set for ``reqs`` ((column, thousandths), non-zero) on each of ``rows``; the
    columns ``zero`` (zero-quantity requests) must only be listed by every zone of the set; the chosen
    zones too when ``pick``.

    ``work`` holds full-size working copies of ``avail_m`` columns (container-scope accounting)."""
    m = len(rows)
    none = np.zeros(0, np.int64)
    if any(c is None for c, _ in reqs) or any(c is None for c in zero):  # a requested resource no zone lists
        return _Search(np.zeros(m, np.int64), np.zeros(m, bool), None, none, np.zeros((0, cl.slots), np.int64))
    known = [(c, q) for c, q in reqs if c is not None]
    must_list = [c for c in zero if c is not None]
    has_fit, has_opt, single = _singletons(cl, dist, rows, known, must_list, work, pick)
    found_k = has_fit.astype(np.int64)  # k = 1 where a single zone fits
    optimal = has_opt.copy()  # an optimal fitting slot is a fitting slot
    todo = np.flatnonzero(~has_fit)
    multi: list[I64] = []
    members: list[I64] = []
    if len(todo):
        nz = cl.nzones[rows[todo]]
        todo = todo[nz >= 2]
    if len(todo):
        # A row whose zones together cannot hold a request never fits: settle those before searching.
        possible = np.ones(len(todo), bool)
        sub = rows[todo]
        for c, q in known:
            possible &= (work[c] if c in work else cl.avail_m[c])[:, sub].sum(axis=0) >= q
        todo = todo[possible]
    nz = cl.nzones[rows[todo]]
    for k in range(2, cl.slots + 1):
        keep = nz >= k
        todo, nz = todo[keep], nz[keep]
        if not len(todo):
            break
        sub = rows[todo]
        member, largest = combos(cl.slots, k)
        valid = largest[None, :] < nz[:, None]
        fits = valid.copy()
        at = combo_slots(cl.slots, k)  # (k, combos): the slots of each combination
        for c, q in known:
            listed = cl.listed[c][:, sub][at].all(axis=0).T
            total = (work[c] if c in work else cl.avail_m[c])[:, sub][at].sum(axis=0).T
            fits &= listed & (total >= q)
        for c in must_list:
            fits &= cl.listed[c][:, sub][at].all(axis=0).T
        fit_k = fits.any(axis=1)
        if not fit_k.any():
            continue
        distance = dist.get(cl, k, sub)
        best = np.where(valid, distance, _BIG).min(axis=1)
        opt = fits & (distance == best[:, None])
        opt_k = opt.any(axis=1)
        hit = todo[fit_k]
        found_k[hit] = k
        optimal[hit] = opt_k[fit_k]
        if pick:
            pick_k = np.where(opt_k, opt.argmax(axis=1), np.where(fits, distance, _BIG).argmin(axis=1))
            multi.append(hit)
            members.append(member[pick_k[fit_k]])
        todo, nz = todo[~fit_k], nz[~fit_k]
    if not multi:
        return _Search(found_k, optimal, single, none, np.zeros((0, cl.slots), np.int64))
    return _Search(found_k, optimal, single, np.concatenate(multi), np.concatenate(members))


def _normalize(cl: ClusterArrays, dist: Distances, rows: I64, k: I64, optimal: B) -> I64:
    step, half = dist.steps(cl)
    if len(rows) == cl.n:
        step, half = step[: cl.n], half[: cl.n]
    else:
        step, half = step[rows], half[rows]
    return MAX_SCORE - k * step + half * optimal


def _nonzero(cl: ClusterArrays, requests: Mapping[str, Quantity]) -> list[tuple[int | None, int]]:
    out: list[tuple[int | None, int]] = []
    for name, q in requests.items():
        amount = q.amount
        if amount.denominator == 1:  # an integer: no Fraction arithmetic (same value)
            if amount.numerator != 0:
                out.append((cl.columns.get(name), amount.numerator * 1000))
            continue
        milli = amount * 1000
        if milli != 0:
            out.append((cl.columns.get(name), int(milli)))
    return out


def _zero(cl: ClusterArrays, requests: Mapping[str, Quantity]) -> list[int | None]:
    """Columns of the zero-quantity requests (they must be listed, nothing more)."""
    return [cl.columns.get(name) for name, q in requests.items() if q.amount == 0]


def _listed_anywhere(cl: ClusterArrays, rows: I64, requests: Mapping[str, Quantity]) -> B:
    out = np.zeros(len(rows), bool)
    every = len(rows) == cl.n  # ascending distinct rows: every row, a view does
    for name in requests:
        c = cl.columns.get(name)
        if c is not None:
            out |= cl.listed_any[c][: cl.n] if every else cl.listed_any[c][rows]
    return out


def _pod_scope(cl: ClusterArrays, dist: Distances, rows: I64, pod: Pod) -> I64:
    reqs = pod_request(pod)
    numa = _listed_anywhere(cl, rows, reqs)
    out = np.full(len(rows), MAX_SCORE, np.int64)
    idx = np.flatnonzero(numa)
    found = _search(cl, dist, rows[idx], _nonzero(cl, reqs), {}, _zero(cl, reqs))
    scored = _normalize(cl, dist, rows[idx], found.k, found.optimal)
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
        todo = _listed_anywhere(cl, rows, container.requests) & ~failed
        idx = np.flatnonzero(todo)
        if not len(idx):
            continue
        at: I64 | slice = slice(None) if len(idx) == m else idx  # every row: views, not gathers
        sub = rows[at]
        reqs = _nonzero(cl, container.requests)
        charge = i < len(containers) - 1  # the last container's accounting does not matter
        found = _search(cl, dist, sub, reqs, work, _zero(cl, container.requests), pick=charge)
        ok = found.k > 0
        failed[at] |= ~ok
        np.maximum(largest[at], found.k, out=found.k)  # k is 0 where nothing fitted
        largest[at] = found.k
        all_optimal[at] &= found.optimal | ~ok
        if charge:
            _take(cl, work, sub, found, reqs)
    score = _normalize(cl, dist, rows, largest, all_optimal)
    return np.where(failed, 0, np.where(largest == 0, MAX_SCORE, score))


def _take(
    cl: ClusterArrays, work: dict[int, I64], rows: I64, found: _Search, reqs: list[tuple[int | None, int]]
) -> None:
    """Take each request from the chosen slots (``found``, on ``rows``) in NUMA id order (slot order on
    regular rows), as much as possible from each. A single chosen zone fitted the request, so it simply
    gives all of it. Working copies hold at least the columns ``0..max(rows)`` (only every row's
    leading ``n`` columns when ``rows`` are every row)."""
    n = cl.n
    hot = found.single
    every = _every(rows, n)
    multi, member = rows[found.multi], found.member
    for c, q in reqs:
        if c is None:
            continue
        base = work.get(c)
        if hot is not None and every:  # one pass: a new working copy, minus q on each chosen slot
            work[c] = arr = (cl.avail_m[c][:, :n] if base is None else base[:, :n]) - np.multiply(hot, q)
        else:
            arr = work[c] = cl.avail_m[c].copy() if base is None else base
            if hot is not None:
                arr[:, rows] -= np.multiply(hot, q)
        if not len(multi):
            continue
        rows_m = multi
        # Zone by zone in slot order, take min(max(avail, 0), left) from each chosen zone listing the
        # resource: what is left before a zone is max(q - (what the zones before it could give), 0).
        avail = arr[:, rows_m]
        give = np.maximum(avail, 0)
        give *= member.T > 0
        give &= -cl.listed[c][:, rows_m].astype(np.int64)  # 0 where unlisted, unchanged where listed
        before = np.cumsum(give, axis=0)
        before -= give
        left = np.maximum(q - before, 0)
        arr[:, rows_m] = avail - np.minimum(give, left)


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
        pod_at, ctr_at = dist.scoped_rows(cl)
        pod_rows, ctr_rows = pod_at, ctr_at
    else:
        out = np.zeros(len(sel), np.int64)
        at = np.flatnonzero(cl.present[sel] & cl.has_nrt[sel] & ~cl.problem[sel] & ~cl.irregular[sel])
        rows = sel[at]
        pod_scope = cl.scope_pod[rows]
        pod_at, ctr_at = at[pod_scope], at[~pod_scope]
        pod_rows, ctr_rows = rows[pod_scope], rows[~pod_scope]
    if len(pod_rows):
        out[pod_at] = _pod_scope(cl, dist, pod_rows, pod)
    if len(ctr_rows):
        if len(ctr_rows) == n:
            out = _container_scope(cl, dist, ctr_rows, pod)
        else:
            out[ctr_at] = _container_scope(cl, dist, ctr_rows, pod)
    return out

"""LeastNUMANodes' k-combinations of zone slots, and the per-row caches that depend only on a node's NRT.

:func:`combos` / :func:`combo_slots` enumerate the k-combinations of ``slots`` zone slots once, in
lexicographic order (see :mod:`numaplane.placement.arrays.pipeline_numa` for why that order is each node's own).
:class:`Distances` keeps, per cluster row: the distance sum of every k-combination (from the row's cost
matrix), the distance-optimal singleton slots, the score step ``100 // maxNUMANodes`` and its half, and
the rows LeastNUMANodes scores split by scope. The per-row values are recomputed only for rows whose
``stamp`` changed (a cluster gives a row a new stamp whenever it writes or clears it) and not looked at
while the cluster's ``version`` is unchanged; the scoped rows are kept until ``flags_version`` changes.
So a cached value always equals a fresh computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from itertools import combinations

import numpy as np

from numaplane.placement.arrays.cluster import I64, B, ClusterArrays
from numaplane.placement.explain.least_numa import MAX_SCORE

__all__ = ["Distances", "combo_slots", "combos"]

_BIG = np.int64(1 << 62)


@cache
def combos(slots: int, k: int) -> tuple[I64, I64]:
    """``(membership (C, slots) int64, largest slot of each combination (C,))``, lexicographic order."""
    combos = list(combinations(range(slots), k))
    member = np.zeros((len(combos), slots), np.int64)
    for i, combo in enumerate(combos):
        member[i, list(combo)] = 1
    return member, np.array([c[-1] for c in combos], np.int64)


@cache
def combo_slots(slots: int, k: int) -> I64:
    """``(k, combos)``: the slots of each k-combination (lexicographic order), one row per position."""
    return np.array(list(combinations(range(slots), k)), np.int64).reshape(-1, k).T.copy()


@dataclass
class Distances:
    """Distance sums per (row, k-combination), recomputed only for rows whose stamp changed."""

    slots: int = 0
    tables: dict[int, I64] = field(default_factory=dict)
    stamps: dict[int, I64] = field(default_factory=dict)
    # per row: which slots are distance-optimal singletons (a real zone whose self-cost is the row's
    # smallest), ``(slots, capacity)``, with the row stamps it was computed for
    optimal1: B = field(default_factory=lambda: np.zeros((0, 0), bool))
    stamps1: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    # per row: the score step ``100 // maxNUMANodes`` and its half, with the row stamps they are for
    step: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    half: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    stamps_step: I64 = field(default_factory=lambda: np.zeros(0, np.int64))

    scoped: tuple[int, int, I64, I64] | None = None  # (cluster, flags_version, pod-scope rows, container-scope rows)
    # (cluster, its version) the per-row caches above were last brought up to date for: a cluster
    # bumps ``version`` on every change, so an unchanged one skips the per-row stamp comparison
    fresh1: tuple[ClusterArrays, int] | None = None
    fresh_step: tuple[ClusterArrays, int] | None = None

    def scoped_rows(self, cl: ClusterArrays) -> tuple[I64, I64]:
        """Rows ``0..n-1`` that LeastNUMANodes scores (a readable, regular NRT), split by scope: they
        depend on the rows' flags only, so they are kept until ``cl.flags_version`` changes."""
        known = self.scoped
        if known is not None and known[0] == id(cl) and known[1] == cl.flags_version:
            return known[2], known[3]
        n = cl.n
        rows = np.flatnonzero(cl.present[:n] & cl.has_nrt[:n] & ~cl.problem[:n] & ~cl.irregular[:n])
        pod_scope = cl.scope_pod[rows]
        self.scoped = (id(cl), cl.flags_version, rows[pod_scope], rows[~pod_scope])
        return self.scoped[2], self.scoped[3]

    def steps(self, cl: ClusterArrays) -> tuple[I64, I64]:
        """``(step, step // 2)`` per row (``capacity`` long; rows ``0..n-1`` are current)."""
        if len(self.step) != cl.capacity:
            self.step = np.zeros(cl.capacity, np.int64)
            self.half = np.zeros(cl.capacity, np.int64)
            self.stamps_step = np.full(cl.capacity, -1, np.int64)
            self.fresh_step = None
        if self.fresh_step is not None and self.fresh_step[0] is cl and self.fresh_step[1] == cl.version:
            return self.step, self.half
        n = cl.n
        stale = np.flatnonzero(self.stamps_step[:n] != cl.stamp[:n])
        if len(stale):
            step = MAX_SCORE // cl.max_numa[stale]
            self.step[stale] = step
            self.half[stale] = step // 2
            self.stamps_step[stale] = cl.stamp[stale]
        self.fresh_step = (cl, cl.version)
        return self.step, self.half

    def optimal_singletons(self, cl: ClusterArrays) -> B:
        """``(slots, capacity)``: slot s of row r is a real zone whose self-cost is the smallest of the row's
        real zones (rows ``0..n-1`` are current)."""
        if self.optimal1.shape != (cl.slots, cl.capacity):
            self.optimal1 = np.zeros((cl.slots, cl.capacity), bool)
            self.stamps1 = np.full(cl.capacity, -1, np.int64)
            self.fresh1 = None
        if self.fresh1 is not None and self.fresh1[0] is cl and self.fresh1[1] == cl.version:
            return self.optimal1
        n = cl.n
        stale = np.flatnonzero(self.stamps1[:n] != cl.stamp[:n])
        if len(stale):
            valid = cl.pad[:, stale] == 0
            self_cost = cl.self_cost[:, stale]
            best = np.where(valid, self_cost, _BIG).min(axis=0)
            self.optimal1[:, stale] = valid & (self_cost == best)
            self.stamps1[stale] = cl.stamp[stale]
        self.fresh1 = (cl, cl.version)
        return self.optimal1

    def get(self, cl: ClusterArrays, k: int, rows: I64) -> I64:
        if self.slots != cl.slots:
            self.slots, self.tables, self.stamps = cl.slots, {}, {}
        member, _ = combos(cl.slots, k)
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

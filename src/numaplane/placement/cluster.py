"""A struct-of-arrays view of many nodes' NUMA zones, for vectorised filtering and scoring.

Each node is a *row*; each NUMA zone of a node a *slot* (zone list position, document order, up to
``zones`` slots, grown on demand); each resource name a *column*. Per column, ``(rows, slots)`` arrays
hold the zone's ``available`` quantity exactly as an int64 count of thousandths (``avail_m``), the same
with ``INT64_MIN`` in unlisted slots for one-compare feasibility tests (``avail_min``), the upstream
``Value()`` (rounded-up integer, for scores, ``avail_v``) and whether the zone lists it (``listed``).
Per row: flags (has NRT, fresh, unreadable, *irregular*), policy, scope, max NUMA nodes, zone count,
zone ids, costs, and which scalar resources the Node advertises.

A row is *irregular* when the arrays cannot represent it exactly — a quantity that is not a whole
number of thousandths or is too large, duplicate NUMA ids, a cost outside int32 — and the pipeline then
uses the scalar functions for it, so results never depend on the representation.

Updates are incremental: :meth:`ClusterArrays.upsert` rewrites one row (O(slots × columns)),
:meth:`ClusterArrays.remove` frees it for reuse. Pure data structure, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from numaplane.placement.node import NodeInfo, is_scalar_resource
from numaplane.placement.view import NodeTopology

__all__ = ["INT64_MIN", "POLICY_CODES", "ClusterArrays", "RowSource"]

INT64_MIN = np.iinfo(np.int64).min
_BOUND = 1 << 59  # |milli value| limit: sums of up to 16 slots stay inside int64
_COST_LIMIT = 1 << 31
POLICY_CODES = {"none": 0, "best-effort": 1, "restricted": 2, "single-numa-node": 3}
MISSING_COST = 255

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


_A = TypeVar("_A", I64, B)


def _regrow(arr: _A, shape: tuple[int, ...], fill: int | bool, n: int, z: int) -> _A:
    """A larger copy of ``arr`` (``shape``), old rows ``:n`` and slots ``:z`` kept, the rest ``fill``."""
    new = np.full(shape, fill, arr.dtype)
    if arr.ndim == 1:
        new[:n] = arr[:n]
    else:
        new[:n, :z] = arr[:n, :z]
    return new


@dataclass(frozen=True, slots=True)
class RowSource:
    """What a row was built from (kept for scalar fallback and explanations)."""

    topology: NodeTopology | None
    node: NodeInfo
    fresh: bool


class ClusterArrays:
    """Rows of per-node NUMA data (module docstring). ``n`` is the high-water mark of used rows."""

    def __init__(self, zones: int = 8, capacity: int = 256) -> None:
        self.slots = max(1, zones)
        self.capacity = max(1, capacity)
        self.n = 0
        self.index: dict[str, int] = {}
        self.names: list[str | None] = []
        self.sources: list[RowSource | None] = []
        self._free: list[int] = []
        self.columns: dict[str, int] = {}
        self.avail_m: list[I64] = []
        self.avail_min: list[I64] = []
        self.avail_v: list[I64] = []
        self.listed: list[B] = []
        self.listed_any: list[B] = []
        self.adv: list[B] = []
        self.version = 0  # bumped on every change
        self._stamps = 0  # source of per-row stamps (derived per-row caches key on them)
        self._alloc_rows(self.capacity)

    # --- storage -----------------------------------------------------------------------------------

    def _alloc_rows(self, cap: int) -> None:
        z = self.slots
        self.present = np.zeros(cap, bool)
        self.has_nrt = np.zeros(cap, bool)
        self.fresh = np.ones(cap, bool)
        self.problem = np.zeros(cap, bool)
        self.irregular = np.zeros(cap, bool)
        self.policy = np.zeros(cap, np.int8)
        self.scope_pod = np.zeros(cap, bool)
        self.max_numa = np.full(cap, 8, np.int64)
        self.nzones = np.zeros(cap, np.int64)
        self.zone_id = np.full((cap, z), -1, np.int64)
        self.costs = np.full((cap, z, z), MISSING_COST, np.int64)
        self.stamp = np.full(cap, -1, np.int64)

    def _grow(self, cap: int, slots: int) -> None:
        old = {k: getattr(self, k) for k in ("present", "has_nrt", "fresh", "problem", "irregular", "policy")}
        old |= {k: getattr(self, k) for k in ("scope_pod", "max_numa", "nzones", "zone_id", "costs", "stamp")}
        n, z = self.n, self.slots
        self.capacity, self.slots = cap, slots
        self._alloc_rows(cap)
        for key, arr in old.items():
            target = getattr(self, key)
            if arr.ndim == 1:
                target[:n] = arr[:n]
            elif arr.ndim == 2:
                target[:n, :z] = arr[:n, :z]
            else:
                target[:n, :z, :z] = arr[:n, :z, :z]
        self.avail_m = [_regrow(a, (cap, slots), 0, n, z) for a in self.avail_m]
        self.avail_min = [_regrow(a, (cap, slots), INT64_MIN, n, z) for a in self.avail_min]
        self.avail_v = [_regrow(a, (cap, slots), 0, n, z) for a in self.avail_v]
        self.listed = [_regrow(a, (cap, slots), False, n, z) for a in self.listed]
        self.listed_any = [_regrow(a, (cap,), False, n, z) for a in self.listed_any]
        self.adv = [_regrow(a, (cap,), False, n, z) for a in self.adv]

    def column(self, name: str) -> int:
        """The column of resource ``name``, created (all unlisted) on first use."""
        c = self.columns.get(name)
        if c is None:
            c = len(self.columns)
            self.columns[name] = c
            shape = (self.capacity, self.slots)
            self.avail_m.append(np.zeros(shape, np.int64))
            self.avail_min.append(np.full(shape, INT64_MIN, np.int64))
            self.avail_v.append(np.zeros(shape, np.int64))
            self.listed.append(np.zeros(shape, bool))
            self.listed_any.append(np.zeros(self.capacity, bool))
            self.adv.append(np.zeros(self.capacity, bool))
        return c

    # --- rows --------------------------------------------------------------------------------------

    def remove(self, name: str) -> None:
        row = self.index.pop(name, None)
        if row is None:
            return
        self._clear(row)
        self.present[row] = False
        self.names[row] = None
        self.sources[row] = None
        self._free.append(row)
        self.version += 1

    def _clear(self, row: int) -> None:
        self._stamps += 1
        self.stamp[row] = self._stamps
        self.zone_id[row] = -1
        self.costs[row] = MISSING_COST
        for c in range(len(self.columns)):
            self.avail_m[c][row] = 0
            self.avail_min[c][row] = INT64_MIN
            self.avail_v[c][row] = 0
            self.listed[c][row] = False
            self.listed_any[c][row] = False
            self.adv[c][row] = False
        self.irregular[row] = self.problem[row] = self.has_nrt[row] = False

    def _row_for(self, name: str) -> int:
        row = self.index.get(name)
        if row is not None:
            return row
        if self._free:
            row = self._free.pop()
        else:
            if self.n == self.capacity:
                self._grow(self.capacity * 2, self.slots)
            row = self.n
            self.n += 1
            self.names.append(None)
            self.sources.append(None)
        self.index[name] = row
        self.names[row] = name
        return row

    def upsert(self, name: str, topology: NodeTopology | None, node: NodeInfo, *, fresh: bool = True) -> int:
        """Write node ``name``'s row from its view (``None``: no NRT), Node and freshness; return the row."""
        row = self._row_for(name)
        if topology is not None and len(topology.zones) > self.slots:
            self._grow(self.capacity, len(topology.zones))
        self._clear(row)
        self.present[row] = True
        self.fresh[row] = fresh
        self.sources[row] = RowSource(topology, node, fresh)
        for res in node.allocatable:
            if is_scalar_resource(res):
                self.adv[self.column(res)][row] = True
        self.version += 1
        if topology is None:
            return row
        self.has_nrt[row] = True
        if topology.problem is not None:
            self.problem[row] = True
            return row
        config = topology.config
        self.policy[row] = POLICY_CODES[config.policy]
        self.scope_pod[row] = config.scope == "pod"
        self.max_numa[row] = config.max_numa_nodes
        self.nzones[row] = len(topology.zones)
        ids = [z.numa_id for z in topology.zones]
        irregular = len(set(ids)) != len(ids)
        for slot, zone in enumerate(topology.zones):
            self.zone_id[row, slot] = zone.numa_id
            for res, qty in zone.available.items():
                c = self.column(res)
                milli = qty.amount * 1000
                if milli.denominator != 1 or abs(milli.numerator) >= _BOUND:
                    irregular = True
                    continue
                self.avail_m[c][row, slot] = milli.numerator
                self.avail_min[c][row, slot] = milli.numerator
                self.avail_v[c][row, slot] = math.ceil(qty.amount)
                self.listed[c][row, slot] = True
                self.listed_any[c][row] = True
            for peer_slot, peer in enumerate(topology.zones):
                cost = zone.costs.get(peer.numa_id, MISSING_COST)
                if not -_COST_LIMIT < cost < _COST_LIMIT:
                    irregular = True
                self.costs[row, slot, peer_slot] = cost if -_COST_LIMIT < cost < _COST_LIMIT else MISSING_COST
        self.irregular[row] = irregular
        return row

"""The cluster arrays as they were before row writes were vectorised, kept verbatim as a test oracle.

``test_place_cluster_equivalence`` drives this and :class:`numaplane.placement.arrays.cluster.ClusterArrays`
with the same updates and requires identical arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from types import MappingProxyType
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from numaplane.placement.model.node import NodeInfo, is_scalar_resource
from numaplane.placement.model.view import NodeTopology

INT64_MIN = np.iinfo(np.int64).min
_BOUND = 1 << 59  # |milli value| limit: sums of up to 16 slots stay inside int64
_FLOAT_EXACT = 1 << 46  # Value() limit: value * 100 stays an exact float64 integer
_COST_LIMIT = 1 << 31
POLICY_CODES = {"none": 0, "best-effort": 1, "restricted": 2, "single-numa-node": 3}
MISSING_COST = 255

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


_A = TypeVar("_A", I64, F64, B)


def _regrow(arr: _A, shape: tuple[int, ...], fill: float, n: int, z: int) -> _A:
    """A larger copy of ``arr`` (``shape``): old rows ``:n`` (last axis) and slots ``:z`` kept, rest ``fill``."""
    new = np.full(shape, fill, arr.dtype)
    if arr.ndim == 1:
        new[:n] = arr[:n]
    else:
        new[:z, :n] = arr[:z, :n]
    return new


@dataclass(frozen=True, slots=True)
class RowSource:
    """What a row was built from (kept for scalar fallback and explanations)."""

    topology: NodeTopology | None
    node: NodeInfo
    fresh: bool


class ReferenceClusterArrays:
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
        self.avail_f: list[F64] = []
        self.avail_fs: list[F64] = []
        self.avail_finf: list[F64] = []
        self.avail_zero: list[F64] = []
        self.listed: list[B] = []
        self.listed_any: list[B] = []
        self.adv: list[B] = []
        self.version = 0  # bumped on every change
        self._snapshot: dict[str, int] | None = None  # copy of ``index`` handed out until membership changes
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
        self.stamp = np.full(cap, -1, np.int64)
        self.pad = np.full((z, cap), 255, np.uint8)  # 255 in slots beyond a row's zone count, else 0
        self.self_cost = np.full((z, cap), MISSING_COST, np.int64)  # a zone's cost to itself
        self.costs = np.full((cap, z, z), MISSING_COST, np.int64)

    def _grow(self, cap: int, slots: int) -> None:
        keep = ("present", "has_nrt", "fresh", "problem", "irregular", "policy", "scope_pod", "max_numa")
        old = {k: getattr(self, k) for k in (*keep, "nzones", "stamp", "costs")}
        old_pad, old_self = self.pad, self.self_cost
        n, z = self.n, self.slots
        self.capacity, self.slots = cap, slots
        self._alloc_rows(cap)
        for key, arr in old.items():
            target = getattr(self, key)
            if arr.ndim == 1:
                target[:n] = arr[:n]
            else:
                target[:n, :z, :z] = arr[:n, :z, :z]
        self.pad[:z, :n] = old_pad[:z, :n]
        self.self_cost[:z, :n] = old_self[:z, :n]
        shape = (slots, cap)
        self.avail_m = [_regrow(a, shape, 0, n, z) for a in self.avail_m]
        self.avail_min = [_regrow(a, shape, INT64_MIN, n, z) for a in self.avail_min]
        self.avail_f = [_regrow(a, shape, 0.0, n, z) for a in self.avail_f]
        self.avail_fs = [_regrow(a, shape, 1.0, n, z) for a in self.avail_fs]
        self.avail_finf = [_regrow(a, shape, np.inf, n, z) for a in self.avail_finf]
        self.avail_zero = [_regrow(a, shape, 1.0, n, z) for a in self.avail_zero]
        self.listed = [_regrow(a, shape, False, n, z) for a in self.listed]
        self.listed_any = [_regrow(a, (cap,), False, n, z) for a in self.listed_any]
        self.adv = [_regrow(a, (cap,), False, n, z) for a in self.adv]

    def column(self, name: str) -> int:
        """The column of resource ``name``, created (all unlisted) on first use."""
        c = self.columns.get(name)
        if c is None:
            c = len(self.columns)
            self.columns[name] = c
            shape = (self.slots, self.capacity)
            self.avail_m.append(np.zeros(shape, np.int64))
            self.avail_min.append(np.full(shape, INT64_MIN, np.int64))
            self.avail_f.append(np.zeros(shape, np.float64))
            self.avail_fs.append(np.ones(shape, np.float64))
            self.avail_finf.append(np.full(shape, np.inf, np.float64))
            self.avail_zero.append(np.ones(shape, np.float64))
            self.listed.append(np.zeros(shape, bool))
            self.listed_any.append(np.zeros(self.capacity, bool))
            self.adv.append(np.zeros(self.capacity, bool))
        return c

    # --- rows --------------------------------------------------------------------------------------

    def index_snapshot(self) -> Mapping[str, int]:
        """A read-only copy of ``index`` (name → row), shared until a node is added or removed."""
        if self._snapshot is None:
            self._snapshot = dict(self.index)
        return MappingProxyType(self._snapshot)

    def remove(self, name: str) -> None:
        row = self.index.pop(name, None)
        if row is None:
            return
        self._snapshot = None
        self._clear(row)
        self.present[row] = False
        self.names[row] = None
        self.sources[row] = None
        self._free.append(row)
        self.version += 1

    def _clear(self, row: int) -> None:
        self._stamps += 1
        self.stamp[row] = self._stamps
        self.costs[row] = MISSING_COST
        self.nzones[row] = 0
        self.pad[:, row] = 255
        self.self_cost[:, row] = MISSING_COST
        for c in range(len(self.columns)):
            self.avail_m[c][:, row] = 0
            self.avail_min[c][:, row] = INT64_MIN
            self.avail_f[c][:, row] = 0.0
            self.avail_fs[c][:, row] = 1.0
            self.avail_finf[c][:, row] = np.inf
            self.avail_zero[c][:, row] = 1.0
            self.listed[c][:, row] = False
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
                self._grow(self.capacity + max(1, self.capacity // 2), self.slots)  # the growth step of cluster.py
            row = self.n
            self.n += 1
            self.names.append(None)
            self.sources.append(None)
        self.index[name] = row
        self.names[row] = name
        self._snapshot = None
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
        self.pad[: len(topology.zones), row] = 0
        ids = [z.numa_id for z in topology.zones]
        irregular = any(a >= b for a, b in pairwise(ids))
        for slot, zone in enumerate(topology.zones):
            for res, qty in zone.available.items():
                c = self.column(res)
                milli = qty.amount * 1000
                value = math.ceil(qty.amount)
                if milli.denominator != 1 or abs(milli.numerator) >= _BOUND or value >= _FLOAT_EXACT:
                    irregular = True
                    continue
                self.avail_m[c][slot, row] = milli.numerator
                self.avail_min[c][slot, row] = milli.numerator
                self.avail_f[c][slot, row] = float(value)
                self.avail_fs[c][slot, row] = float(value) if value else 1.0
                self.avail_finf[c][slot, row] = float(value) if value else np.inf
                self.avail_zero[c][slot, row] = 0.0 if value else 1.0
                self.listed[c][slot, row] = True
                self.listed_any[c][row] = True
            for peer_slot, peer in enumerate(topology.zones):
                cost = zone.costs.get(peer.numa_id, MISSING_COST)
                if not -_COST_LIMIT < cost < _COST_LIMIT:
                    irregular = True
                    cost = MISSING_COST
                self.costs[row, slot, peer_slot] = cost
                if peer_slot == slot:
                    self.self_cost[slot, row] = cost
        self.irregular[row] = irregular
        return row

"""A struct-of-arrays view of many nodes' NUMA zones, for vectorised filtering and scoring.

Each node is a *row*; each NUMA zone of a node a *slot* (zone list position, document order, up to
``zones`` slots, grown on demand); each resource name a *column*. Arrays are slot-major,
``(slots, rows)``, so that reductions over a node's zones are cheap elementwise operations over rows.
Per column they hold the zone's ``available`` quantity exactly as an int64 count of thousandths
(``avail_m``, 0 when unlisted), the same with ``INT64_MIN`` in unlisted slots for one-compare
feasibility tests (``avail_min``), the upstream ``Value()`` (rounded-up integer, for scores) as float64
(``avail_f``, exact below 2**46), the same with 0 replaced by 1 or by +inf (``avail_fs`` /
``avail_finf``, divisors for the score kernels), 1.0 where the value is 0 (``avail_zero``), and whether
the zone lists it (``listed``). Per row: flags (has NRT, fresh, unreadable, *irregular*),
policy, scope, max NUMA nodes, zone count, costs, and which scalar resources the Node advertises.

A row is *irregular* when the arrays cannot represent it exactly or the fast rules do not apply — a
quantity that is not a whole number of thousandths, a value of 2**46 or more, NUMA ids not strictly
ascending in document order (the vectorised filter takes "lowest feasible id" as "first feasible
slot"), a cost outside int32 — and the pipeline then uses the scalar functions for it, so results never
depend on the representation.

Updates are incremental: :meth:`ClusterArrays.upsert` rewrites one row (a few fancy-indexed writes),
:meth:`ClusterArrays.remove` frees it for reuse. Pure data structure, no I/O.

Why one module over 400 lines: the arrays' layout (rows, slots, columns, flags), their growth and the
writers of a row must change together; the cell and distance-cost helpers only feed :meth:`upsert`.
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
from numaplane.placement.model.view import NodeTopology, NUMAZone

__all__ = ["F64", "I64", "INT64_MIN", "POLICY_CODES", "B", "ClusterArrays", "RowSource"]

INT64_MIN = np.iinfo(np.int64).min
_BOUND = 1 << 59  # |milli value| limit: sums of up to 16 slots stay inside int64
_FLOAT_EXACT = 1 << 46  # Value() limit: value * 100 stays an exact float64 integer
_COST_LIMIT = 1 << 31
POLICY_CODES = {"none": 0, "best-effort": 1, "restricted": 2, "single-numa-node": 3}
MISSING_COST = 255

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]

# per-column arrays ``(columns, slots, capacity)`` and the value of an unlisted cell
_CELLS: tuple[tuple[str, type, float], ...] = (
    ("avail_m", np.int64, 0),
    ("avail_min", np.int64, INT64_MIN),
    ("avail_f", np.float64, 0.0),
    ("avail_fs", np.float64, 1.0),
    ("avail_finf", np.float64, np.inf),
    ("avail_zero", np.float64, 1.0),
    ("listed", np.bool_, False),
)
_ROW_FLAGS = ("listed_any", "adv")  # per-column per-row arrays ``(columns, capacity)``, False when unset

_A = TypeVar("_A", I64, F64, B)


def _regrow(arr: _A, shape: tuple[int, ...], fill: float, n: int, z: int) -> _A:
    """A larger copy of ``arr`` (``shape``): old rows ``:n`` (last axis) and slots ``:z`` kept, rest ``fill``."""
    new = np.full(shape, fill, arr.dtype)
    if arr.ndim == 2:
        new[: arr.shape[0], :n] = arr[:, :n]
    else:
        new[: arr.shape[0], :z, :n] = arr[:, :z, :n]
    return new


@dataclass(frozen=True, slots=True)
class RowSource:
    """What a row was built from (kept for scalar fallback and explanations)."""

    topology: NodeTopology | None
    node: NodeInfo
    fresh: bool


@dataclass(frozen=True, slots=True)
class _Cells:
    """The listed cells of one view, ready for fancy-indexed writes (parallel arrays, one per cell)."""

    names: tuple[str, ...]  # resource of each cell
    seen: tuple[str, ...]  # every resource the zones list, irregular cells included, in document order
    slots: I64
    milli: I64
    value: F64
    irregular: bool
    costs: I64  # (zones, zones)


def _cells(topology: NodeTopology) -> _Cells:
    """Every representable ``(slot, resource)`` cell of ``topology`` and whether the row is irregular.

    Same rules as the scalar code: a cell whose quantity is not a whole number of thousandths, or
    too large, is left unlisted and makes the row irregular; so do NUMA ids not strictly ascending
    and costs outside int32 (those are stored as :data:`MISSING_COST`)."""
    zones = topology.zones
    ids = tuple(z.numa_id for z in zones)
    costs, irregular = _cost_matrix(zones, ids)
    irregular = irregular or any(a >= b for a, b in pairwise(ids))
    names: list[str] = []
    seen: list[str] = []
    slots: list[int] = []
    millis: list[int] = []
    values: list[int] = []
    for slot, zone in enumerate(zones):
        for res, qty in zone.available.items():
            seen.append(res)
            amount = qty.amount
            if amount.denominator == 1:  # integers: no Fraction arithmetic (same values)
                value = amount.numerator
                milli = value * 1000
            else:
                scaled = amount * 1000
                if scaled.denominator != 1:
                    irregular = True
                    continue
                milli = scaled.numerator
                value = math.ceil(amount)
            if abs(milli) >= _BOUND or value >= _FLOAT_EXACT:
                irregular = True
                continue
            names.append(res)
            slots.append(slot)
            millis.append(milli)
            values.append(value)
    return _Cells(
        tuple(names),
        tuple(seen),
        np.array(slots, np.int64),
        np.array(millis, np.int64),
        np.array(values, np.float64),
        irregular,
        costs,
    )


# Views charged with reservations keep their zones' cost maps (the same objects), so the cost matrix
# of a row is remembered per (cost map objects, NUMA ids); the entry holds the maps, so their ids
# cannot be reused while it exists. Matrices are read-only.
_COSTS_MEMO = 1 << 14
_COSTS: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[Mapping[int, int], ...], I64, bool]] = {}
_MATRICES: dict[tuple[bytes, int], I64] = {}


def _cost_matrix(zones: tuple[NUMAZone, ...], ids: tuple[int, ...]) -> tuple[I64, bool]:
    """``(costs (zones, zones), some cost was outside int32)``: zone i's cost to zone j's NUMA id."""
    maps = tuple(z.costs for z in zones)
    key = (tuple(map(id, maps)), ids)
    known = _COSTS.get(key)
    if known is not None and all(a is b for a, b in zip(known[0], maps, strict=True)):
        return known[1], known[2]
    irregular = False
    lines: list[list[int]] = []
    for zone_costs in maps:
        line = []
        for peer in ids:
            cost = zone_costs.get(peer, MISSING_COST)
            if not -_COST_LIMIT < cost < _COST_LIMIT:
                irregular = True
                cost = MISSING_COST
            line.append(cost)
        lines.append(line)
    matrix = np.array(lines, np.int64).reshape(len(zones), len(zones))
    matrix.flags.writeable = False
    if len(_COSTS) >= _COSTS_MEMO:
        _COSTS.clear()
        _MATRICES.clear()
    # equal matrices of different nodes' zones are one array (read-only; issue 30: memory)
    matrix = _MATRICES.setdefault((matrix.tobytes(), len(zones)), matrix)
    _COSTS[key] = (maps, matrix, irregular)
    return matrix, irregular


class ClusterArrays:
    """Rows of per-node NUMA data (module docstring). ``n`` is the high-water mark of used rows.

    Per-column data lives in 3-D arrays ``(columns, slots, capacity)`` (``avail_m[c]`` is column
    ``c``'s ``(slots, capacity)`` array) and ``(columns, capacity)`` for ``listed_any`` and ``adv``,
    so that a row is cleared and written with a few fancy-indexed assignments."""

    def __init__(self, zones: int = 8, capacity: int = 256) -> None:
        self.slots = max(1, zones)
        self.capacity = max(1, capacity)
        self.n = 0
        self.index: dict[str, int] = {}
        self.names: list[str | None] = []
        self.sources: list[RowSource | None] = []
        self._free: list[int] = []
        self.columns: dict[str, int] = {}
        self.avail_m: I64 = np.zeros((0, self.slots, self.capacity), np.int64)
        self.avail_min: I64 = np.zeros((0, self.slots, self.capacity), np.int64)
        self.avail_f: F64 = np.zeros((0, self.slots, self.capacity), np.float64)
        self.avail_fs: F64 = np.zeros((0, self.slots, self.capacity), np.float64)
        self.avail_finf: F64 = np.zeros((0, self.slots, self.capacity), np.float64)
        self.avail_zero: F64 = np.zeros((0, self.slots, self.capacity), np.float64)
        self.listed: B = np.zeros((0, self.slots, self.capacity), bool)
        self.listed_any: B = np.zeros((0, self.capacity), bool)
        self.adv: B = np.zeros((0, self.capacity), bool)
        self.version = 0  # bumped on every change
        self.flags_version = 0  # bumped when a row's flags change (see :meth:`row_flags`) or rows come or go
        self._snapshot: dict[str, int] | None = None  # copy of ``index`` handed out until membership changes
        self._stamps = 0  # source of per-row stamps (derived per-row caches key on them)
        self._adv_cols: dict[int, tuple[NodeInfo, I64]] = {}  # row → (its Node, advertised scalar columns)
        self._flags: dict[int, tuple[bool, bool, bool, bool, bool, int, bool, bool]] = {}  # row → row_flags(row)
        # row → what its listed cells, advertised columns, zones and costs were written from
        self._layouts: dict[int, tuple[NodeInfo, bytes, int]] = {}
        # equal layouts and advertised columns of different rows are one object (issue 30: memory)
        self._shared: dict[bytes, bytes] = {}
        self._shared_cols: dict[bytes, I64] = {}
        self._flag_sets: dict[
            tuple[bool, bool, bool, bool, bool, int, bool, bool], tuple[bool, bool, bool, bool, bool, int, bool, bool]
        ] = {}
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
        columns = len(self.columns)
        for key, _, fill in _CELLS:
            setattr(self, key, _regrow(getattr(self, key), (columns, slots, cap), fill, n, z))
        for key in _ROW_FLAGS:
            setattr(self, key, _regrow(getattr(self, key), (columns, cap), False, n, z))

    def column(self, name: str) -> int:
        """The column of resource ``name``, created (all unlisted) on first use."""
        c = self.columns.get(name)
        if c is None:
            c = len(self.columns)
            self.columns[name] = c
            for key, dtype, fill in _CELLS:
                extra: npt.NDArray[np.generic] = np.full((1, self.slots, self.capacity), fill, dtype)
                setattr(self, key, np.concatenate((getattr(self, key), extra)))
            for key in _ROW_FLAGS:
                setattr(self, key, np.concatenate((getattr(self, key), np.zeros((1, self.capacity), bool))))
        return c

    # --- rows --------------------------------------------------------------------------------------

    @property
    def stamps_issued(self) -> int:
        """The last row stamp issued: stamps only grow, so a row whose stamp is above a number read
        here earlier changed since."""
        return self._stamps

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
        self._adv_cols.pop(row, None)
        self._flags.pop(row, None)
        self._layouts.pop(row, None)
        self._free.append(row)
        self.version += 1
        self.flags_version += 1

    def _clear(self, row: int) -> None:
        self._stamps += 1
        self.stamp[row] = self._stamps
        self.costs[row] = MISSING_COST
        self.nzones[row] = 0
        self.pad[:, row] = 255
        self.self_cost[:, row] = MISSING_COST
        self.avail_m[:, :, row] = 0
        self.avail_min[:, :, row] = INT64_MIN
        self.avail_f[:, :, row] = 0.0
        self.avail_fs[:, :, row] = 1.0
        self.avail_finf[:, :, row] = np.inf
        self.avail_zero[:, :, row] = 1.0
        self.listed[:, :, row] = False
        self.listed_any[:, row] = False
        self.adv[:, row] = False
        self.irregular[row] = self.problem[row] = self.has_nrt[row] = False

    def _row_for(self, name: str) -> int:
        row = self.index.get(name)
        if row is not None:
            return row
        if self._free:
            row = self._free.pop()
        else:
            if self.n == self.capacity:
                self._grow(self.capacity + max(1, self.capacity // 2), self.slots)  # 1.5x: less slack
            row = self.n
            self.n += 1
            self.names.append(None)
            self.sources.append(None)
        self.index[name] = row
        self.names[row] = name
        self._snapshot = None
        return row

    def _advertised(self, row: int, node: NodeInfo) -> I64:
        """Columns of the scalar resources ``node`` advertises (remembered while the row's Node is the same)."""
        known = self._adv_cols.get(row)
        if known is not None and known[0] is node:
            return known[1]
        cols = np.array([self.column(res) for res in node.allocatable if is_scalar_resource(res)], np.int64)
        cols.flags.writeable = False
        if len(self._shared_cols) > 4 * self.capacity:
            self._shared_cols.clear()
        cols = self._shared_cols.setdefault(cols.tobytes(), cols)
        self._adv_cols[row] = (node, cols)
        return cols

    def row_flags(self, row: int) -> tuple[bool, bool, bool, bool, bool, int, bool, bool]:
        """What per-row selections depend on: present, has NRT, fresh, problem, irregular, policy,
        pod scope, has zones."""
        return (
            bool(self.present[row]),
            bool(self.has_nrt[row]),
            bool(self.fresh[row]),
            bool(self.problem[row]),
            bool(self.irregular[row]),
            int(self.policy[row]),
            bool(self.scope_pod[row]),
            bool(self.nzones[row] > 0),
        )

    def upsert(self, name: str, topology: NodeTopology | None, node: NodeInfo, *, fresh: bool = True) -> int:
        """Write node ``name``'s row from its view (``None``: no NRT), Node and freshness; return the row.

        A view charged from the very view the row holds (``topology.charged_from``), with the same
        Node and freshness, is applied as its charges (:meth:`_charge`) when they can be: the row then
        holds exactly what writing the charged view whole would put there (a test checks both)."""
        if topology is not None and topology.charged_from is not None:
            row = self.index.get(name)
            if row is not None and self._charge(row, topology, node, fresh):
                return row
        known = name in self.index
        row = self._row_for(name)
        self._write(row, topology, node, fresh)
        before = self._flags.get(row) if known else None
        # the row's flags as just written (policy and scope keep their old values without a readable NRT)
        if topology is None or topology.problem is not None:
            old_policy, old_scope = (before[5], before[6]) if before is not None else self.row_flags(row)[5:7]
            flags = (True, topology is not None, fresh, topology is not None, False, old_policy, old_scope, False)
        else:
            config = topology.config
            irregular = bool(self.irregular[row])
            flags = (
                True, True, fresh, False, irregular, POLICY_CODES[config.policy], config.scope == "pod",
                len(topology.zones) > 0,
            )  # fmt: skip
        self._flags[row] = self._flag_sets.setdefault(flags, flags)  # few distinct tuples: shared
        if flags != before:
            self.flags_version += 1
        return row

    def _charge(self, row: int, topology: NodeTopology, node: NodeInfo, fresh: bool) -> bool:
        """Apply ``topology``'s charges (``charged_from``) to ``row`` if the row holds the view charged,
        read whole into regular cells, with Node ``node`` and freshness ``fresh``, and every charged
        quantity is a whole, non-negative number of thousandths; ``False`` (nothing written) otherwise.

        Why that is exact: the charged view lists the same resources in the same zones with the same
        costs and config (only ``available`` changes), so only the values of the listed cells of the
        charged resources change. With non-negative requests, charging one after another and clamping
        at 0 each time equals clamping once the sum (``max(max(a - r1, 0) - r2, 0) = max(a - r1 - r2,
        0)``), and the new value is a whole number of thousandths below the old one: the row stays
        regular, its Value() is the rounded-up quotient by 1,000."""
        src = self.sources[row]
        charged_from = topology.charged_from
        if (
            src is None
            or charged_from is None
            or src.node is not node
            or src.fresh != fresh
            or src.topology is None
            or src.topology.serial != charged_from[0]
            or row not in self._layouts  # the row was not written from readable cells
            or self.irregular[row]
        ):
            return False
        totals: dict[int, int] = {}
        columns = self.columns
        for request in charged_from[1]:
            for res, qty in request.items():
                amount = qty.amount
                if amount.denominator == 1:
                    milli = amount.numerator * 1000
                else:
                    scaled = amount * 1000
                    if scaled.denominator != 1:
                        return False
                    milli = scaled.numerator
                if milli < 0:
                    return False
                column = columns.get(res)
                if column is not None and milli:  # no column: no zone of any row lists it
                    # every cell holds less than _BOUND: charging _BOUND or more leaves 0 (int64-safe)
                    totals[column] = min(totals.get(column, 0) + milli, _BOUND)
        self._stamps += 1
        self.stamp[row] = self._stamps
        self.version += 1
        self.sources[row] = RowSource(topology, node, fresh)
        if not totals:
            return True
        cols = np.fromiter(totals, np.int64, len(totals))
        amounts = np.fromiter(totals.values(), np.int64, len(totals))
        picked, slots = np.nonzero(self.listed[cols, :, row])
        flat = (cols[picked] * self.slots + slots) * self.capacity + row
        milli = np.maximum(np.take(self.avail_m, flat) - amounts[picked], 0)
        value = (-(-milli // 1000)).astype(np.float64)
        zero = milli == 0
        np.put(self.avail_m, flat, milli)
        np.put(self.avail_min, flat, milli)
        np.put(self.avail_f, flat, value)
        np.put(self.avail_fs, flat, value + zero)
        np.put(self.avail_finf, flat, np.where(zero, np.inf, value))
        np.put(self.avail_zero, flat, zero.astype(np.float64))
        return True

    def _write(self, row: int, topology: NodeTopology | None, node: NodeInfo, fresh: bool) -> None:
        if topology is not None and len(topology.zones) > self.slots:
            self._grow(self.capacity, len(topology.zones))
        adv = self._advertised(row, node)
        cells = None if topology is None or topology.problem is not None else _cells(topology)
        if cells is None:
            self._layouts.pop(row, None)
            self._clear(row)
            self.present[row] = True
            self.fresh[row] = fresh
            self.sources[row] = RowSource(topology, node, fresh)
            self.adv[adv, row] = True
            self.version += 1
            if topology is not None:
                self.has_nrt[row] = True
                self.problem[row] = True
            return
        assert topology is not None
        columns = self.columns
        for res in cells.seen:  # columns are created in the order the zones list resources
            if res not in columns:
                self.column(res)
        cols = np.array([self.columns[res] for res in cells.names], np.int64)
        slots, milli, value = cells.slots, cells.milli, cells.value
        zones = len(topology.zones)
        # cells and slots have one entry per cell, costs ``zones * zones``: the lengths split the bytes
        cells_bytes = cols.tobytes() + slots.tobytes() + cells.costs.tobytes()
        if len(self._shared) > 4 * self.capacity:
            self._shared.clear()
        layout = (node, self._shared.setdefault(cells_bytes, cells_bytes), zones)
        if self._layouts.get(row) == layout:
            # same Node, same listed cells, same costs: only the values and the config are rewritten
            # (everything else already holds exactly what a clear-and-write would put there)
            self._stamps += 1
            self.stamp[row] = self._stamps
        else:
            self._layouts[row] = layout
            self._clear(row)
            self.adv[adv, row] = True
            self.nzones[row] = zones
            self.pad[:zones, row] = 0
            self.listed[cols, slots, row] = True
            self.listed_any[cols, row] = True
            self.costs[row, :zones, :zones] = cells.costs
            self.self_cost[:zones, row] = cells.costs.diagonal()
        self.present[row] = True
        self.fresh[row] = fresh
        self.sources[row] = RowSource(topology, node, fresh)
        self.version += 1
        self.has_nrt[row] = True
        config = topology.config
        self.policy[row] = POLICY_CODES[config.policy]
        self.scope_pod[row] = config.scope == "pod"
        self.max_numa[row] = config.max_numa_nodes
        # flat positions of the cells in every ``(columns, slots, capacity)`` array (``np.put`` writes
        # through any memory layout; cheaper than a three-index fancy assignment)
        flat = (cols * self.slots + slots) * self.capacity + row
        zero = value == 0
        np.put(self.avail_m, flat, milli)
        np.put(self.avail_min, flat, milli)
        np.put(self.avail_f, flat, value)
        np.put(self.avail_fs, flat, value + zero)  # 1.0 where the value is 0, else the value (exact)
        np.put(self.avail_finf, flat, np.where(zero, np.inf, value))
        np.put(self.avail_zero, flat, zero.astype(np.float64))
        self.irregular[row] = cells.irregular

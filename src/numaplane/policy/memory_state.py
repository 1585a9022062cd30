"""Memory Manager state: per-NUMA memory tables, groups ("cells"), container blocks; checkpoint form.

All sizes are bytes (Python ints, exact). Field names in dicts are those of the kubelet's
``memory_manager_state`` checkpoint (``/var/lib/kubelet/memory_manager_state``)::

    {"policyName": "Static",
     "machineState": {"<numa>": {"numberOfAssignments": n,
                                 "memoryMap": {"<resource>": {"total", "systemReserved",
                                                              "allocatable", "reserved", "free"}},
                                 "cells": [numa ids]}},
     "entries": {"<pod uid>": {"<container>": [{"numaAffinity": [ids], "type": "<resource>",
                                               "size": bytes}]}},     # omitted when empty
     "checksum": <uint32>}

:func:`checkpoint_checksum` reproduces the kubelet's checksum (FNV-1a 32 of the go-spew ``%#v``
rendering of the checkpoint with checksum 0), verified against a real kubelet file and an upstream
test vector. Resources are ``memory`` and ``hugepages-<size>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.policy.errors import StateError
from numaplane.topology.model import Topology, hugepage_resource_name

__all__ = [
    "Block",
    "MemoryState",
    "MemoryTable",
    "NUMAMemory",
    "NUMANodeState",
    "charge",
    "checkpoint_checksum",
    "machine_memory_from_dict",
    "machine_memory_from_topology",
    "machine_states_equal",
    "release",
    "violates_groups",
]

CHECKPOINT_CORRUPTED = "checkpoint is corrupted"


@dataclass(frozen=True, slots=True)
class NUMAMemory:
    """What the Memory Manager reads of one NUMA node (cAdvisor): total memory and hugepages.

    ``hugepages`` is ``((page size in bytes, number of pages), ...)``.
    """

    id: int
    memory_bytes: int
    hugepages: tuple[tuple[int, int], ...] = ()


def machine_memory_from_topology(topology: Topology) -> tuple[NUMAMemory, ...]:
    """Every modelled NUMA node (CPU-less ones included), ascending ids."""
    by_id = topology.numa_by_id
    out = []
    for nid in topology.memory_numa_ids:
        node = by_id.get(nid)
        pages = tuple((h.page_size_bytes, h.total) for h in node.hugepages) if node else ()
        out.append(NUMAMemory(nid, node.memory_total_bytes if node else 0, pages))
    return tuple(out)


def machine_memory_from_dict(doc: Mapping[str, Any] | None) -> tuple[NUMAMemory, ...] | None:
    """The conformance ``machine`` form: ``{"numa_nodes": [{"id", "memory", "hugepages":
    [{"page_size_kib", "num_pages"}]}]}``; ``None`` stays ``None`` (no machine information)."""
    if doc is None:
        return None
    return tuple(
        NUMAMemory(
            int(n["id"]),
            int(n["memory"]),
            tuple((int(h["page_size_kib"]) * 1024, int(h["num_pages"])) for h in n.get("hugepages") or ()),
        )
        for n in doc.get("numa_nodes") or ()
    )


def hugepages_resource(page_size_bytes: int) -> str:
    return hugepage_resource_name(page_size_bytes)


@dataclass(slots=True)
class MemoryTable:
    """One resource on one NUMA node. Invariant kept by the policy: ``reserved + free == allocatable``
    (unless a stored state says otherwise; :meth:`MemoryPolicy.start` checks it)."""

    total: int
    system_reserved: int
    allocatable: int
    reserved: int
    free: int

    def copy(self) -> MemoryTable:
        return MemoryTable(self.total, self.system_reserved, self.allocatable, self.reserved, self.free)

    def to_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "systemReserved": self.system_reserved,
            "allocatable": self.allocatable,
            "reserved": self.reserved,
            "free": self.free,
        }

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> MemoryTable:
        return MemoryTable(
            int(doc.get("total", 0)),
            int(doc.get("systemReserved", 0)),
            int(doc.get("allocatable", 0)),
            int(doc.get("reserved", 0)),
            int(doc.get("free", 0)),
        )


@dataclass(slots=True)
class NUMANodeState:
    """A NUMA node: assignment count, memory tables by resource, and its group (``cells``)."""

    assignments: int = 0
    memory: dict[str, MemoryTable] = field(default_factory=dict)
    cells: list[int] = field(default_factory=list)

    def copy(self) -> NUMANodeState:
        return NUMANodeState(self.assignments, {k: t.copy() for k, t in self.memory.items()}, list(self.cells))

    def to_dict(self) -> dict[str, Any]:
        return {
            "numberOfAssignments": self.assignments,
            "memoryMap": {k: self.memory[k].to_dict() for k in sorted(self.memory)},
            "cells": list(self.cells),
        }

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> NUMANodeState:
        return NUMANodeState(
            int(doc.get("numberOfAssignments", 0)),
            {str(k): MemoryTable.from_dict(v) for k, v in (doc.get("memoryMap") or {}).items()},
            [int(c) for c in doc.get("cells") or ()],
        )


@dataclass(frozen=True, slots=True)
class Block:
    """Memory of one ``type`` pinned to NUMA nodes ``numa`` (ascending); ``size`` in bytes."""

    numa: tuple[int, ...]
    type: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"numaAffinity": list(self.numa), "type": self.type, "size": self.size}

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> Block:
        return Block(tuple(int(n) for n in doc.get("numaAffinity") or ()), str(doc["type"]), int(doc["size"]))


Entries = dict[str, dict[str, list[Block]]]


@dataclass
class MemoryState:
    """Machine state (NUMA id → node state) and assignments (pod uid → container → blocks)."""

    machine: dict[int, NUMANodeState] = field(default_factory=dict)
    entries: Entries = field(default_factory=dict)

    def copy(self) -> MemoryState:
        return MemoryState(
            {n: s.copy() for n, s in self.machine.items()},
            {uid: {name: list(blocks) for name, blocks in cs.items()} for uid, cs in self.entries.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"machineState": ..., "entries": ...}`` in checkpoint field names (NUMA ids as strings)."""
        return {
            "machineState": {str(n): self.machine[n].to_dict() for n in sorted(self.machine)},
            "entries": {
                uid: {name: [b.to_dict() for b in blocks] for name, blocks in cs.items()}
                for uid, cs in self.entries.items()
            },
        }

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> MemoryState:
        """Accepts ``machineState`` or ``machine_state`` (the conformance spelling)."""
        machine = doc.get("machineState", doc.get("machine_state")) or {}
        entries = doc.get("entries") or {}
        return MemoryState(
            {int(n): NUMANodeState.from_dict(s) for n, s in machine.items()},
            {
                str(uid): {str(name): [Block.from_dict(b) for b in blocks or ()] for name, blocks in cs.items()}
                for uid, cs in entries.items()
            },
        )

    def to_checkpoint(self, policy_name: str = "Static") -> dict[str, Any]:
        """The kubelet checkpoint document, keys in the kubelet's JSON order, with its checksum."""
        doc: dict[str, Any] = {"policyName": policy_name}
        state = self.to_dict()
        doc["machineState"] = {k: state["machineState"][k] for k in sorted(state["machineState"])}
        if state["entries"]:
            doc["entries"] = {
                uid: {name: state["entries"][uid][name] for name in sorted(state["entries"][uid])}
                for uid in sorted(state["entries"])
            }
        doc["checksum"] = checkpoint_checksum(doc)
        return doc

    @staticmethod
    def from_checkpoint(doc: Mapping[str, Any], *, verify: bool = True) -> tuple[str, MemoryState]:
        """``(policy name, state)`` from a checkpoint document; :class:`StateError` on a bad checksum."""
        if verify and int(doc.get("checksum", 0)) != checkpoint_checksum(doc):
            raise StateError(CHECKPOINT_CORRUPTED)
        return str(doc.get("policyName", "")), MemoryState.from_dict(doc)


# -- state operations (kubelet policy_static helpers) ----------------------------------------------


def violates_groups(machine: Mapping[int, NUMANodeState], ids: tuple[int, ...]) -> bool:
    """Kubelet ``isAffinityViolatingNUMAAllocations``: a multi-node mask may not contain a used
    node that serves single-node allocations or belongs to another group."""
    if len(ids) == 1:
        return False
    for nid in ids:
        node = machine[nid]
        if node.assignments > 0 and (len(node.cells) == 1 or sorted(node.cells) != list(ids)):
            return True
    return False


def charge(machine: Mapping[int, NUMANodeState], ids: tuple[int, ...], resource: str, size: int) -> None:
    """Count one assignment on every node of ``ids`` (group := ids) and take ``size`` bytes from the
    nodes' free memory in ascending order (kubelet ``updateMachineState``)."""
    for nid in ids:
        node = machine[nid]
        node.assignments += 1
        node.cells = list(ids)
        table = node.memory.get(resource)
        if size == 0 or table is None or table.free <= 0:
            continue
        step = min(table.free, size)
        table.reserved += step
        table.free -= step
        size -= step


def machine_states_equal(real: Mapping[int, NUMANodeState], expected: Mapping[int, NUMANodeState]) -> bool:
    """Kubelet ``areMachineStatesEqual``: same nodes, counts, groups, totals, system reserved and
    allocatable; free and reserved compared as sums over each node's group."""
    if real.keys() != expected.keys():
        return False
    for nid, a in real.items():
        b = expected[nid]
        if a.assignments != b.assignments or sorted(a.cells) != sorted(b.cells) or a.memory.keys() != b.memory.keys():
            return False
        for resource, ta in a.memory.items():
            tb = b.memory[resource]
            if (ta.total, ta.system_reserved, ta.allocatable) != (tb.total, tb.system_reserved, tb.allocatable):
                return False
            sums = [0, 0, 0, 0]
            for cell in a.cells:
                if cell not in real or cell not in expected:
                    return False
                ra, rb = real[cell].memory.get(resource), expected[cell].memory.get(resource)
                sums[0] += ra.free if ra else 0
                sums[1] += ra.reserved if ra else 0
                sums[2] += rb.free if rb else 0
                sums[3] += rb.reserved if rb else 0
            if sums[0] != sums[2] or sums[1] != sums[3]:
                return False
    return True


def release(machine: Mapping[int, NUMANodeState], block: Block) -> None:
    """Undo one block (kubelet ``RemoveContainer``): one assignment less on each node (group reset
    to itself at zero), ``size`` bytes moved from reserved back to free, nodes in ascending order."""
    released = block.size
    for nid in block.numa:
        node = machine.get(nid)
        if node is None:
            continue
        node.assignments -= 1
        if node.assignments == 0:
            node.cells = [nid]
        table = node.memory.get(block.type)
        if released == 0 or table is None or table.reserved == 0:
            continue
        step = min(table.reserved, released)
        table.reserved -= step
        table.free += step
        released -= step


# -- the kubelet checksum ---------------------------------------------------------------------------


def _nil_or(value: Any, render: Any) -> str:
    return "<nil>" if value is None else str(render(value))


def _ints(values: Sequence[Any] | None) -> str:
    return _nil_or(values, lambda v: "[" + " ".join(str(int(x)) for x in v) + "]")


def _table(doc: Mapping[str, Any] | None) -> str:
    if doc is None:
        return "<nil>"
    fields = (
        ("TotalMemSize", "total"),
        ("SystemReserved", "systemReserved"),
        ("Allocatable", "allocatable"),
        ("Reserved", "reserved"),
        ("Free", "free"),
    )
    return "<*>{" + " ".join(f"{name}:(uint64){int(doc.get(key, 0))}" for name, key in fields) + "}"


def _node(doc: Mapping[str, Any] | None) -> str:
    if doc is None:
        return "<nil>"
    mem = doc.get("memoryMap")
    mem_text = _nil_or(mem, lambda m: "map[" + " ".join(f"{k}:{_table(m[k])}" for k in sorted(m)) + "]")
    return (
        f"<*>{{NumberOfAssignments:(int){int(doc.get('numberOfAssignments', 0))} "
        f"MemoryMap:(map[v1.ResourceName]*state.MemoryTable){mem_text} "
        f"Cells:([]int){_ints(doc.get('cells'))}}}"
    )


def _blocks(blocks: Sequence[Mapping[str, Any]] | None) -> str:
    if blocks is None:
        return "<nil>"
    parts = [
        f"{{NUMAAffinity:([]int){_ints(b.get('numaAffinity'))} Type:(v1.ResourceName){b.get('type', '')} "
        f"Size:(uint64){int(b.get('size', 0))}}}"
        for b in blocks
    ]
    return "[" + " ".join(parts) + "]"


def checkpoint_checksum(doc: Mapping[str, Any]) -> int:
    """The kubelet's checksum of a ``memory_manager_state`` document (JSON ``null`` ≠ ``[]``/``{}``)."""
    machine = doc.get("machineState", {})
    entries = doc.get("entries", {})
    machine_text = _nil_or(machine, lambda m: "map[" + " ".join(f"{k}:{_node(m[k])}" for k in sorted(m, key=int)) + "]")
    entries_text = _nil_or(
        entries,
        lambda e: (
            "map["
            + " ".join(
                f"{uid}:"
                + _nil_or(e[uid], lambda cs: "map[" + " ".join(f"{n}:{_blocks(cs[n])}" for n in sorted(cs)) + "]")
                for uid in sorted(e)
            )
            + "]"
        ),
    )
    text = (
        f"(*state.MemoryManagerCheckpoint){{PolicyName:(string){doc.get('policyName', '')} "
        f"MachineState:(state.NUMANodeMap){machine_text} "
        f"Entries:(state.ContainerMemoryAssignments){entries_text} Checksum:(checksum.Checksum)0}}"
    )
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h

"""Memory Manager, static policy (kubelet v1.35 ``memorymanager/policy_static.go`` semantics).

Only Guaranteed pods are handled; memory and ``hugepages-*`` requests are pinned to a set of NUMA
nodes. Invariant ("single vs cross NUMA"): a NUMA node is used either for single-node allocations
or as a member of exactly one multi-node group (``cells``), never both. Sizes are bytes.

Errors carry the kubelet's exact messages: construction → :class:`PolicyConfigError`;
:meth:`MemoryPolicy.start` → :class:`StateError` (the kubelet refuses to start); allocation →
:class:`MemoryManagerError`, a plain error that admission reports as
``Allocate failed due to [memorymanager] ..., which is unexpected``. A failed ``allocate`` leaves the
state untouched.

Known divergences: a resource missing from a node's memory map counts as 0 bytes there, and a hint
naming a NUMA node absent from the machine state is refused with a :class:`MemoryManagerError`
(upstream dereferences nil and crashes); a node whose hugepages and reserved memory exceed its memory
gets a negative allocatable (upstream's unsigned arithmetic wraps around to a huge value); when no
hint list for ``memory`` exists (hugepages requested without memory), the default hint comes from the
first requested type (upstream would dereference a nil mask).

Why one module over 400 lines: :class:`MemoryPolicy` follows ``pkg/kubelet/cm/memorymanager/policy_static.go``
function by function (``Start``/``validateState``, ``Allocate``, ``GetTopologyHints``/``calculateHints``,
``extendTopologyManagerHint``, the init-container reuse) so a reviewer can read the two side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numaplane.policy.errors import PolicyConfigError, StateError
from numaplane.policy.hints import MaskTable, NUMAMask, TopologyHint, hint_of, mask_table
from numaplane.policy.memory_state import (
    Block,
    MemoryState,
    MemoryTable,
    NUMAMemory,
    NUMANodeState,
    charge,
    hugepages_resource,
    machine_memory_from_topology,
    machine_states_equal,
    release,
    violates_groups,
)
from numaplane.policy.topology_manager import PlainAllocationError
from numaplane.resources.pod import Container, Pod
from numaplane.resources.quantity import Quantity, format_quantity
from numaplane.topology.model import Topology

__all__ = ["MemoryManagerError", "MemoryPolicy"]

_INT64_MAX = (1 << 63) - 1
Requests = dict[str, int]


class MemoryManagerError(PlainAllocationError):
    """A Memory Manager allocation error; ``message`` is the kubelet's ``[memorymanager] ...`` text."""


def _is_memory_resource(name: str) -> bool:
    return name == "memory" or name.startswith("hugepages-")


class MemoryPolicy:
    """The static Memory Manager policy with its state.

    ``machine`` is the cAdvisor view (``None``: unknown, then :meth:`start` can only validate an
    empty state); ``reserved`` is system-reserved bytes per NUMA node and resource.
    """

    name = "Static"

    def __init__(
        self,
        machine: Sequence[NUMAMemory] | None,
        reserved: Mapping[int, Mapping[str, int]],
        state: MemoryState | None = None,
    ) -> None:
        if sum(int(r.get("memory", 0)) for r in reserved.values()) <= 0:
            raise PolicyConfigError("[memorymanager] you should specify the system reserved memory")
        self.machine = None if machine is None else tuple(machine)
        converted: dict[int, dict[str, int]] = {n.id: {} for n in self.machine or ()}
        for numa, limits in reserved.items():
            converted.setdefault(int(numa), {}).update({str(k): int(v) for k, v in limits.items()})
        self.reserved = converted
        self.state = state if state is not None else MemoryState()
        # pod uid -> mask bits -> resource -> reusable bytes (init containers' memory; not checkpointed)
        self._reusable: dict[str, dict[int, dict[str, int]]] = {}
        self._sums: dict[tuple[int, ...], list[int]] = {}
        self._last_pod: tuple[Pod, bool] | None = None

    @classmethod
    def from_topology(
        cls,
        topology: Topology,
        reserved: Mapping[int, Mapping[str, int]],
        node_allocatable_reservation: Mapping[str, int] | None = None,
    ) -> MemoryPolicy:
        """Build for a machine; with ``node_allocatable_reservation`` (kube + system reserved + hard
        eviction, bytes per resource) check the reservation as the kubelet does at start."""
        machine = machine_memory_from_topology(topology)
        if node_allocatable_reservation is not None:
            _validate_reserved(machine, reserved, node_allocatable_reservation)
        return cls(machine, reserved)

    def _managed(self, pod: Pod) -> bool:
        # hints and allocate ask about the same pod object in turn: remember the last answer
        last = self._last_pod
        if last is not None and last[0] is pod:
            return last[1]
        managed = _is_managed(pod)
        self._last_pod = (pod, managed)
        return managed

    # -- requests -----------------------------------------------------------------------------------
    def container_requests(self, pod: Pod, container: Container) -> Requests:
        """Requested bytes of ``memory`` and ``hugepages-*`` (the spec's requests, as kubelet v1.36)."""
        resources = _allocated_resources(pod, container)
        out: Requests = {}
        for name in sorted(resources, key=lambda n: (n != "memory", n)):
            if not _is_memory_resource(name):
                continue
            amount = resources[name].amount
            if amount.denominator != 1 or not -_INT64_MAX - 1 <= amount.numerator <= _INT64_MAX:
                raise MemoryManagerError("[memorymanager] failed to represent quantity as int64")
            out[name] = amount.numerator
        return out

    def pod_requests(self, pod: Pod) -> Requests:
        """Pod-level bytes per resource: max(largest init-phase need, app containers + sidecars);
        only resources requested by app containers appear (kubelet ``getPodRequestedResources``)."""
        init_max: Requests = {}
        sidecars: Requests = {}
        for c in pod.init_containers:
            for name, qty in self.container_requests(pod, c).items():
                init_max.setdefault(name, 0)
                if c.sidecar:
                    sidecars[name] = sidecars.get(name, 0) + qty
                elif sidecars.get(name, 0) + qty > init_max[name]:
                    init_max[name] = sidecars.get(name, 0) + qty
        apps: Requests = {}
        for c in pod.containers:
            for name, qty in self.container_requests(pod, c).items():
                apps[name] = apps.get(name, 0) + qty
        return {name: max(total + sidecars.get(name, 0), init_max.get(name, 0)) for name, total in apps.items()}

    # -- hints --------------------------------------------------------------------------------------
    def hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint]] | None:
        """Kubelet ``GetTopologyHints``: ``None`` (no preference) for non-Guaranteed pods."""
        if not self._managed(pod):
            return None
        try:
            requested = self.container_requests(pod, container)
        except MemoryManagerError:
            return None
        blocks = self.state.entries.get(pod.uid, {}).get(container.name)
        if blocks is not None:
            return _regenerate_hints(blocks, requested)
        return self.calculate_hints(pod.uid, requested)

    def pod_hints(self, pod: Pod) -> dict[str, list[TopologyHint]] | None:
        """Kubelet ``GetPodTopologyHints`` (pod scope)."""
        if not self._managed(pod):
            return None
        try:
            requested = self.pod_requests(pod)
        except MemoryManagerError:
            return None
        assigned = self.state.entries.get(pod.uid, {})
        for c in pod.all_containers():
            blocks = assigned.get(c.name)
            if blocks is not None:
                return _regenerate_hints(blocks, requested)
        return self.calculate_hints(pod.uid, requested)

    def calculate_hints(self, pod_uid: str, requested: Requests) -> dict[str, list[TopologyHint]]:
        """One hint per NUMA mask that can hold ``requested`` now (identical lists for every type);
        Preferred iff the mask is as small as the smallest mask whose *allocatable* memory fits.

        Masks are checked in kubelet order: allocatable fits (sets the minimal size), then the
        single-vs-cross NUMA rule, then free memory (+ this pod's reusable init-container memory)."""
        if not requested:
            return {}
        machine = self.state.machine
        table = mask_table(tuple(sorted(machine)))
        nodes = table.nodes
        fits: list[bool] | None = None
        free_ok: list[bool] | None = None
        for resource, need in requested.items():
            tables = [machine[n].memory.get(resource) for n in nodes]
            alloc = self._subset_sums(tuple(t.allocatable if t else 0 for t in tables))
            free = self._subset_sums(tuple(t.free if t else 0 for t in tables))
            a_ok = [x >= need for x in alloc]
            f_ok = [x >= need for x in free]
            for bits, per in self._reusable.get(pod_uid, {}).items():
                d = table.dense(NUMAMask(bits).ids())
                if d is not None and per.get(resource):
                    f_ok[d] = free[d] + per[resource] >= need
            fits = a_ok if fits is None else [x and y for x, y in zip(fits, a_ok, strict=True)]
            free_ok = f_ok if free_ok is None else [x and y for x, y in zip(free_ok, f_ok, strict=True)]
        assert fits is not None and free_ok is not None
        counts = table.counts
        # ``order`` is by increasing size: the first mask that fits has the minimal size
        min_size = next((counts[d] for d in table.order if fits[d]), len(nodes))
        groups = _group_constraints(machine, table)
        if groups is None:
            accepted = [d for d in table.order if fits[d] and free_ok[d]]
        else:
            in_group, used, ok_groups = groups
            accepted = [
                d
                for d in table.order
                if fits[d] and free_ok[d] and (not d & in_group if counts[d] == 1 else (not d & used or d in ok_groups))
            ]
        if not accepted:
            return {}
        hints = [table.hints[d][counts[d] == min_size] for d in accepted]
        return {r: list(hints) for r in requested}

    def _subset_sums(self, values: tuple[int, ...]) -> list[int]:
        # allocatable vectors never change and free ones repeat within an admission: memoise
        sums = self._sums.get(values)
        if sums is None:
            if len(self._sums) > 256:
                self._sums.clear()
            sums = self._sums[values] = MaskTable.subset_sums(values)
        return sums

    # -- allocation ---------------------------------------------------------------------------------
    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> list[Block]:
        """Kubelet ``Allocate`` with the topology manager's ``hint``; returns the container's blocks
        (``[]`` when the pod is not managed). Idempotent for a container already in the state."""
        if not self._managed(pod):
            return []
        existing = self.state.entries.get(pod.uid, {}).get(container.name)
        if existing is not None:
            self._update_reusable(pod, container, existing)
            return list(existing)
        requested = self.container_requests(pod, container)
        machine = self.state.machine
        best = hint
        if hint.numa is None:
            best = self._default_hint(pod.uid, requested)
            if not best.preferred and hint.preferred:
                raise MemoryManagerError("[memorymanager] failed to find the default preferred hint")
        mask = best.numa
        assert mask is not None
        unknown = [n for n in mask.ids() if n not in machine]
        if unknown:
            raise MemoryManagerError(f"[memorymanager] the topology hint uses unknown NUMA node(s) {unknown}")
        if not self._satisfies(mask, requested):
            extended = self._extend_hint(pod.uid, requested, mask)
            if not extended.preferred and best.preferred:
                raise MemoryManagerError("[memorymanager] failed to find the extended preferred hint")
            assert extended.numa is not None
            mask = extended.numa
        ids = mask.ids()
        if violates_groups(machine, ids):
            raise MemoryManagerError("[memorymanager] preferred hint violates NUMA node allocation")
        reusable = self._reusable.get(pod.uid, {}).get(mask.bits, {})
        blocks: list[Block] = []
        for resource, size in requested.items():
            blocks.append(Block(ids, resource, size))
            charge(machine, ids, resource, max(0, size - reusable.get(resource, 0)))
        self._update_reusable(pod, container, blocks)
        self.state.entries.setdefault(pod.uid, {})[container.name] = blocks
        self._shrink_init_blocks(pod, container, blocks)
        return list(blocks)

    def remove(self, pod_uid: str, container_name: str) -> None:
        """Kubelet ``RemoveContainer``: release the blocks, walking each block's nodes in order."""
        containers = self.state.entries.get(pod_uid)
        if containers is None or container_name not in containers:
            return
        blocks = containers.pop(container_name)
        if not containers:
            del self.state.entries[pod_uid]
        for block in blocks:
            release(self.state.machine, block)

    def remove_pod(self, pod_uid: str) -> None:
        for name in list(self.state.entries.get(pod_uid, {})):
            self.remove(pod_uid, name)
        self._reusable.pop(pod_uid, None)

    def blocks(self, pod_uid: str, container_name: str) -> list[Block] | None:
        found = self.state.entries.get(pod_uid, {}).get(container_name)
        return None if found is None else list(found)

    # -- start --------------------------------------------------------------------------------------
    def default_machine_state(self) -> dict[int, NUMANodeState]:
        """The state of an empty machine: hugepages first, then memory minus reserved and hugepages."""
        out: dict[int, NUMANodeState] = {}
        for node in self.machine or ():
            state = NUMANodeState(0, {}, [node.id])
            hugepages_total = 0
            for page_size, pages in node.hugepages:
                resource = hugepages_resource(page_size)
                total = page_size * pages
                reserved = self.reserved.get(node.id, {}).get(resource, 0)
                state.memory[resource] = MemoryTable(total, reserved, total - reserved, 0, total - reserved)
                hugepages_total += total
            reserved = self.reserved.get(node.id, {}).get("memory", 0)
            allocatable = node.memory_bytes - reserved - hugepages_total
            state.memory["memory"] = MemoryTable(node.memory_bytes, reserved, allocatable, 0, allocatable)
            out[node.id] = state
        return out

    def start(self) -> None:
        """Kubelet ``Start``: fill an empty state, or check a stored one against the assignments."""
        machine, entries = self.state.machine, self.state.entries
        if not machine:
            if entries:
                raise StateError("[memorymanager] machine state can not be empty when it has memory assignments")
            self.state.machine = self.default_machine_state()
            return
        expected = self.default_machine_state()
        for uid, containers in entries.items():
            for name, blocks in containers.items():
                for block in blocks:
                    remaining = block.size
                    for nid in block.numa:
                        node = expected.get(nid)
                        if node is None:
                            raise StateError(
                                f"[memorymanager] (pod: {uid}, container: {name}) "
                                "the memory assignment uses the NUMA that does not exist"
                            )
                        node.assignments += 1
                        node.cells = list(block.numa)
                        table = node.memory.get(block.type)
                        if table is None:
                            raise StateError(
                                f"[memorymanager] (pod: {uid}, container: {name}) "
                                "the memory assignment uses memory resource that does not exist"
                            )
                        step = min(max(table.free, 0), remaining)
                        table.reserved += step
                        table.free -= step
                        remaining -= step
        if not machine_states_equal(machine, expected):
            raise StateError("[memorymanager] the expected machine state is different from the real one")

    # -- views and snapshots ------------------------------------------------------------------------
    def allocatable(self) -> dict[int, dict[str, int]]:
        return {n: {r: t.allocatable for r, t in s.memory.items()} for n, s in sorted(self.state.machine.items())}

    def free(self) -> dict[int, dict[str, int]]:
        return {n: {r: t.free for r, t in s.memory.items()} for n, s in sorted(self.state.machine.items())}

    def to_dict(self) -> dict[str, Any]:
        """Exact snapshot: the checkpoint state plus the (unpersisted) init-container reuse table."""
        doc = self.state.to_dict()
        doc["policyName"] = self.name
        doc["initContainersReusableMemory"] = {
            uid: {str(bits): dict(per) for bits, per in masks.items()} for uid, masks in self._reusable.items()
        }
        return doc

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Replace state and reuse table from :meth:`to_dict` output (or a checkpoint's fields)."""
        self.state = MemoryState.from_dict(doc)
        self._reusable = {
            str(uid): {int(bits): {str(r): int(v) for r, v in per.items()} for bits, per in masks.items()}
            for uid, masks in (doc.get("initContainersReusableMemory") or {}).items()
        }

    @classmethod
    def from_dict(
        cls, doc: Mapping[str, Any], machine: Sequence[NUMAMemory] | None, reserved: Mapping[int, Mapping[str, int]]
    ) -> MemoryPolicy:
        """A policy for ``machine``/``reserved`` holding the snapshot ``doc`` (see :meth:`to_dict`)."""
        policy = cls(machine, reserved)
        policy.restore(doc)
        return policy

    def to_checkpoint(self) -> dict[str, Any]:
        return self.state.to_checkpoint(self.name)

    # -- internals ----------------------------------------------------------------------------------
    def _default_hint(self, pod_uid: str, requested: Requests) -> TopologyHint:
        hints = self.calculate_hints(pod_uid, requested)
        if not hints:
            raise MemoryManagerError(
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
            )
        return _best_hint(hints.get("memory") or next(iter(hints.values())))

    def _satisfies(self, mask: NUMAMask, requested: Requests) -> bool:
        machine = self.state.machine
        for resource, size in requested.items():
            total = 0
            for nid in mask.ids():
                table = machine[nid].memory.get(resource)
                total += table.free if table else 0
            if total < size:
                return False
        return True

    def _extend_hint(self, pod_uid: str, requested: Requests, mask: NUMAMask) -> TopologyHint:
        hints = self.calculate_hints(pod_uid, requested)
        candidates = [h for h in hints.get("memory", []) if h.numa is not None and mask.is_subset_of(h.numa)]
        if not candidates:
            raise MemoryManagerError("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
        return _best_hint(candidates)

    def _update_reusable(self, pod: Pod, container: Container, blocks: Sequence[Block]) -> None:
        for uid in [u for u in self._reusable if u != pod.uid]:
            del self._reusable[uid]
        regular_init = any(c.name == container.name and not c.sidecar for c in pod.init_containers)
        if regular_init:
            per_mask = self._reusable.setdefault(pod.uid, {})
            for b in blocks:
                per = per_mask.setdefault(NUMAMask.from_ids(b.numa).bits, {})
                per[b.type] = max(per.get(b.type, 0), b.size)
            return
        for b in blocks:
            left = self._reusable.get(pod.uid, {}).get(NUMAMask.from_ids(b.numa).bits)
            if left and left.get(b.type, 0):
                left[b.type] = 0 if b.size >= left[b.type] else left[b.type] - b.size

    def _shrink_init_blocks(self, pod: Pod, container: Container, blocks: Sequence[Block]) -> None:
        """Reduce earlier regular init containers' blocks by what this container reused, so that the
        blocks of a pod add up to the memory actually charged."""
        assigned = self.state.entries.get(pod.uid, {})
        for block in blocks:
            size = block.size
            for init in pod.init_containers:
                if init.name == container.name or size == 0:
                    break
                if init.sidecar or not assigned.get(init.name):
                    continue
                updated = []
                for ib in assigned[init.name]:
                    if ib.size and ib.type == block.type and set(ib.numa) == set(block.numa):
                        step = min(ib.size, size)
                        ib = Block(ib.numa, ib.type, ib.size - step)
                        size -= step
                    updated.append(ib)
                assigned[init.name] = updated


def _is_managed(pod: Pod) -> bool:
    """Guaranteed pods without pod-level resources (which the static policy skips)."""
    return pod.qos_class == "Guaranteed" and pod.pod_requests_spec is None and pod.pod_limits_spec is None


def _allocated_resources(pod: Pod, container: Container) -> Mapping[str, Quantity]:
    """The container's spec requests, as kubelet v1.36 reads them (``getRequestedResources``).

    The kubelet's allocation manager writes the admitted (allocated) resources into the pod spec it
    hands to the managers, so the memory manager reads ``container.Resources.Requests`` only. The pod
    status is never consulted: at container creation the kubelet has already posted a
    ``ContainerCreating`` status *without* ``allocatedResources``, and reading that empty map refused
    every Guaranteed pod (issue 12, defect 2).
    """
    del pod
    return container.requests


def _group_constraints(machine: Mapping[int, NUMANodeState], table: MaskTable) -> tuple[int, int, set[int]] | None:
    """The single-vs-cross NUMA rule on dense masks, as ``(grouped, used, allowed groups)``: a
    single-node mask must avoid ``grouped`` nodes (members of a multi-node group); a multi-node mask
    must avoid ``used`` nodes (with assignments) or be one of ``allowed groups`` (a group that every
    used member agrees on). ``None`` when nothing is used or grouped (every mask passes)."""
    grouped = 0
    used = 0
    allowed: dict[int, int] = {}
    for k, nid in enumerate(table.nodes):
        node = machine[nid]
        if len(node.cells) > 1:
            grouped |= 1 << k
        if node.assignments > 0:
            used |= 1 << k
            group = table.dense(node.cells) if len(node.cells) > 1 else None
            exact = group is not None and table.counts[group] == len(node.cells)
            allowed[k] = group if group is not None and exact else -1
    if not grouped and not used:
        return None
    n = len(table.nodes)
    ok_groups = {
        g for g in allowed.values() if g > 0 and all(allowed.get(k) == g for k in range(n) if (g & used) >> k & 1)
    }
    return grouped, used, ok_groups


def _regenerate_hints(blocks: Sequence[Block], requested: Requests) -> dict[str, list[TopologyHint]] | None:
    if len(blocks) != len(requested):
        return None
    hints: dict[str, list[TopologyHint]] = {r: [] for r in requested}
    for b in blocks:
        if b.type not in requested or b.size != requested[b.type]:
            return None
        hints[b.type].append(hint_of(NUMAMask.from_ids(b.numa).bits, True))
    return hints


def _best_hint(hints: Sequence[TopologyHint]) -> TopologyHint:
    """Preferred first, then narrowest (first of equals wins)."""
    best = hints[0]
    for h in hints[1:]:
        assert h.numa is not None and best.numa is not None
        if (h.preferred and not best.preferred) or (
            h.preferred == best.preferred and h.numa.is_narrower_than(best.numa)
        ):
            best = h
    return best


def _validate_reserved(
    machine: Sequence[NUMAMemory], reserved: Mapping[int, Mapping[str, int]], node_allocatable: Mapping[str, int]
) -> None:
    ids = {n.id for n in machine}
    totals: dict[str, int] = {}
    for numa, limits in reserved.items():
        if numa not in ids:
            raise PolicyConfigError(
                f"the reserved memory configuration references a NUMA node {numa} that does not exist on this machine"
            )
        for resource, amount in limits.items():
            totals[resource] = totals.get(resource, 0) + int(amount)
    kinds = set(totals) | {r for r in node_allocatable if _is_memory_resource(r)}
    for resource in sorted(kinds):
        want, got = int(node_allocatable.get(resource, 0)), totals.get(resource, 0)
        if want != got:
            raise PolicyConfigError(
                f'the total amount "{format_quantity(got)}" of type "{resource}" is not equal to the value '
                f'"{format_quantity(want)}" determined by Node Allocatable feature'
            )

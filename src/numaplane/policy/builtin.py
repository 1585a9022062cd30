"""The built-in resource plugins: the kubelet's CPU, Memory and Device managers behind :class:`ResourcePlugin`.

Each plugin wraps the kubelet-exact policy (``cpu.py``, ``memory.py``, ``devices.py``) and owns its
state. With no per-pod preference they call the policies exactly as the kubelet's managers do, so
the resource manager with these plugins allocates exactly as the kubelet.

Per-pod preferences (``preferences.py``) are honoured by the CPU plugin: ``cpu-strategy`` and
``full-pcpus`` select a variant of the static policy with the matching options (sharing the one
CPU state), ``isolated-cpus`` restricts or orders the pool the container's CPUs come from. The memory
plugin honours ``memory-pinning``: ``false`` leaves the pod's memory unpinned (no hint, no blocks),
``true`` (the default for Guaranteed pods on a node with the static memory policy) rejects the pod
with ``InvalidPreference`` where it cannot be honoured (memory policy ``None``, or a pod that is not
Guaranteed, whose memory the Memory Manager never pins).

Over 400 lines on purpose: the three plugins of one protocol, side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.cpu import ReservedCPUs, StaticPolicy
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.devices import DevicePolicy
from numaplane.policy.errors import PolicyConfigError, UnexpectedAdmissionError
from numaplane.policy.hints import NUMAMask, TopologyHint
from numaplane.policy.memory import MemoryPolicy
from numaplane.policy.memory_state import Block, MemoryState, charge, machine_memory_from_topology
from numaplane.policy.plugin import DeviceInfo, Hints, Inventory, MemoryBlock, PluginAllocation
from numaplane.policy.preferences import PREFIX, InvalidPreferenceError, PodPreferences, allocation_request
from numaplane.resources.pod import Container, Pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology

__all__ = ["CPUPlugin", "DevicesPlugin", "MemoryPlugin", "build_plugins"]

_STRATEGY_OPTIONS = {
    "packed": {},
    "spread-cores": {"distribute-cpus-across-cores": "true"},
    "distribute-numa": {"distribute-cpus-across-numa": "true"},
}
_STRATEGY_CONFLICTS = {
    "packed": ("distribute-cpus-across-cores", "distribute-cpus-across-numa"),
    "spread-cores": (
        "full-pcpus-only",
        "distribute-cpus-across-numa",
        "prefer-align-cpus-by-uncorecache",
    ),
    "distribute-numa": ("distribute-cpus-across-cores", "prefer-align-cpus-by-uncorecache"),
}


# StaticPolicy keeps no per-node state (the CPUState is passed to every call; its own attributes are
# configuration and memos of pure functions), so plugins built from the same topology object and
# the same configuration share one instance: its hint tables are built once and stay warm. The
# entry holds the topology, so its id cannot be reused while cached.
_SHARED_POLICIES_LIMIT = 64
_SHARED_POLICIES: dict[tuple[object, ...], tuple[Topology, StaticPolicy]] = {}


def _static_policy(
    topology: Topology, reserved: ReservedCPUs, options: dict[str, str], topology_policy: str
) -> StaticPolicy:
    cpus = reserved.cpus.mask if reserved.cpus is not None else None
    key = (id(topology), reserved.count, cpus, tuple(sorted(options.items())), topology_policy)
    shared = _SHARED_POLICIES.get(key)
    if shared is not None and shared[0] is topology:
        return shared[1]
    policy = StaticPolicy(topology, reserved, options, topology_manager_policy=topology_policy)
    if len(_SHARED_POLICIES) >= _SHARED_POLICIES_LIMIT:
        _SHARED_POLICIES.clear()
    _SHARED_POLICIES[key] = (topology, policy)
    return policy


def _truthy(value: str) -> bool:
    return value.lower() in ("1", "t", "true")


class CPUPlugin:
    """The CPU manager: static policy (or ``none``), one :class:`CPUState`."""

    name = "cpu"
    resources = frozenset({"cpu"})

    def __init__(self, topology: Topology, config: NodeResourceConfig) -> None:
        self.topology = topology
        self._apply(config, state=None)

    # -- configuration ------------------------------------------------------------------------------
    def _build(self, config: NodeResourceConfig) -> StaticPolicy | None:
        if config.cpu_policy == "none":
            return None
        if config.reserved_cpus is not None:
            reserved = ReservedCPUs(count=config.reserved_cpus.size(), cpus=config.reserved_cpus)
        else:
            reserved = ReservedCPUs(count=config.reserved_cpu_count or 0)
        return _static_policy(self.topology, reserved, dict(config.cpu_options), config.topology_policy)

    def _apply(self, config: NodeResourceConfig, state: CPUState | None) -> None:
        policy = self._build(config)
        self.config = config
        self.policy = policy
        self._variants: dict[tuple[str | None, bool | None], StaticPolicy] = {}
        if policy is None:
            self.state = state if state is not None else CPUState(default=self.topology.all_cpus, policy_name="none")
            return
        if state is None:
            self.state = policy.new_state()
            return
        # keep every assignment; rebuild the shared pool around them for the new reserved set
        assigned = state.assigned().mask
        default = self.topology.all_cpus.mask & ~assigned
        if policy.options.strict_cpu_reservation:
            default &= ~policy.reserved.mask
        state.default = CPUSet.from_mask(default)
        state.policy_name = "static"
        self.state = state

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        try:
            policy = self._build(config)
        except (PolicyConfigError, ValueError) as exc:
            return [f"cpu: {exc}"]
        if policy is None:
            return []
        held = policy.reserved.mask & self.state.assigned().mask
        if held:
            return [f"cpu: reserved CPUs {CPUSet.from_mask(held).format()} are held exclusively by running containers"]
        return []

    def reconfigure(self, config: NodeResourceConfig) -> None:
        self._apply(config, state=self.state)

    # -- preferences --------------------------------------------------------------------------------
    def _policy_for(self, prefs: PodPreferences) -> StaticPolicy | None:
        base = self.policy
        if base is None or (prefs.cpu_strategy is None and prefs.full_pcpus is None):
            return base
        key = (prefs.cpu_strategy, prefs.full_pcpus)
        variant = self._variants.get(key)
        if variant is None:
            options = dict(self.config.cpu_options)
            if prefs.cpu_strategy is not None:
                for name in _STRATEGY_CONFLICTS[prefs.cpu_strategy]:
                    options.pop(name, None)
                options.update(_STRATEGY_OPTIONS[prefs.cpu_strategy])
            if prefs.full_pcpus is not None:
                options["full-pcpus-only"] = "true" if prefs.full_pcpus else "false"
                if prefs.full_pcpus:
                    options.pop("distribute-cpus-across-cores", None)
            reserved = ReservedCPUs(count=base.reserved.size(), cpus=base.reserved)
            variant = StaticPolicy(
                self.topology, reserved, options, topology_manager_policy=self.config.topology_policy
            )
            self._variants[key] = variant
        return variant

    @staticmethod
    def _prefs(pod: Pod) -> PodPreferences:
        return allocation_request(pod).preferences

    def _pool_mask(self, prefs: PodPreferences) -> int | None:
        """A mask restricting where this pod's exclusive CPUs may come from (None: anywhere)."""
        isolated = self.topology.isolated_cpus.mask
        if prefs.isolated_cpus == "require":
            return isolated
        if prefs.isolated_cpus == "avoid":
            return ~isolated
        return None

    def _view(self, mask: int) -> CPUState:
        view = self.state.copy()
        view.default = CPUSet.from_mask(view.default.mask & mask)
        return view

    # -- protocol -----------------------------------------------------------------------------------
    def hints(self, pod: Pod, container: Container) -> Hints | None:
        prefs = self._prefs(pod)
        policy = self._policy_for(prefs)
        if policy is None:
            return None
        pool = self._pool_mask(prefs)
        return policy.hints(self.state if pool is None else self._view(pool), pod, container)

    def pod_hints(self, pod: Pod) -> Hints | None:
        prefs = self._prefs(pod)
        policy = self._policy_for(prefs)
        if policy is None:
            return None
        pool = self._pool_mask(prefs)
        return policy.pod_hints(self.state if pool is None else self._view(pool), pod)

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        prefs = self._prefs(pod)
        policy = self._policy_for(prefs)
        if policy is None:
            return PluginAllocation(self.name)
        pool = self._pool_mask(prefs)
        if prefs.isolated_cpus == "prefer" and self.topology.isolated_cpus:
            pool = self._prefer_isolated(policy, pod, container, hint)
        if pool is None:
            cpus = policy.allocate(self.state, pod, container, hint)
        else:
            cpus = self._allocate_in(policy, pool, pod, container, hint)
        return self._record(cpus)

    def _prefer_isolated(self, policy: StaticPolicy, pod: Pod, container: Container, hint: TopologyHint) -> int | None:
        """Use the isolated pool when it alone can satisfy the container within the hint."""
        count = policy.guaranteed_cpus(pod, container)
        free_isolated = policy.available(self.state).mask & self.topology.isolated_cpus.mask
        if hint.numa is not None:
            numa_cpus = 0
            for nid in hint.numa.ids():
                numa_cpus |= self.topology.cpus_by_numa.get(nid, CPUSet()).mask
            free_isolated &= numa_cpus
        return self.topology.isolated_cpus.mask if count and free_isolated.bit_count() >= count else None

    def _allocate_in(
        self, policy: StaticPolicy, pool: int, pod: Pod, container: Container, hint: TopologyHint
    ) -> CPUSet | None:
        view = self._view(pool)
        count = policy.guaranteed_cpus(pod, container)
        if count and policy.available(view).size() < count and self.state.get(pod.uid, container.name) is None:
            raise UnexpectedAdmissionError(
                f"not enough CPUs in the pool chosen by the pod's isolated-cpus preference: "
                f"available = {policy.available(view).size()}, requested = {count}"
            )
        cpus = policy.allocate(view, pod, container, hint)
        # carry the allocation (and reuse bookkeeping) back to the real state
        if cpus is not None:
            self.state.set(pod.uid, container.name, cpus)
            self.state.default = CPUSet.from_mask(self.state.default.mask & ~cpus.mask)
        self.state.reuse_pod, self.state.reuse = view.reuse_pod, view.reuse
        return cpus

    def _record(self, cpus: CPUSet | None) -> PluginAllocation:
        if cpus is None:
            return PluginAllocation(self.name)
        numa = 0
        info = self.topology.cpu_info
        for cpu in cpus:
            numa |= 1 << info[cpu].numa
        return PluginAllocation(self.name, cpus=cpus, numa=NUMAMask(numa))

    def release(self, pod_uid: str, container_name: str) -> None:
        if self.policy is None:
            self.state.delete(pod_uid, container_name)
        else:
            self.policy.remove_container(self.state, pod_uid, container_name)
        if pod_uid not in self.state.assignments and self.state.reuse_pod == pod_uid:
            # the pod holds nothing any more: forget its init-container reuse bookkeeping too
            self.state.reuse_pod, self.state.reuse = None, CPUSet()

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        return {
            (uid, name): self._record(cpus)
            for uid, containers in self.state.assignments.items()
            for name, cpus in containers.items()
        }

    def inventory(self) -> Inventory:
        """The CPUs exclusive allocations come from (every CPU without the static policy)."""
        return Inventory(cpus=self.policy.allocatable if self.policy is not None else self.topology.all_cpus)

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        if self.policy is None:
            return {n: {"cpu": s.size()} for n, s in self.topology.cpus_by_numa.items()}
        return {n: {"cpu": c} for n, c in self.policy.allocatable_by_numa().items()}

    def available(self) -> Mapping[int, Mapping[str, int]]:
        if self.policy is None:
            return self.allocatable()
        return {n: {"cpu": c} for n, c in self.policy.available_by_numa(self.state).items()}

    @property
    def shared_pool(self) -> CPUSet:
        return self.state.default

    def snapshot(self) -> dict[str, Any]:
        return self.state.snapshot()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.state = CPUState.restore(snapshot)


class MemoryPlugin:
    """The Memory Manager: static policy (or ``None``: no NUMA pinning of memory)."""

    name = "memory"

    def __init__(self, topology: Topology, config: NodeResourceConfig) -> None:
        self.topology = topology
        self.config = config
        self.policy = self._build(config)
        if self.policy is not None:
            self.policy.start()

    @property
    def resources(self) -> frozenset[str]:
        names = {"memory"}
        for node in self.topology.numa_nodes:
            names.update(h.resource_name for h in node.hugepages)
        return frozenset(names)

    def _build(self, config: NodeResourceConfig) -> MemoryPolicy | None:
        if config.memory_policy != "Static":
            return None
        return MemoryPolicy.from_topology(self.topology, config.reserved_memory)

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        try:
            policy = self._build(config)
        except (PolicyConfigError, ValueError) as exc:
            return [f"memory: {exc}"]
        if policy is None or self.policy is None:
            return []
        machine = policy.default_machine_state()
        problems = []
        for uid, containers in self.policy.state.entries.items():
            for name, blocks in containers.items():
                for block in blocks:
                    for nid in block.numa:
                        node_state = machine.get(nid)
                        if node_state is None or block.type not in node_state.memory:
                            problems.append(f"memory: pod {uid} container {name} uses {block.type} on NUMA {nid}, gone")
                    charge(machine, block.numa, block.type, block.size)
        for nid, state in machine.items():
            for resource, mem in state.memory.items():
                if mem.free < 0 or mem.reserved > mem.allocatable:
                    problems.append(
                        f"memory: new reservation leaves NUMA node {nid} {resource} over-committed by existing pods"
                    )
        return problems

    def reconfigure(self, config: NodeResourceConfig) -> None:
        old = self.policy
        self.config = config
        self.policy = self._build(config)
        if self.policy is None:
            return
        state = MemoryState(machine=self.policy.default_machine_state(), entries={})
        if old is not None:
            for uid, containers in old.state.entries.items():
                for name, blocks in containers.items():
                    state.entries.setdefault(uid, {})[name] = list(blocks)
                    for block in blocks:
                        charge(state.machine, block.numa, block.type, block.size)
        self.policy.state = state

    def _pinned(self, pod: Pod, *, strict: bool = False) -> bool:
        """Whether this pod's memory is pinned: the node's policy, unless ``memory-pinning`` says otherwise.

        A ``true`` that cannot be honoured gives no hint and, at allocation (``strict``: the topology
        manager turns allocation errors into the pod's rejection), raises :class:`InvalidPreferenceError`."""
        prefs = allocation_request(pod).preferences
        if prefs.memory_pinning is None:
            return self.policy is not None
        if not prefs.memory_pinning:
            return False
        key = f"{PREFIX}memory-pinning='true'"
        if not strict:
            return self.policy is not None and pod.qos_class == "Guaranteed"
        if self.policy is None:
            raise InvalidPreferenceError(
                f"annotation {key}: this node's memory manager policy is None, which pins no memory "
                "(it needs memoryManager.policy Static)"
            )
        if pod.qos_class != "Guaranteed":
            raise InvalidPreferenceError(
                f"annotation {key}: only a Guaranteed pod's memory can be pinned; this pod is {pod.qos_class}"
            )
        return True

    def hints(self, pod: Pod, container: Container) -> Hints | None:
        return self.policy.hints(pod, container) if self._pinned(pod) and self.policy is not None else None

    def pod_hints(self, pod: Pod) -> Hints | None:
        return self.policy.pod_hints(pod) if self._pinned(pod) and self.policy is not None else None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        if not self._pinned(pod, strict=True) or self.policy is None:
            return PluginAllocation(self.name)
        blocks = self.policy.allocate(pod, container, hint)
        return self._record(blocks)

    def _record(self, blocks: list[Block]) -> PluginAllocation:
        if not blocks:
            return PluginAllocation(self.name)
        numa = 0
        for b in blocks:
            for n in b.numa:
                numa |= 1 << n
        return PluginAllocation(
            self.name,
            memory=tuple(MemoryBlock(b.numa, b.type, b.size) for b in blocks),
            numa=NUMAMask(numa),
        )

    def release(self, pod_uid: str, container_name: str) -> None:
        if self.policy is not None:
            self.policy.remove(pod_uid, container_name)
            if pod_uid not in self.policy.state.entries:
                # the pod holds no memory now: its init containers' reusable memory goes too, else a pod
                # refused and admitted again (the agent admits at RunPodSandbox and again at
                # CreateContainer) charges its init container nothing and its rollback releases the
                # full block: memory freed that nobody held. The kubelet never admits a refused pod
                # again; its reusable memory lasts only until another pod's allocation, as here.
                self.policy.remove_pod(pod_uid)

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        if self.policy is None:
            return {}
        return {
            (uid, name): self._record(blocks)
            for uid, containers in self.policy.state.entries.items()
            for name, blocks in containers.items()
        }

    def inventory(self) -> Inventory:
        """Memory pinned per NUMA node: only with the static policy (the kubelet lists memory only then)."""
        return Inventory(memory={} if self.policy is None else self.policy.allocatable())

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        if self.policy is None:
            return {m.id: {"memory": m.memory_bytes} for m in machine_memory_from_topology(self.topology)}
        return self.policy.allocatable()

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return self.allocatable() if self.policy is None else self.policy.free()

    def snapshot(self) -> dict[str, Any]:
        return {} if self.policy is None else self.policy.to_dict()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        if self.policy is not None and snapshot:
            self.policy.restore(snapshot)


class DevicesPlugin:
    """The Device Manager's topology-aware allocation for devices in the config's inventory."""

    name = "devices"

    def __init__(self, topology: Topology, config: NodeResourceConfig) -> None:
        self.topology = topology
        self.policy = DevicePolicy(dict(config.devices), topology.memory_numa_ids)

    @property
    def resources(self) -> frozenset[str]:
        return self.policy.resources

    def check_config(self, config: NodeResourceConfig) -> list[str]:
        problems = []
        for resource in self.policy.resources:
            wanted = {d.id for d in config.devices.get(resource, ())}
            missing = self.policy.allocated(resource) - wanted
            if missing:
                problems.append(f"devices: {resource} devices {sorted(missing)} are allocated but no longer listed")
        return problems

    def reconfigure(self, config: NodeResourceConfig) -> None:
        for resource, devices in config.devices.items():
            self.policy.update_devices(resource, devices)

    def hints(self, pod: Pod, container: Container) -> Hints | None:
        raw = self.policy.hints(pod, container)
        return {k: v for k, v in raw.items() if v is not None} or None if raw else None

    def pod_hints(self, pod: Pod) -> Hints | None:
        raw = self.policy.pod_hints(pod)
        return {k: v for k, v in raw.items() if v is not None} or None if raw else None

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> PluginAllocation:
        devices = self.policy.allocate(pod, container, hint)
        return self._record(devices)

    def _record(self, devices: Mapping[str, tuple[str, ...]]) -> PluginAllocation:
        if not devices:
            return PluginAllocation(self.name)
        numa = 0
        for resource, ids in devices.items():
            by_id = {d.id: d for d in self.policy.devices(resource)}
            for i in ids:
                dev = by_id.get(i)
                if dev is not None and dev.numa:
                    for n in dev.numa:
                        numa |= 1 << n
        return PluginAllocation(self.name, devices=dict(devices), numa=NUMAMask(numa) if numa else None)

    def release(self, pod_uid: str, container_name: str) -> None:
        self.policy.remove_container(pod_uid, container_name)
        if not self.policy.holds(pod_uid):
            self.policy.remove_pod(pod_uid)  # also drops the pod's reuse bookkeeping

    def allocations(self) -> Mapping[tuple[str, str], PluginAllocation]:
        out = {}
        for uid, containers in self.policy.to_dict()["podDevices"].items():
            for name in containers:
                out[(uid, name)] = self._record(self.policy.container_devices(uid, name))
        return out

    def inventory(self) -> Inventory:
        """The healthy devices, with their NUMA nodes."""
        return Inventory(
            devices=tuple(
                DeviceInfo(resource, dev.id, tuple(dev.numa or ()))
                for resource in sorted(self.policy.resources)
                for dev in self.policy.devices(resource)
                if dev.healthy
            )
        )

    def allocatable(self) -> Mapping[int, Mapping[str, int]]:
        return self._count(self.policy.healthy)

    def available(self) -> Mapping[int, Mapping[str, int]]:
        return self._count(self.policy.available)

    def _count(self, ids_of: Any) -> Mapping[int, Mapping[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for resource in sorted(self.policy.resources):
            wanted = ids_of(resource)
            for dev in self.policy.devices(resource):
                if dev.id in wanted and dev.numa:
                    node = out.setdefault(dev.numa[0], {})
                    node[resource] = node.get(resource, 0) + 1
        return out

    def snapshot(self) -> dict[str, Any]:
        return self.policy.to_dict()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.policy.restore(snapshot)


def build_plugins(topology: Topology, config: NodeResourceConfig) -> list[CPUPlugin | MemoryPlugin | DevicesPlugin]:
    """The kubelet's provider order: device manager, CPU manager, memory manager."""
    return [DevicesPlugin(topology, config), CPUPlugin(topology, config), MemoryPlugin(topology, config)]

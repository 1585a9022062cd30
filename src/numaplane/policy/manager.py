"""The resource manager: plugins + topology manager, admission, removal, snapshots, live reconfiguration.

:class:`ResourceManager` is what the agent, the simulator and tests run. Admission follows the
kubelet's topology manager sequence exactly (``topology_manager.TopologyManager.admit``): per
container (container scope) or once per pod (pod scope), hints from every plugin in registration
order (devices, cpu, memory, then vendor plugins), merge, admit or reject with
``TopologyAffinityError``, then ``allocate`` on every plugin.

Beyond the kubelet:

* a failed admission is rolled back completely (every container of the pod is released on every
  plugin), so a rejected pod holds nothing;
* per-pod preferences (``preferences.py``) may select a stricter topology policy or another scope
  for one pod; an invalid preference rejects the pod with reason ``InvalidPreference``;
* :meth:`reconfigure` changes policies, options, scope or reserved resources for *new* admissions
  while existing allocations stay untouched; a config that is invalid or conflicts with existing
  allocations is rejected as a whole (:class:`ReconfigureRejected` lists every problem) and the old
  one stays;
* :meth:`snapshot` / :meth:`restore` reproduce the state exactly (JSON-ready);
* a vendor plugin may manage a resource whose built-in plugin the config switches off
  (:meth:`active_resources`): ``cpu`` with ``cpuManager.policy: none``, ``memory`` and the hugepages
  with ``memoryManager.policy: None``. An "off" built-in still answers the protocol (no hints, no
  allocations) and still reports the machine's amounts. The device plugin is never off: it manages
  only the devices the config lists. Containers' exclusive CPUs and the shared pool are taken from
  the plugins' allocations, whichever plugin gave them (:meth:`exclusive_cpus`, :meth:`shared_pool`).

Over 400 lines on purpose: admission, release, views, reconfiguration and snapshots share the
manager's bookkeeping (plugins, admissions, topology managers) and its invariants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from numaplane.policy.asks import AdmissionRun, Provider, answer_in_process, topology_steps, wants
from numaplane.policy.builtin import CPUPlugin, DevicesPlugin, MemoryPlugin, build_plugins
from numaplane.policy.config import NodeResourceConfig, invalid_config, machine_problems, parse_config
from numaplane.policy.errors import PolicyConfigError, ReconfigureRejected
from numaplane.policy.hints import TopologyHint
from numaplane.policy.plugin import PluginAllocation, ResourcePlugin
from numaplane.policy.preferences import InvalidPreferenceError, allocation_request
from numaplane.policy.topology_manager import TopologyAdmission, TopologyManager
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology

__all__ = ["Admission", "ContainerAdmission", "ResourceManager"]

SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class ContainerAdmission:
    """One admitted container: its merged hint and what each plugin gave it."""

    name: str
    hint: TopologyHint | None
    allocations: tuple[PluginAllocation, ...] = ()

    @property
    def exclusive_cpus(self) -> CPUSet | None:
        for a in self.allocations:
            if a.cpus is not None:
                return a.cpus
        return None

    @property
    def memory_numa(self) -> tuple[int, ...]:
        """NUMA nodes the container's pinned memory lives on (empty: not pinned)."""
        nodes: set[int] = set()
        for a in self.allocations:
            for block in a.memory:
                nodes.update(block.numa)
        return tuple(sorted(nodes))

    @property
    def devices(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for a in self.allocations:
            out.update(a.devices)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "hint": None if self.hint is None else self.hint.to_dict(),
            "allocations": [a.to_dict() for a in self.allocations if a.cpus or a.memory or a.devices or a.extra],
        }


@dataclass(frozen=True)
class Admission:
    """The outcome of :meth:`ResourceManager.admit`.

    ``reason`` is the kubelet's admission reason (``TopologyAffinityError``, ``SMTAlignmentError``,
    ``UnexpectedAdmissionError``, ...) and ``message`` its text; both empty when admitted.
    """

    pod_uid: str
    admitted: bool
    containers: tuple[ContainerAdmission, ...] = ()
    reason: str = ""
    message: str = ""
    container: str | None = None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"pod": self.pod_uid, "admitted": self.admitted}
        if self.admitted:
            doc["containers"] = [c.to_dict() for c in self.containers]
        else:
            doc.update(reason=self.reason, message=self.message, container=self.container)
        return doc


def _parsed_for(config: NodeResourceConfig | Mapping[str, Any], topology: Topology) -> NodeResourceConfig:
    """``config`` parsed and checked against ``topology`` in one pass (:class:`PolicyConfigError` lists
    every problem, the machine's included)."""
    if not isinstance(config, NodeResourceConfig):
        return parse_config(config, topology)
    problems = machine_problems(config, topology)
    if problems:
        raise invalid_config(problems)
    return config


class ResourceManager:
    """Plugins, topology manager and admitted pods of one node. Not thread-safe: callers serialise."""

    def __init__(
        self,
        topology: Topology,
        config: NodeResourceConfig | Mapping[str, Any] | None = None,
        extra_plugins: Sequence[ResourcePlugin] = (),
    ) -> None:
        self.topology = topology
        self.config = _parsed_for(config or {}, topology)
        builtin = build_plugins(topology, self.config)
        self._builtin: dict[str, CPUPlugin | MemoryPlugin | DevicesPlugin] = {p.name: p for p in builtin}
        self.plugins: list[ResourcePlugin] = [*builtin, *extra_plugins]
        self._managers: dict[tuple[str, str], TopologyManager] = {}
        self._manager_for(self.config.topology_policy, self.config.topology_scope)  # validate now
        self.pods: dict[str, Pod] = {}
        self.admissions: dict[str, Admission] = {}

    # -- plugins ------------------------------------------------------------------------------------
    @property
    def cpu(self) -> CPUPlugin:
        plugin = self._builtin["cpu"]
        assert isinstance(plugin, CPUPlugin)
        return plugin

    @property
    def memory(self) -> MemoryPlugin:
        plugin = self._builtin["memory"]
        assert isinstance(plugin, MemoryPlugin)
        return plugin

    @property
    def devices(self) -> DevicesPlugin:
        plugin = self._builtin["devices"]
        assert isinstance(plugin, DevicesPlugin)
        return plugin

    def _is_builtin(self, plugin: ResourcePlugin) -> bool:
        return self._builtin.get(plugin.name) is plugin

    def active_resources(self, plugin: ResourcePlugin, config: NodeResourceConfig | None = None) -> frozenset[str]:
        """The resources ``plugin`` manages under ``config`` (default: the current one).

        A built-in plugin switched off by the config manages none: the CPU plugin with
        ``cpuManager.policy: none``, the memory plugin with ``memoryManager.policy: None``. Any other
        plugin (devices, vendor) manages all its declared resources."""
        config = config or self.config
        if plugin is self._builtin.get("cpu") and config.cpu_policy == "none":
            return frozenset()
        if plugin is self._builtin.get("memory") and config.memory_policy != "Static":
            return frozenset()
        return frozenset(plugin.resources)

    def resource_conflicts(self, name: str, resources: frozenset[str]) -> list[str]:
        """Why a plugin ``name`` may not manage ``resources`` now: one line per other plugin managing
        one of them (empty: none does; a plugin of the same name is the one itself)."""
        problems = []
        for other in self.plugins:
            overlap = resources & self.active_resources(other)
            if other.name != name and overlap:
                problems.append(f"resources {sorted(overlap)} are managed by plugin {other.name!r}")
        return problems

    def add_plugin(self, plugin: ResourcePlugin) -> None:
        """Add a vendor plugin; refused if one of that name is there or its resources are managed
        by another plugin (:meth:`resource_conflicts`)."""
        if any(p.name == plugin.name for p in self.plugins):
            raise PolicyConfigError(f"a plugin named {plugin.name!r} is already registered")
        problems = self.resource_conflicts(plugin.name, frozenset(plugin.resources))
        if problems:
            raise PolicyConfigError("; ".join(problems))
        self.plugins.append(plugin)

    def remove_plugin(self, name: str) -> None:
        if name in self._builtin:
            raise PolicyConfigError(f"the built-in plugin {name!r} cannot be removed")
        self.plugins = [p for p in self.plugins if p.name != name]

    def _manager_for(self, policy: str, scope: str) -> TopologyManager:
        key = (policy, scope)
        tm = self._managers.get(key)
        if tm is None:
            tm = TopologyManager.from_topology(self.topology, policy, scope, dict(self.config.topology_options))
            self._managers[key] = tm
        return tm

    # -- admission ----------------------------------------------------------------------------------
    def admit(self, pod: Pod) -> Admission:
        """Admit ``pod`` (idempotent for an already admitted pod): allocations or a typed rejection.

        The synchronous driver of :meth:`begin`: every ask is answered by calling the plugin object
        in process (``asks.answer_in_process``) — for in-process plugins only. An exception from a
        plugin propagates after everything the pod held was released."""
        run = self.begin(pod)
        plugins = {p.name: p for p in self.plugins}
        while not run.done:
            run.answer([answer_in_process(plugins, ask) for ask in run.asks])
        assert run.result is not None
        return run.result

    def begin(self, pod: Pod) -> AdmissionRun[Admission]:
        """Start admitting ``pod``: a run whose asks a driver answers (see ``asks.py``); its result is the
        :class:`Admission`. An already admitted pod's run is finished at once with its admission.

        Callers must not begin a second run for a pod whose run is unfinished, nor remove it meanwhile
        (the run's allocations are the pod's only once it finished)."""
        done = self.admissions.get(pod.uid)
        if done is not None:
            return AdmissionRun.decided(pod, done)
        policy, scope = self.config.topology_policy, self.config.topology_scope
        request = allocation_request(pod)  # the one reading of the pod the scheduler's judgement shares
        invalid = request.conflict(policy)
        if invalid is not None:
            error = InvalidPreferenceError(invalid)
            return AdmissionRun.decided(pod, Admission(pod.uid, False, reason=error.reason, message=error.message))
        policy, scope = request.policy_for(policy), request.scope_for(scope)
        try:
            tm = self._manager_for(policy, scope)
        except PolicyConfigError as exc:
            return AdmissionRun.decided(pod, Admission(pod.uid, False, reason="InvalidPreference", message=str(exc)))
        providers = [Provider(p, not self._is_builtin(p), {}) for p in self.plugins]

        def finish(result: TopologyAdmission | None) -> Admission | None:
            if result is None or not result.admitted:
                self._release(pod, tm)
            if result is None:
                return None
            if not result.admitted:
                return Admission(
                    pod.uid, False, reason=result.reason, message=result.message, container=result.container
                )
            containers = tuple(
                ContainerAdmission(
                    name=c.name,
                    hint=result.hints.get(c.name),
                    allocations=tuple(p.given[c.name] for p in providers if c.name in p.given),
                )
                for c in pod.all_containers()
            )
            admission = Admission(pod.uid, True, containers)
            self.pods[pod.uid] = pod
            self.admissions[pod.uid] = admission
            return admission

        return AdmissionRun(pod, topology_steps(tm, pod, providers), finish)

    def _release(self, pod: Pod, tm: TopologyManager | None = None) -> None:
        for container in reversed(pod.all_containers()):
            for plugin in reversed(self.plugins):
                if self._is_builtin(plugin) or wants(plugin, container):
                    plugin.release(pod.uid, container.name)
        for manager in self._managers.values() if tm is None else (tm,):
            manager.remove_pod(pod.uid)

    def remove(self, pod_uid: str) -> bool:
        """Release everything the pod holds; ``False`` if the pod was not admitted here."""
        pod = self.pods.pop(pod_uid, None)
        self.admissions.pop(pod_uid, None)
        if pod is None:
            return False
        self._release(pod)
        return True

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        """Release one container (e.g. a finished init container), as the kubelet's RemoveContainer.

        The pod stays admitted; its admission record no longer lists the container, so views built
        from it (NRT accounting, snapshots) match what the plugins still hold.
        """
        pod = self.pods.get(pod_uid)
        container = next((c for c in pod.all_containers() if c.name == container_name), None) if pod else None
        for plugin in reversed(self.plugins):
            if self._is_builtin(plugin) or container is None or wants(plugin, container):
                plugin.release(pod_uid, container_name)
        for manager in self._managers.values():
            manager.remove_container(pod_uid, container_name)
        admission = self.admissions.get(pod_uid)
        if admission is not None:
            kept = tuple(c for c in admission.containers if c.name != container_name)
            self.admissions[pod_uid] = replace(admission, containers=kept)

    def release_finished_init_memory(self, pod_uid: str, container_name: str) -> tuple[str, ...]:
        """``container_name`` of the pod is being created: release the memory of every regular init
        container before it in the spec (they have run to completion), as the kubelet's memory manager
        ``AddContainer`` does (``pkg/kubelet/cm/memorymanager/memory_manager.go``: it removes each
        earlier non-restartable init container from its state; an init container being created stops
        the walk). What later containers reuse was already moved to them at admission: the blocks
        released are the rest (zero-size when reused whole). CPUs stay (the CPU manager keeps an init
        container's entry until the pod goes). Returns the names released; a no-op when nothing is
        held. The admission record keeps the containers, without their memory allocation."""
        pod = self.pods.get(pod_uid)
        if pod is None or self.memory.policy is None:
            return ()
        released: list[str] = []
        for init in pod.init_containers:
            if init.name == container_name:
                break
            if init.sidecar or self.memory.policy.blocks(pod_uid, init.name) is None:
                continue
            self.memory.release(pod_uid, init.name)
            released.append(init.name)
        admission = self.admissions.get(pod_uid)
        if released and admission is not None:
            kept = tuple(
                replace(c, allocations=tuple(a for a in c.allocations if a.plugin != self.memory.name))
                if c.name in released
                else c
                for c in admission.containers
            )
            self.admissions[pod_uid] = replace(admission, containers=kept)
        return tuple(released)

    # -- views --------------------------------------------------------------------------------------
    def shared_pool(self) -> CPUSet:
        """CPUs shared (non-exclusive) containers run on: the built-in CPU plugin's pool (all CPUs less
        its exclusive ones, less the reserved ones with ``strict-cpu-reservation``, as the kubelet's;
        all CPUs when it is off) less every vendor plugin's exclusive CPUs (its ``allocations()``)."""
        pool = self.cpu.shared_pool
        taken = 0
        for plugin in self.plugins:
            if not self._is_builtin(plugin):
                for allocation in plugin.allocations().values():
                    if allocation.cpus is not None:
                        taken |= allocation.cpus.mask
        return CPUSet.from_mask(pool.mask & ~taken) if taken & pool.mask else pool

    def exclusive_cpus(self, pod_uid: str, container_name: str) -> CPUSet | None:
        """The container's exclusive CPUs from its admission's allocations, whichever plugin gave them
        (``None``: it runs in the shared pool, or is not admitted here)."""
        admission = self.admissions.get(pod_uid)
        if admission is not None:
            for container in admission.containers:
                if container.name == container_name:
                    return container.exclusive_cpus
        return None

    def held_cpus(self) -> dict[tuple[str, str], CPUSet]:
        """Every plugin's exclusive CPUs by ``(pod uid, container name)``, from the plugins' own
        ``allocations()`` answers (a remote plugin's: the driver's cache) — the view the agent's
        consistency checks compare its records and admissions with."""
        held: dict[tuple[str, str], CPUSet] = {}
        for plugin in self.plugins:
            for key, allocation in plugin.allocations().items():
                if allocation.cpus is not None:
                    held[key] = allocation.cpus
        return held

    def cpuset_for(self, pod_uid: str, container_name: str) -> CPUSet:
        """The CPUs a container may run on: its exclusive set, or the shared pool."""
        cpus = self.exclusive_cpus(pod_uid, container_name)
        return cpus if cpus is not None else self.shared_pool()

    def allocatable(self) -> dict[int, dict[str, int]]:
        """Per NUMA node: resource → allocatable amount, over every plugin."""
        return _merge_per_numa(p.allocatable() for p in self.plugins)

    def available(self) -> dict[int, dict[str, int]]:
        """Per NUMA node: resource → amount free for exclusive allocation, over every plugin."""
        return _merge_per_numa(p.available() for p in self.plugins)

    # -- reconfiguration ----------------------------------------------------------------------------
    def check_config(self, config: NodeResourceConfig | Mapping[str, Any]) -> list[str]:
        """Every problem ``config`` would cause now (empty: it can be applied)."""
        try:
            parsed = _parsed_for(config, self.topology)
        except PolicyConfigError as exc:
            return [str(exc)]
        problems: list[str] = []
        try:
            TopologyManager.from_topology(
                self.topology, parsed.topology_policy, parsed.topology_scope, dict(parsed.topology_options)
            )
        except PolicyConfigError as exc:
            problems.append(f"topology manager: {exc}")
        for plugin in self.plugins:
            problems.extend(plugin.check_config(parsed))
            if self._is_builtin(plugin):
                problems.extend(self._switched_on_conflicts(plugin, parsed))
        return problems

    def _switched_on_conflicts(self, builtin: ResourcePlugin, config: NodeResourceConfig) -> list[str]:
        """A built-in plugin ``config`` would switch on may not take resources a vendor plugin manages."""
        gained = self.active_resources(builtin, config) - self.active_resources(builtin)
        return [
            f"{builtin.name}: the config switches the built-in {builtin.name} plugin on, but plugin "
            f"{other.name!r} manages {sorted(gained & other.resources)} (unregister it first)"
            for other in self.plugins
            if not self._is_builtin(other) and gained & other.resources
        ]

    def reconfigure(self, config: NodeResourceConfig | Mapping[str, Any]) -> NodeResourceConfig:
        """Apply ``config`` to new admissions, or raise :class:`ReconfigureRejected` and change nothing."""
        problems = self.check_config(config)
        if problems:
            raise ReconfigureRejected(problems)
        parsed = config if isinstance(config, NodeResourceConfig) else parse_config(config)
        for plugin in self.plugins:
            plugin.reconfigure(parsed)
        old_managers = self._managers
        self.config = parsed
        self._managers = {}
        tm = self._manager_for(parsed.topology_policy, parsed.topology_scope)
        # keep the stored affinities of admitted pods
        for manager in old_managers.values():
            for uid, name, hint in manager.stored():
                tm.store(uid, name, hint)
        return parsed

    # -- snapshots ----------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Exact, JSON-ready state: config, plugins' states and admitted pods."""
        return {
            "version": SNAPSHOT_VERSION,
            "config": self.config.to_dict(),
            "plugins": {p.name: p.snapshot() for p in self.plugins},
            "pods": {uid: dict(pod.raw) for uid, pod in self.pods.items()},
            "admissions": {uid: a.to_dict() for uid, a in self.admissions.items()},
        }

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Restore a :meth:`snapshot` (the config inside it replaces the current one).

        All or nothing: if any part of ``doc`` cannot be restored (unsupported version, bad config,
        a pod :func:`~numaplane.resources.pod.parse_pod` refuses, a malformed plugin state or
        admission), the manager is put back exactly as it was and the error is raised."""
        previous = self.snapshot()
        try:
            self._restore(doc)
        except BaseException:
            self._restore(previous)
            raise

    def _restore(self, doc: Mapping[str, Any]) -> None:
        from numaplane.resources.pod import parse_pod

        if doc.get("version") != SNAPSHOT_VERSION:
            raise PolicyConfigError(f"unsupported snapshot version {doc.get('version')!r}")
        config = parse_config(doc.get("config") or {})
        if config != self.config:
            self.config = config
            for plugin in self.plugins:
                plugin.reconfigure(config)
            self._managers = {}
        states = doc.get("plugins") or {}
        for plugin in self.plugins:
            if plugin.name in states:
                plugin.restore(states[plugin.name])
        self.pods = {uid: parse_pod(raw) for uid, raw in (doc.get("pods") or {}).items()}
        self.admissions = {}
        for uid, adm in (doc.get("admissions") or {}).items():
            containers = tuple(
                ContainerAdmission(
                    name=c["name"],
                    hint=None if c.get("hint") is None else TopologyHint.from_dict(c["hint"]),
                    allocations=tuple(PluginAllocation.from_dict(a) for a in c.get("allocations", [])),
                )
                for c in adm.get("containers", [])
            )
            self.admissions[uid] = Admission(uid, True, containers)
        tm = self._manager_for(self.config.topology_policy, self.config.topology_scope)
        for uid, adm in self.admissions.items():
            for c in adm.containers:
                if c.hint is not None:
                    tm.store(uid, c.name, c.hint)


def _merge_per_numa(parts: Any) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for part in parts:
        for numa, resources in part.items():
            node = out.setdefault(numa, {})
            for name, amount in resources.items():
                node[name] = node.get(name, 0) + amount
    return {k: out[k] for k in sorted(out)}

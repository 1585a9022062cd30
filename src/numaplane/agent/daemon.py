"""The node agent: resource manager + NRI plugin + checkpoint + PodResources + config watch + plugins.

:class:`Agent` wires the pieces; ``numaplane agent`` (``cli/agent.py``) builds :class:`AgentOptions`
from flags and runs it. Start-up sequence (:meth:`Agent.start`):

1. topology (a topology JSON file, or sysfs) and config file (an invalid file at start is an error
   unless a checkpoint carries a config, which then stays in force and the problem is reported); the
   config is parsed once, checked against the machine in the same pass (:class:`StartInputs`), and a
   changed file later is parsed once too (:meth:`Agent._apply_config`): that value is what the manager,
   the plugins and the state take;
2. the checkpoint: restored if intact and ours; a corrupted or foreign file is logged, counted
   (``numaplane_agent_checkpoint_loads{result=…}``), moved aside, and the state starts empty — the
   runtime's Synchronize then rebuilds it (adopting every running container). Never a crash loop;
3. the file config is applied over the restored one (``reconfigure``: allocations untouched);
4. servers: PodResources socket, probes/metrics, plugin registry; the config watcher; the optional
   Pod informer; the checkpoint writer and the update sender; the notify file (``notify_file``:
   touched after every allocation change, see :mod:`numaplane.agent.notify`); the applied policy file
   (``applied_policy_file``: the configuration in force, rewritten after every applied change, which the
   exporter publishes, see :mod:`numaplane.agent.appliedpolicy`); the policy reporter
   (with API access and ``pod_name``: the revision applied or rejected, on the agent's own pod, see
   :mod:`numaplane.agent.policyreport`); with API access, Events on the pods of containers that wait
   in the shared pool for resources (:mod:`numaplane.agent.waitreport`);
5. with the Pod informer, its first list (waited for at most ``pod_sync_timeout_seconds``, before the
   probes serve and the runtime is dialled), so that the first Synchronize knows the running pods;
   then a warning if the Node's allocatable CPU includes CPUs the policy reserves (the kubelet must
   reserve them too, or pods the agent cannot pin are admitted: :mod:`numaplane.agent.nodecheck`);
6. the NRI plugin connects (and reconnects with backoff forever): Configure → Synchronize, after which
   ``/readyz`` turns ready.

The long-lived tasks — the background loops of :meth:`Agent._children`, the Pod informer, the claim and
slice informers (once the config enables DRA) and the NRI plugin — are children of one :class:`~numaplane.supervisor.Supervisor` (:attr:`Agent.tasks`), as in
the other daemons; a background loop restarts itself after a crash (``agent/background.py``).

:meth:`Agent.stop` flushes the checkpoint and stops everything; SIGTERM/SIGINT call it from the CLI.

Over 600 lines, on purpose: this module is the one place that runs the start-up sequence above in
order (one method per step) and the shutdown in reverse; every piece it starts lives in its own module,
and splitting the wiring itself would scatter the ordering this docstring documents.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from numaplane.agent.appliedpolicy import AppliedPolicyWriter
from numaplane.agent.background import BackgroundLoop
from numaplane.agent.checkpoint import CheckpointIdentity, CheckpointStore, CheckpointWriter, topology_digest
from numaplane.agent.claims import ClaimSource
from numaplane.agent.configwatch import ConfigWatcher, read_config
from numaplane.agent.errors import AgentConfigError, CheckpointError
from numaplane.agent.handler import AgentHandler, StateRunner, UpdateSender
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.nodecheck import allocatable_cpu_problem
from numaplane.agent.notify import ChangeNotifier
from numaplane.agent.plugins import PluginRegistry
from numaplane.agent.podresources import AgentPodResources
from numaplane.agent.pods import PodSource
from numaplane.agent.policyreport import PolicyReporter, document_revision
from numaplane.agent.state import NodeAgentState
from numaplane.agent.waitreport import WaitingReporter
from numaplane.grpcapi.podresources.server import PodResourcesServer
from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.errors import KubeError
from numaplane.kube.port import KubePort
from numaplane.kube.resources import NODE
from numaplane.nri.plugin import NRIPlugin
from numaplane.observability.http import ProbeServer
from numaplane.policy.config import NodeResourceConfig, parse_config
from numaplane.policy.dra import DRAPlugin, PodClaims
from numaplane.policy.errors import PolicyConfigError, ReconfigureRejected
from numaplane.policy.manager import ResourceManager
from numaplane.supervisor import Supervisor
from numaplane.topology.errors import TopologyError
from numaplane.topology.load import load_sysfs, load_topology_file
from numaplane.topology.model import Topology

__all__ = ["CHECKPOINT_FILE", "Agent", "AgentOptions", "load_topology"]

log = structlog.get_logger("numaplane.agent")

CHECKPOINT_FILE = "agent_state.json"
#: Why the DRA hint provider cannot work in an agent without API access.
NO_API_FOR_DRA = "the agent reads ResourceClaims and ResourceSlices from the API: run it with --watch-pods"


@dataclass(frozen=True)
class AgentOptions:
    """Everything the agent is told (paths, addresses, timings in seconds)."""

    nri_socket: str = "/var/run/nri/nri.sock"
    state_dir: Path = Path("/var/lib/numaplane")
    config_file: Path | None = None
    topology_file: Path | None = None
    sysfs_root: Path = Path("/")
    node_name: str = ""
    podresources_socket: str | None = None
    plugin_dir: Path | None = None
    plugin_uid: int | None = None
    metrics_address: str | None = None
    health_address: str | None = None
    nri_plugin_name: str = "numaplane"
    nri_plugin_index: str = "50"
    config_poll_seconds: float = 1.0
    notify_file: Path | None = None
    #: The configuration in force is written here at start and after every applied change (the exporter's
    #: ``--applied-policy-file``: it publishes this policy as the NRT's attributes).
    applied_policy_file: Path | None = None
    #: The agent's own pod (downward API): with API access, the policy report goes on its conditions.
    pod_name: str = ""
    pod_namespace: str = ""
    checkpoint_interval_seconds: float = 0.05
    plugin_call_timeout_seconds: float = 0.25
    plugin_health_seconds: float = 1.0
    nri_backoff_initial_seconds: float = 0.1
    nri_backoff_max_seconds: float = 5.0
    #: With the Pod informer: how long to wait for its first list before connecting to the runtime, so
    #: that the first Synchronize adopts running pods as whole pods (unknown pods fall back to one
    #: container at a time; the wait never blocks a request: nothing is connected yet).
    pod_sync_timeout_seconds: float = 5.0
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StartInputs:
    """What start-up reads before anything runs (steps 1 and 2 of the module docstring).

    ``config`` is the node config file parsed once, checked against ``topology`` in the same pass (the
    defaults without a file; ``None`` when the file is invalid, ``config_error`` saying why); every later
    step takes this value. ``digest``: the file content's SHA-256 (hex); ``checkpoint``: the checkpoint's
    document, ``None`` when missing or moved aside."""

    topology: Topology
    config: NodeResourceConfig | None
    digest: str
    config_error: str
    store: CheckpointStore
    checkpoint: dict[str, Any] | None


def load_topology(options: AgentOptions) -> Topology:
    """From ``topology_file`` (a topology JSON/YAML document), else discovered from sysfs under
    ``sysfs_root`` — through the one loader, ``topology/load.py``."""
    try:
        if options.topology_file is not None:
            return load_topology_file(options.topology_file)
        return load_sysfs(options.sysfs_root)
    except TopologyError as exc:
        raise AgentConfigError(f"cannot load the topology: {exc}") from None


class Agent:
    """One node agent (see the module docstring). ``kube``: optional API access for the Pod informer;
    ``clock``: the time every timestamp it writes reads (the policy report, the applied policy file,
    the waiting report, a quarantined checkpoint's name), as the scheduler and the operator take one."""

    def __init__(
        self,
        options: AgentOptions,
        *,
        topology: Topology | None = None,
        kube: KubePort | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.options = options
        self.clock: Clock = clock or SystemClock()
        self.metrics = AgentMetrics()
        self.topology = topology
        self.kube = kube
        self.state: NodeAgentState | None = None
        self.runner: StateRunner | None = None
        self.handler: AgentHandler | None = None
        self.nri: NRIPlugin | None = None
        self.writer: CheckpointWriter | None = None
        self.sender: UpdateSender | None = None
        self.watcher: ConfigWatcher | None = None
        self.registry: PluginRegistry | None = None
        self.podresources: PodResourcesServer | None = None
        self.probes: ProbeServer | None = None
        self.pods: PodSource | None = None
        self.claims: ClaimSource | None = None
        self.notifier: ChangeNotifier | None = None
        self.policy_file: AppliedPolicyWriter | None = None
        self.reporter: PolicyReporter | None = None
        self.waiting_reporter: WaitingReporter | None = None
        self._config_doc: Mapping[str, Any] | None = None
        self.checkpoint_status = "not loaded"
        self.quarantined: Path | None = None
        #: Every long-lived task of the agent, as in the other daemons (see :mod:`numaplane.supervisor`).
        self.tasks = Supervisor("agent")
        self._nri_task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()

    @property
    def checkpoint_path(self) -> Path:
        return self.options.state_dir / CHECKPOINT_FILE

    # -- start-up -------------------------------------------------------------------------------------
    def _read_config(self, topology: Topology) -> tuple[NodeResourceConfig | None, str, str]:
        """``(config or None when invalid, digest, error)`` of the config file (defaults without one),
        checked against ``topology`` in the same pass."""
        if self.options.config_file is None:
            return NodeResourceConfig(), "", ""
        try:
            doc, digest = read_config(self.options.config_file)
            self._config_doc = doc
            return parse_config(doc, topology), digest, ""
        except (AgentConfigError, PolicyConfigError) as exc:
            return None, "", str(exc)

    def _load_checkpoint(self, store: CheckpointStore) -> dict[str, Any] | None:
        for tmp in store.remove_stale_temps():
            log.info("removed the temp file of an interrupted checkpoint write", path=str(tmp))
        try:
            data = store.load()
        except CheckpointError as exc:
            self._bad_checkpoint(store, exc)
            return None
        if data is None:
            self.checkpoint_status = "missing"
            self.metrics.checkpoint_load.labels(result="missing").inc()
        return data

    def _task_crashed(self, task: str) -> None:
        self.metrics.background_crashes.labels(task=task).inc()

    def _bad_checkpoint(self, store: CheckpointStore, exc: CheckpointError) -> None:
        self.quarantined = store.quarantine(exc, self.clock.now())
        self.checkpoint_status = exc.kind
        self.metrics.checkpoint_load.labels(result=exc.kind).inc()
        log.error(
            "checkpoint unusable; moved aside, rebuilding the state from the runtime",
            path=str(store.path),
            kind=exc.kind,
            error=str(exc),
            moved_to=str(self.quarantined) if self.quarantined else None,
        )

    async def start(self) -> None:
        """Run the start-up sequence of the module docstring; every long-lived task is a child of
        :attr:`tasks` (:meth:`_children`, the pod informer, the NRI plugin)."""
        inputs = await self._read_inputs()
        state = self.state = self._build_state(inputs)
        self._prepare_outputs()
        revision_in_force = self._apply_start_config(inputs)
        if self.policy_file is not None:
            await self.policy_file.write(state.manager.config, revision_in_force)
        nri = self._wire(inputs)
        await self.tasks.start()
        for child in self._children():
            child.on_crash = self._task_crashed
            child.start(self.tasks)
        await self._serve()
        if self.pods is not None:
            self.pods.start(self.tasks)
        self._follow_dra()
        await self._first_pod_list()
        await self._serve_probes()
        self._nri_task = self.tasks.spawn(nri.run(), "nri-plugin")
        log.info(
            "agent started",
            node=self.options.node_name,
            nri_socket=self.options.nri_socket,
            cpus=inputs.topology.num_cpus,
            numa_nodes=inputs.topology.num_numa_nodes,
            checkpoint=self.checkpoint_status,
        )

    async def _read_inputs(self) -> StartInputs:
        """Steps 1 and 2: the machine, the node config (parsed once) and the checkpoint's document."""
        opts = self.options
        topology = self.topology if self.topology is not None else await asyncio.to_thread(load_topology, opts)
        self.topology = topology
        if opts.config_file is not None and not opts.config_file.is_file():
            # before the state folder is touched, whatever the checkpoint holds: a missing file is a typo
            raise AgentConfigError(f"--config {opts.config_file}: no such file")
        config, digest, config_error = self._read_config(topology)
        opts.state_dir.mkdir(parents=True, exist_ok=True)
        store = CheckpointStore(self.checkpoint_path, CheckpointIdentity(opts.node_name, topology_digest(topology)))
        data = await asyncio.to_thread(self._load_checkpoint, store)
        if config is None and data is None:
            raise AgentConfigError(config_error)
        return StartInputs(topology, config, digest, config_error, store, data)

    def _build_state(self, inputs: StartInputs) -> NodeAgentState:
        """The Pod and claim sources (with API access) and the state, restored from the checkpoint if usable."""
        opts, config = self.options, inputs.config
        if self.kube is not None:
            self.pods = PodSource(self.kube, opts.node_name)
            self.claims = ClaimSource(self.kube, opts.node_name, sysfs_root=opts.sysfs_root)
        elif config is not None and config.dra_enabled:
            raise AgentConfigError(f"dra.enabled: {NO_API_FOR_DRA}")
        lookup = self.pods.lookup if self.pods is not None else None
        state = NodeAgentState(self._manager(inputs.topology, config), pod_lookup=lookup)
        if inputs.checkpoint is None:
            return state
        try:
            state.restore(inputs.checkpoint)
        except CheckpointError as exc:
            self._bad_checkpoint(inputs.store, exc)
            return NodeAgentState(self._manager(inputs.topology, config), pod_lookup=lookup)
        self.checkpoint_status = "restored"
        self.metrics.checkpoint_load.labels(result="restored").inc()
        log.info("checkpoint restored", containers=len(state.records), path=str(inputs.store.path))
        return state

    def _prepare_outputs(self) -> None:
        """The notify file, the applied policy file and the policy reporter (nothing runs yet)."""
        opts = self.options
        if opts.notify_file is not None:
            self.notifier = ChangeNotifier(opts.notify_file, on_result=self._notified)
            self.notifier.prepare()
        if opts.applied_policy_file is not None:
            self.policy_file = AppliedPolicyWriter(
                opts.applied_policy_file, opts.node_name, on_result=self._policy_file_written, clock=self.clock
            )
            self.policy_file.prepare()
        if self.kube is not None and opts.pod_name and opts.pod_namespace:
            self.reporter = PolicyReporter(self.kube, opts.pod_namespace, opts.pod_name, clock=self.clock)

    def _apply_start_config(self, inputs: StartInputs) -> str | None:
        """Step 3: the file's config over the restored one; the revision in force (``None``: the
        checkpoint's config, whose revision is not known)."""
        assert self.state is not None
        state, config, config_error = self.state, inputs.config, inputs.config_error
        self.metrics.config_generation.set(1)
        self.metrics.config_valid.set(0 if config_error else 1)
        if config_error:
            self.metrics.set_config_rejected(config_error)
            self._report(False, config_error)
            log.error("config file invalid at start; the checkpoint's config stays in force", reason=config_error)
            return None
        if config is not None and config != state.manager.config:
            try:
                state.reconfigure(config)
            except PolicyConfigError as exc:
                self.metrics.config_valid.set(0)
                self.metrics.set_config_rejected(str(exc))
                self._report(False, str(exc))
                log.error(
                    "config file conflicts with the restored allocations; keeping the checkpoint's config",
                    reason=str(exc),
                )
                return None
        self._report(True)
        return document_revision(self._config_doc)

    def _wire(self, inputs: StartInputs) -> NRIPlugin:
        """Step 4's pieces, built and connected (none started): runner, update sender, checkpoint writer,
        waiting reporter, NRI handler and plugin, plugin registry, config watcher; the gauges."""
        assert self.state is not None
        opts = self.options
        self.runner = runner = StateRunner(self.state)
        self.sender = sender = UpdateSender(runner, self.metrics)
        self.writer = CheckpointWriter(
            inputs.store,
            self._snapshot,
            min_interval_seconds=opts.checkpoint_interval_seconds,
            on_result=self._checkpoint_written,
        )
        if inputs.checkpoint is None or self.checkpoint_status != "restored":
            self.writer.mark_dirty()
        if self.kube is not None:
            self.waiting_reporter = WaitingReporter(self.kube, clock=self.clock, host=opts.node_name)
        self.handler = AgentHandler(
            runner, metrics=self.metrics, sender=sender, on_change=self._changed, on_waiting=self._on_waiting()
        )
        self.nri = nri = NRIPlugin(
            self.handler,
            name=opts.nri_plugin_name,
            idx=opts.nri_plugin_index,
            socket_path=opts.nri_socket,
            backoff_initial_seconds=opts.nri_backoff_initial_seconds,
            backoff_max_seconds=opts.nri_backoff_max_seconds,
        )
        sender.sender = nri.update_containers
        self.metrics.nri_connected.set_function(lambda: float(nri.registered))
        self.metrics.nri_sessions_without_sync.set_function(lambda: float(nri.sessions_without_sync))
        self.metrics.owed_updates.set_function(lambda: float(sender.owed))
        self._set_gauges()
        if opts.plugin_dir is not None:
            self.registry = PluginRegistry(
                opts.plugin_dir,
                runner,
                expected_uid=opts.plugin_uid,
                call_timeout_seconds=opts.plugin_call_timeout_seconds,
                health_interval_seconds=opts.plugin_health_seconds,
                metrics=self.metrics,
                on_change=self._changed,
            )
        if opts.config_file is not None:
            self.watcher = ConfigWatcher(
                opts.config_file,
                self._apply_config,
                interval_seconds=opts.config_poll_seconds,
                metrics=self.metrics,
                initial_digest=inputs.digest,
            )
            self.watcher.last_error = inputs.config_error
        return nri

    def _on_waiting(self) -> Callable[[NodeAgentState], None] | None:
        """The handler's hook for containers waiting in the shared pool (Events through the waiting reporter)."""
        waiting = self.waiting_reporter
        if waiting is None:
            return None
        return lambda st: waiting.follow(st.waiting, st.records)

    def _children(self) -> list[BackgroundLoop]:
        """The background loops, in start order: each restarts itself after a crash (counted in
        ``numaplane_agent_background_crashes``) and runs as a child of :attr:`tasks`."""
        loops = (self.writer, self.sender, self.waiting_reporter, self.watcher, self.reporter)
        return [loop for loop in loops if loop is not None]

    async def _serve(self) -> None:
        """The PodResources socket and the plugin registry's socket."""
        if self.options.podresources_socket:
            assert self.runner is not None
            self.podresources = PodResourcesServer(AgentPodResources(self.runner), self.options.podresources_socket)
            await self.podresources.start()
        if self.registry is not None:
            await self.registry.start()

    async def _first_pod_list(self) -> None:
        """Step 5: with the Pod informer, wait (bounded) for its first list, then check the Node."""
        if self.pods is None:
            return
        try:
            async with asyncio.timeout(self.options.pod_sync_timeout_seconds):
                await self.pods.informer.wait_for_sync()
                if self.claims is not None and self.claims.started:
                    await self.claims.wait_for_sync()
        except TimeoutError:
            log.warning(
                "the node's pods are not listed yet; pods unknown at Synchronize are adopted one container at a time",
                waited_seconds=self.options.pod_sync_timeout_seconds,
            )
        await self._check_node_allocatable()

    async def _serve_probes(self) -> None:
        opts = self.options
        if opts.metrics_address or opts.health_address:
            self.probes = ProbeServer(self.metrics.registry, liveness=self.liveness, readiness=self.readiness)
            await self.probes.start(opts.metrics_address, opts.health_address)

    def _manager(self, topology: Topology, config: NodeResourceConfig | None) -> ResourceManager:
        """The resource manager with the DRA hint provider, which the node config switches on
        (``dra.enabled``); it reads the pod's claims from :attr:`claims` (none without API access)."""
        claims = self.claims
        config = config or NodeResourceConfig()

        def lookup(pod: Any) -> PodClaims:
            if claims is None:
                return PodClaims(
                    unresolved={name: NO_API_FOR_DRA for c in pod.all_containers() for name, _ in c.claims}
                )
            return claims.resolve(pod, plugin.numa_attributes)

        plugin = DRAPlugin(
            topology.numa_ids, lookup, config=config, requires="" if claims is not None else NO_API_FOR_DRA
        )
        return ResourceManager(topology, config, extra_plugins=[plugin])

    def _follow_dra(self) -> None:
        """Start the claim and slice informers once the config enables DRA (not before: a cluster
        without ``resource.k8s.io/v1``, or an agent role without read access to it, stays quiet)."""
        if self.claims is not None and self.state is not None and self.state.manager.config.dra_enabled:
            self.claims.start(self.tasks)

    async def _check_node_allocatable(self) -> None:
        """Warn once at start if the Node's allocatable CPU includes CPUs the policy reserves."""
        assert self.kube is not None and self.state is not None
        try:
            node = await self.kube.get(NODE, self.options.node_name)
        except KubeError as exc:
            log.info("cannot read this node's allocatable CPU", error=str(exc))
            return
        problem = allocatable_cpu_problem(node, self.state.manager.config.effective_reserved_count)
        if problem:
            log.warning(problem, node=self.options.node_name)

    # -- state changes --------------------------------------------------------------------------------
    async def _snapshot(self) -> tuple[int, dict[str, Any]]:
        assert self.runner is not None
        state = self.runner.state
        return await self.runner.call(lambda: (state.generation, state.snapshot()))

    def _checkpoint_written(self, ok: bool, seconds: float) -> None:
        self.metrics.checkpoint_writes.labels(result="ok" if ok else "error").inc()
        self.metrics.checkpoint_write_duration.observe(seconds)

    def _changed(self) -> None:
        if self.registry is not None:
            self.registry.kick()  # releases and new amounts for out-of-process plugins
        if self.writer is not None:
            self.writer.mark_dirty()
        if self.notifier is not None:
            self.notifier.notify()
        self._set_gauges()

    def _notified(self, ok: bool) -> None:
        self.metrics.notify_touches.labels(result="ok" if ok else "error").inc()

    def _policy_file_written(self, ok: bool) -> None:
        self.metrics.applied_policy_writes.labels(result="ok" if ok else "error").inc()

    def _set_gauges(self) -> None:
        state = self.state
        if state is None:
            return
        exclusive = shared = 0
        for record in list(state.records.values()):
            if record.exclusive is not None:
                exclusive += 1
            else:
                shared += 1
        self.metrics.containers.labels(kind="exclusive").set(exclusive)
        self.metrics.containers.labels(kind="shared").set(shared)
        self.metrics.exclusive_cpus.set(state.exclusive_cpus().size())
        self.metrics.shared_pool_cpus.set(state.shared_pool.size())
        self.metrics.unpinned.set(len(state.waiting))

    def _report(self, applied: bool, why: str = "") -> None:
        if self.reporter is not None:
            self.reporter.report(self._config_doc, applied, why)

    async def _apply_config(self, doc: Mapping[str, Any]) -> None:
        """A changed config file: parsed once here (checked against the machine in the same pass), and
        that value is what the plugins are asked about and what the state applies."""
        assert self.runner is not None and self.sender is not None
        state = self.runner.state
        self._config_doc = doc
        try:
            try:
                config = parse_config(doc, state.manager.topology)
            except PolicyConfigError as exc:
                raise ReconfigureRejected([str(exc)]) from None
            if self.registry is not None and self.registry.plugins:
                # out-of-process plugins are asked here, not by the manager (which does no I/O)
                problems = state.manager.check_config(config) + await self.registry.check_config(config)
                if problems:
                    raise ReconfigureRejected(problems)
            updates = await self.runner.call(lambda: state.reconfigure(config))
        except PolicyConfigError as exc:
            self._report(False, str(exc))
            raise
        self._report(True)
        if self.policy_file is not None:  # before the notify touch below: the exporter reads both
            await self.policy_file.write(state.manager.config, document_revision(doc))
        self._follow_dra()
        self.sender.submit((u.container_id for u in updates), "reconfigure")
        if state.take_deferred():
            self.sender.submit_shared("reconfigure")
        self._changed()

    # -- probes ---------------------------------------------------------------------------------------
    def liveness(self) -> tuple[bool, dict[str, Any]]:
        tasks = {"nri": self._nri_task}
        dead = [name for name, task in tasks.items() if task is None or task.done()]
        return not dead, {"dead": dead}

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        registered = self.nri is not None and self.nri.registered
        synchronized = self.handler is not None and self.handler.synchronized.is_set()
        verified = self.handler is not None and self.handler.verified.is_set()
        details: dict[str, Any] = {
            "nriRegistered": registered,
            "synchronized": synchronized,
            "cpusetsConfirmed": verified,
            "checkpoint": self.checkpoint_status,
        }
        sync_problem = self.nri.sync_problem if self.nri is not None else ""
        if sync_problem:
            details["reason"] = sync_problem
        if self.sender is not None and self.sender.owed:
            details["owedUpdates"] = self.sender.owed
        if self.watcher is not None and self.watcher.last_error:
            details["configRejected"] = self.watcher.last_error
        if self.policy_file is not None and self.policy_file.last_error:
            details["appliedPolicyFile"] = self.policy_file.last_error
        if self.registry is not None:
            details["plugins"] = {
                name: ("available" if p.reachable else f"isolated: {p.last_error}")
                for name, p in self.registry.plugins.items()
            }
        return registered and synchronized and verified and not sync_problem, details

    # -- lifecycle ------------------------------------------------------------------------------------
    async def wait_ready(self, timeout_seconds: float = 10.0) -> None:
        async with asyncio.timeout(timeout_seconds):
            while not self.readiness()[0]:
                await asyncio.sleep(0.01)

    async def run(self) -> None:
        """Start, serve until :meth:`request_stop`, stop (also when starting failed half-way)."""
        try:
            await self.start()
            await self._stopped.wait()
        finally:
            await self.stop()

    def request_stop(self) -> None:
        self._stopped.set()

    async def stop(self) -> None:
        if self.nri is not None:
            await self.nri.stop()
        if self._nri_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._nri_task, 5)
        for closer in (self.watcher, self.pods, self.claims, self.sender, self.reporter, self.waiting_reporter):
            if closer is not None:
                await closer.stop()
        await self.tasks.close()  # every child is stopped above; this leaves none behind in any case
        if self.registry is not None:
            await self.registry.stop()
        if self.writer is not None:
            await self.writer.stop()
            with contextlib.suppress(Exception):
                await self.writer.flush()
        if self.podresources is not None:
            await self.podresources.stop()
        if self.probes is not None:
            await self.probes.stop()
        log.info("agent stopped", pid=os.getpid())

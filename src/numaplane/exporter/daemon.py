"""The exporter daemon: event sources → gate → scan → publish, with metrics, probes and logs.

Wiring (one node, one event loop)::

    periodic timer ─┐
    notify file ────┤                      ┌── Scanner (PodResources, sysfs, kubelet config)
    kubelet files ──┤
    applied policy ─┤
    pod mirror ─────┼─► EventGate ─► cycle ┤
    NRT mirror ─────┤   (coalesce,         └── Publisher (KubePort) ─► API server
    retry timer ────┘    rate limit)

* Start-up posts :attr:`Trigger.INITIAL`; with terminal-pod exclusion the first scan waits (at most
  ``initial_sync_seconds``) for the pod mirror's first list, so the first object is already right.
* A cycle that fails (any :class:`~numaplane.exporter.errors.ExporterError`, or an unexpected
  exception, logged with its traceback as kind ``internal``) counts the error, leaves the last
  published object in place, and schedules :attr:`Trigger.RETRY` after an exponential back-off
  (``retry_initial_seconds`` doubling up to ``retry_max_seconds``; reset by the next success).
  Nothing a cycle raises stops the daemon.
* Without a Kubernetes port (``kube=None``) or with ``publish=False`` the daemon scans and exposes
  metrics but writes nothing; without a port, terminal pods cannot be recognised and are counted.
* Node lock (``lock_file``, :mod:`numaplane.exporter.nodelock`): taken before anything is read or
  published; while another exporter of the node holds it, only the probes run (alive, not ready,
  ``node_lock`` in the details) and a task retries every ``lock_retry_seconds``.
* Readiness (``/readyz``): the last scan read the PodResources API (RTE's ``PodresourcesFetched``)
  and the last publish succeeded or found the object current (``NodeTopologyUpdated``). Liveness
  (``/healthz``): the refresh loop and every helper task are running. The tasks (mirrors, timers,
  notify watcher, refresh loop) are children of one :class:`~numaplane.supervisor.Supervisor`: one
  that dies stops the daemon (``task_failed`` logged; :meth:`Exporter.run` raises
  :class:`~numaplane.supervisor.TaskFailed`), and closing cancels and awaits every one.

:meth:`Exporter.oneshot` runs one scan without any API server and returns what would be published.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from typing import Any, Final

import structlog

from numaplane.exporter.dra import DRAInventory
from numaplane.exporter.errors import ExporterConfigError, ExporterError
from numaplane.exporter.events import (
    Batch,
    EventGate,
    FilesWatcher,
    KubeletWatcher,
    NotifyFileWatcher,
    Trigger,
    periodic,
)
from numaplane.exporter.kubelet import KubeletConfigSource
from numaplane.exporter.metrics import ExporterMetrics
from numaplane.exporter.mirror import Mirror
from numaplane.exporter.nodelock import NodeLock
from numaplane.exporter.options import ExporterOptions
from numaplane.exporter.publisher import Outcome, Publisher
from numaplane.exporter.scan import Scanner, ScanResult
from numaplane.exporter.sources import MachineSource, PodResourcesSource, open_podresources
from numaplane.exporter.status import ExporterStatus
from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.errors import KubeError
from numaplane.kube.port import EventType, JsonObj, KubePort
from numaplane.kube.resources import NODE_RESOURCE_TOPOLOGY, POD
from numaplane.observability.errors import ObservabilityError
from numaplane.observability.http import ProbeServer
from numaplane.supervisor import Supervisor

__all__ = ["TERMINAL_PHASES", "Exporter", "ExporterStatus"]

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
#: The task that waits for another exporter's node lock (:mod:`numaplane.exporter.nodelock`).
NODE_LOCK_TASK: Final = "node-lock"


class Exporter:
    """One node's exporter (see the module docstring). Use :meth:`run`, or :meth:`start` + :meth:`close`."""

    def __init__(
        self,
        options: ExporterOptions,
        *,
        kube: KubePort | None = None,
        podresources: PodResourcesSource | None = None,
        metrics: ExporterMetrics | None = None,
        machine_source: MachineSource | None = None,
        kubelet_source: KubeletConfigSource | None = None,
        initial_sync_seconds: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        self.options = options
        #: The one time source of this exporter (probes, event batches, heartbeat, lock note, metrics).
        self.clock: Clock = clock or SystemClock()
        self.kube = kube
        self.podresources = podresources or open_podresources(
            options.podresources_socket, timeout_seconds=options.podresources_timeout_seconds
        )
        self.metrics = metrics or ExporterMetrics(options.node_name)
        self.initial_sync_seconds = initial_sync_seconds
        self.status = ExporterStatus()
        self.last_result: ScanResult | None = None
        self._memory_reported: bool | None = None
        self.gate = EventGate(options.max_events_per_second, options.event_burst, clock=self.clock)
        self.gate.on_post = self._count_event
        self._log = structlog.get_logger("numaplane.exporter").bind(node=options.node_name)
        self._terminal: set[tuple[str, str]] = set()
        self.pod_mirror: Mirror | None = None
        self.nrt_mirror: Mirror | None = None
        if kube is not None and options.exclude_terminal_pods:
            self.pod_mirror = Mirror(
                kube,
                POD,
                field_selector=f"spec.nodeName={options.node_name}",
                handler=self._on_pod,
                on_error=self._on_watch_error,
            )
        self.publisher: Publisher | None = None
        if kube is not None and options.publish:
            self.nrt_mirror = Mirror(
                kube,
                NODE_RESOURCE_TOPOLOGY,
                field_selector=f"metadata.name={options.node_name}",
                handler=self._on_object,
                on_error=self._on_watch_error,
            )
            self.publisher = Publisher(
                kube,
                options.node_name,
                owner_reference=options.owner_reference,
                adopt=options.adopt,
                view=self._view,
                on_error=self.report,
                heartbeat_seconds=options.heartbeat_seconds or None,
                clock=self.clock,
            )
        self.dra: DRAInventory | None = None
        if options.dra:
            if kube is None:
                raise ExporterConfigError(
                    "--dra needs the API server (the node's ResourceSlices, DeviceClasses and claims)"
                )
            self.dra = DRAInventory(
                kube,
                options.node_name,
                numa_attributes=options.dra_numa_attributes,
                changed=lambda: self.gate.post(Trigger.DRA),
                on_error=self._on_watch_error,
            )
        self.scanner = Scanner(
            options,
            self.podresources,
            machine_source=machine_source,
            kubelet_source=kubelet_source,
            terminal_pods=self._terminal_pods if self.pod_mirror is not None else None,
            on_error=self.report,
            dra=self.dra.groups if self.dra is not None else None,
        )
        self.notify: NotifyFileWatcher | None = None
        if options.refresh_mode.events and options.notify_file is not None:
            self.notify = NotifyFileWatcher(
                options.notify_file,
                lambda: self.gate.post(Trigger.REACTIVE),
                backend=options.notify_backend,
                poll_seconds=options.notify_poll_seconds,
            )
        self.kubelet_watch: KubeletWatcher | None = None
        if options.refresh_mode.events and options.kubelet_state_dir is not None:
            self.kubelet_watch = KubeletWatcher(
                self.gate,
                state_dir=options.kubelet_state_dir,
                config_file=options.kubelet_config_file,
                backend=options.notify_backend,
                poll_seconds=options.notify_poll_seconds,
                check_seconds=options.kubelet_check_seconds,
            )
        self.policy_watch: FilesWatcher | None = None
        if options.applied_policy_file is not None:
            # every refresh mode: the published policy must be the one the agent enforces now
            self.policy_watch = FilesWatcher(
                [options.applied_policy_file],
                lambda _path: self.gate.post(Trigger.APPLIED_POLICY),
                backend=options.notify_backend,
                poll_seconds=options.notify_poll_seconds,
                check_seconds=options.kubelet_check_seconds,
                what="applied policy file",
            )
        self.probes = ProbeServer(self.metrics.registry, liveness=self.liveness, readiness=self.readiness)
        self._tasks = Supervisor("exporter")
        self._stop = asyncio.Event()
        self._retry_delay = options.retry_initial_seconds
        self._retry_handle: asyncio.TimerHandle | None = None
        self._started = False
        self.node_lock: NodeLock | None = None
        if options.lock_file is not None:
            self.node_lock = NodeLock(
                options.lock_file, node=options.node_name, pod=os.environ.get("POD_NAME", ""), clock=self.clock
            )
        self.lock_retry_seconds = 0.5
        self._waiting_for_lock: float | None = None

    # ------------------------------------------------------------------ errors and events

    def report(self, error: ExporterError) -> None:
        """Count and log a survived error; it becomes :attr:`ExporterStatus.last_error`."""
        self.metrics.errors.labels(kind=error.kind).inc()
        self.status.last_error, self.status.last_error_at = error, self.clock.monotonic()
        self._log.warning("exporter_error", kind=error.kind, error=error.message, error_type=type(error).__name__)

    def _count_event(self, trigger: Trigger, folded: bool) -> None:
        self.metrics.events.labels(trigger=trigger.value).inc()
        if folded:
            self.metrics.coalesced.inc()

    def _on_watch_error(self, error: KubeError) -> None:
        self.report(ExporterError(f"list/watch broke, relisting: {error}", kind="watch"))

    def _on_pod(self, kind: EventType, old: JsonObj | None, new: JsonObj | None) -> None:
        obj = new if new is not None else old
        meta: Mapping[str, Any] = (obj or {}).get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        phase = ((new or {}).get("status") or {}).get("phase")
        if new is not None and phase in TERMINAL_PHASES:
            if key not in self._terminal:
                self._terminal.add(key)
                if self._started:
                    self._log.info("pod_terminated", pod=f"{key[0]}/{key[1]}", phase=phase)
                    self.gate.post(Trigger.POD_PHASE)
        else:
            self._terminal.discard(key)

    def _terminal_pods(self) -> frozenset[tuple[str, str]]:
        return frozenset(self._terminal)

    def _on_object(self, kind: EventType, old: JsonObj | None, new: JsonObj | None) -> None:
        publisher = self.publisher
        if publisher is None or publisher.desired is None:
            return
        if kind is EventType.DELETED:
            self._log.info("object_deleted_on_server")
            self.gate.post(Trigger.OBJECT)
        elif not publisher.matches(new):
            self._log.info("object_changed_on_server")
            self.gate.post(Trigger.OBJECT)

    def _view(self) -> tuple[bool, JsonObj | None]:
        mirror = self.nrt_mirror
        if mirror is None:
            return False, None
        return mirror.live, mirror.get(self.options.node_name)

    # ------------------------------------------------------------------ probes

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        dead = self._tasks.dead()
        if dead.get(NODE_LOCK_TASK) == "returned":  # it took the lock and started the rest
            del dead[NODE_LOCK_TASK]
        # waiting for another exporter's node lock is alive (a liveness restart would not help)
        ok = (self._started or self._waiting_for_lock is not None) and not dead and not self._stop.is_set()
        return ok, {"tasks": self._tasks.names(), "dead": dead}

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        ok = (
            self._started
            and self.status.podresources_fetched
            and (self.publisher is None or self.status.topology_updated)
        )
        return ok, self.status.to_dict(self.clock.monotonic())

    # ------------------------------------------------------------------ one cycle

    async def cycle(self, batch: Batch) -> Outcome | None:
        """Scan and publish once for ``batch``; never raises (errors are reported and retried)."""
        trigger = batch.trigger.value
        self.status.cycles += 1
        started = self.clock.monotonic()
        try:
            result = await self.scanner.scan(refresh=batch.refresh)
        except ExporterError as error:
            self.status.podresources_fetched = False
            self._failed(error)
            return None
        except Exception as error:
            self._log.exception("scan_crashed")
            self.status.podresources_fetched = False
            self._failed(ExporterError(f"scan crashed: {type(error).__name__}: {error}", kind="internal"))
            return None
        scanned = self.clock.monotonic()
        self.metrics.scan_seconds.observe(scanned - started)
        self.status.podresources_fetched = True
        self.last_result = result
        self.metrics.zones.nrt = result.nrt
        self._report_zone_memory(result)
        if self.publisher is None:
            self._succeeded()
            return None
        try:
            published = await self.publisher.publish(result.nrt, update_kind=batch.update_kind)
        except ExporterError as error:
            self.status.topology_updated = False
            self._failed(error)
            return None
        except Exception as error:
            self._log.exception("publish_crashed")
            self.status.topology_updated = False
            self._failed(ExporterError(f"publish crashed: {type(error).__name__}: {error}", kind="internal"))
            return None
        done = self.clock.monotonic()
        outcome = published.outcome
        self.metrics.write_seconds.labels(operation=outcome.value).observe(done - scanned)
        self.metrics.event_to_published.labels(trigger=trigger).observe(max(done - batch.first_at, 0.0))
        if outcome is Outcome.UNCHANGED:
            self.metrics.skips.labels(trigger=trigger).inc()
            self._log.debug("object_unchanged", trigger=trigger, api_calls=published.api_calls)
        else:
            self.metrics.writes.labels(operation=outcome.value, trigger=trigger).inc()
            self.metrics.last_write.set(self.clock.now().timestamp())
            self._log.info(
                "object_published",
                operation=outcome.value,
                trigger=trigger,
                fingerprint=result.fingerprint,
                pods_listed=result.pods_listed,
                pods_excluded=result.pods_excluded,
                pods_terminal=result.pods_terminal,
                latency_seconds=round(done - batch.first_at, 6),
            )
        self.status.topology_updated = True
        self.status.outcomes[outcome.value] = self.status.outcomes.get(outcome.value, 0) + 1
        self._succeeded()
        return outcome

    def _failed(self, error: ExporterError) -> None:
        self.report(error)
        self.metrics.ready.set(0)
        if self._retry_handle is None and not self._stop.is_set():
            delay = self._retry_delay
            self._retry_delay = min(delay * 2, self.options.retry_max_seconds)
            self._retry_handle = asyncio.get_running_loop().call_later(delay, self._retry)

    def _retry(self) -> None:
        self._retry_handle = None
        self.gate.post(Trigger.RETRY)

    def _succeeded(self) -> None:
        self.status.last_success_at = self.clock.monotonic()
        self._retry_delay = self.options.retry_initial_seconds
        if self._retry_handle is not None:
            self._retry_handle.cancel()
            self._retry_handle = None
        self.metrics.ready.set(1 if self.readiness()[0] else 0)

    # ------------------------------------------------------------------ lifecycle

    async def _loop(self) -> None:
        if self.pod_mirror is not None:
            try:
                await asyncio.wait_for(self.pod_mirror.synced.wait(), self.initial_sync_seconds)
            except TimeoutError:
                self._log.warning("pods_not_synced", waited_seconds=self.initial_sync_seconds)
        for mirror in self.dra.mirrors if self.dra is not None else ():
            # never publish slices without the claims that use them (a zone would look free)
            try:
                await asyncio.wait_for(mirror.synced.wait(), self.initial_sync_seconds)
            except TimeoutError:
                self._log.warning(
                    "dra_not_synced", resource=mirror.res.plural, waited_seconds=self.initial_sync_seconds
                )
        while True:
            batch = await self.gate.next()
            await self.cycle(batch)

    async def start(self) -> None:
        """Start every task and the probe server; :class:`ExporterConfigError` for a bad notify file,
        lock file or probe address. With a node lock held by another exporter, only the probes run
        (alive, not ready) and a task takes the lock as soon as it is free, then starts the rest."""
        if self._started or self._waiting_for_lock is not None:
            return
        opts = self.options
        if self.notify is not None:
            self.notify.prepare()
        try:
            await self.probes.start(opts.metrics_address, opts.health_address)
        except ObservabilityError as error:
            raise ExporterConfigError(str(error)) from error
        await self._tasks.start()
        if self.node_lock is not None and not self.node_lock.try_acquire():
            holder = self.node_lock.holder()
            self._waiting_for_lock = self.clock.monotonic()
            self.status.node_lock = f"waiting: {self.node_lock.path} is held by another exporter ({holder})"
            self._log.warning(
                "node_lock_busy",
                lock_file=str(self.node_lock.path),
                holder=holder,
                consequence="this exporter publishes nothing (not ready) until the other one is gone",
                fix="run one exporter per node (two DaemonSets selecting the same node?)",
            )
            self._tasks.spawn(self._wait_for_lock(self.node_lock), NODE_LOCK_TASK)
            return
        await self._start_publishing()

    async def _wait_for_lock(self, lock: NodeLock) -> None:
        while not lock.try_acquire():
            await self.clock.sleep(self.lock_retry_seconds)
        now = self.clock.monotonic()
        waited = now - (self._waiting_for_lock or now)
        self._log.info("node_lock_acquired", lock_file=str(lock.path), waited_seconds=round(waited, 3))
        await self._start_publishing()

    async def _start_publishing(self) -> None:
        opts = self.options
        if self.node_lock is not None:
            self.status.node_lock = f"held: {self.node_lock.path}"
        if self.pod_mirror is not None:
            self._tasks.spawn(self.pod_mirror.run(), "pod-mirror")
        if self.nrt_mirror is not None:
            self._tasks.spawn(self.nrt_mirror.run(), "object-mirror")
        for mirror in self.dra.mirrors if self.dra is not None else ():
            self._tasks.spawn(mirror.run(), f"dra-{mirror.res.plural}")
        if opts.refresh_mode.periodic:
            self._tasks.spawn(periodic(self.gate, opts.period_seconds), "periodic")
        if self.publisher is not None and opts.heartbeat_seconds > 0:
            # a scan at least every heartbeat, whatever the refresh mode: the publisher rewrites the
            # object when its heartbeat is due (the staleness bound schedulers honour)
            self._tasks.spawn(periodic(self.gate, opts.heartbeat_seconds), "heartbeat")
        watchers = ((self.notify, "notify"), (self.kubelet_watch, "kubelet-watch"), (self.policy_watch, "policy-watch"))
        for watcher, name in watchers:
            if watcher is not None:
                self._tasks.spawn(watcher.run(), name)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watcher.started.wait(), 5.0)
        self._started = True
        self.gate.post(Trigger.INITIAL)
        self._tasks.spawn(self._loop(), "loop")
        self.metrics.info.labels(
            node=opts.node_name,
            refresh_mode=opts.refresh_mode.value,
            fingerprint_method=opts.fingerprint_method if opts.fingerprint else "disabled",
            notify_backend=self.notify.backend if self.notify is not None else "none",
        ).set(1)
        self._log.info(
            "exporter_started",
            podresources=self.podresources.description,
            refresh_mode=opts.refresh_mode.value,
            period_seconds=opts.period_seconds,
            notify_file=str(opts.notify_file) if opts.notify_file else None,
            notify_backend=self.notify.backend if self.notify is not None else None,
            kubelet_state_dir=str(opts.kubelet_state_dir) if self.kubelet_watch is not None else None,
            kubelet_watch_backend=self.kubelet_watch.backend if self.kubelet_watch is not None else None,
            applied_policy_file=str(opts.applied_policy_file) if opts.applied_policy_file else None,
            publish=self.publisher is not None,
            probes=self.probes.ports,
        )

    def stop(self) -> None:
        """Ask :meth:`run` to return (safe to call from a signal handler on the loop)."""
        self._stop.set()
        self._tasks.stop()

    async def wait(self) -> None:
        """Until :meth:`stop`, or until a task dies: every task is then stopped and
        :class:`~numaplane.supervisor.TaskFailed` raised (chained to the task's exception)."""
        await self._tasks.wait()

    async def close(self) -> None:
        """Stop every task, the probe server and the PodResources client (the port is the caller's)."""
        self._stop.set()
        if self._retry_handle is not None:
            self._retry_handle.cancel()
            self._retry_handle = None
        await self._tasks.close()
        await self.probes.stop()
        await self.podresources.close()
        if self.node_lock is not None:
            self.node_lock.release()
        self._log.info("exporter_stopped")

    async def run(self) -> None:
        """:meth:`start`, :meth:`wait`, :meth:`close`."""
        try:
            await self.start()
            await self.wait()
        finally:
            await self.close()

    def _report_zone_memory(self, result: ScanResult) -> None:
        """Say it (metric, and a warning on each change) when no zone carries memory: NUMA-aware
        schedulers then refuse every Guaranteed pod that requests memory on this node."""
        reported = any(r.name == "memory" for z in result.nrt.zones for r in z.resources)
        if reported == self._memory_reported:
            return
        self._memory_reported = reported
        self.metrics.zone_memory_reported.set(1 if reported else 0)
        if not reported:
            self._log.warning(
                "zones_without_memory",
                memory_manager_policy=result.settings.memory_manager_policy,
                consequence="NUMA-aware scheduling refuses every Guaranteed pod that requests memory on this node",
                fix="set the memory manager policy to Static (kubelet memoryManagerPolicy, or the agent's memoryManager.policy)",
            )
        else:
            self._log.info("zones_with_memory")

    async def oneshot(self) -> ScanResult:
        """One scan with fresh slow inputs, nothing published; raises the scan's :class:`ExporterError`."""
        try:
            return await self.scanner.scan(refresh=True)
        finally:
            await self.podresources.close()

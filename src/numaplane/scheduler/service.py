"""Process wiring of the two scheduler modes: informers, cache resync, HTTP endpoints, leader election.

* :class:`ExtenderService` — ``numaplane scheduler extender``: informers → state, the over-reserve
  resync loop, the :class:`~numaplane.scheduler.requeue.RequeueSignal` (NRT, Node and flush changes
  → pods the extender refused that now fit get a condition, which makes kube-scheduler retry them),
  and an HTTP server on ``address`` serving the extender verbs under ``prefix``, plus
  ``/metrics`` and ``/healthz``/``/readyz`` there too unless they get addresses of their own.
* :class:`SchedulerService` — ``numaplane scheduler run``: informers → state, the resync loop, the
  :class:`~numaplane.scheduler.loop.StandaloneScheduler` (only while leading when a
  :class:`~numaplane.kube.leader.LeaderElectionConfig` is given), ``/metrics`` and the probes on their
  addresses. HTTP is served by :class:`numaplane.observability.http.ProbeServer`. Informers and the cache run on standby instances too, so a new leader starts warm; a
  standby learns the leader's placements from the pod informer (:class:`SchedulerState`).

Tasks (informers, resync loop, requeue signal, scheduling or leader election) are children of one
:class:`~numaplane.supervisor.Supervisor`: the first one that fails stops the process (one
``task_failed`` log line; ``run()`` returns :data:`EXIT_TASK_FAILED`), and stopping cancels and awaits
every one of them. Probes: ``/healthz`` is 200 while no task failed; ``/readyz`` is 200 once the
informers have synced (the extender: and its arrays are warm — the emptied-node arrays that say
whether eviction could help a rejected pod are built then, not inside the first filter that rejects a
node, which at 5,000 nodes held kube-scheduler's scheduling cycle for a second or more; a standby is ready: it is healthy and waiting for the lease, as
kube-scheduler's standbys are).

``run()`` returns :data:`EXIT_OK` after :meth:`stop` and :data:`EXIT_LEADERSHIP_LOST` when the lease was
lost (the caller exits, as kube-scheduler does). Stopping while leading releases the lease, so a standby
takes over at once. ``freeze_gc=True`` (the CLI's choice: a process-wide setting) calls ``gc.freeze()``
once the informers have synced.
"""

from __future__ import annotations

import gc
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Collection, Coroutine
from typing import Any

import structlog

from numaplane.kube.clock import Clock, SystemClock
from numaplane.kube.informer import EventHandlers
from numaplane.kube.leader import LeaderElectionConfig, LeaderElector
from numaplane.kube.port import KubePort
from numaplane.limits import MAX_EXTENDER_BODY_BYTES
from numaplane.listeners import DEFAULT_ADDRESSES
from numaplane.observability.http import ProbeServer
from numaplane.resources.pod import Pod, parse_pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.decodepool import DECODE_WORKERS, DecodePool
from numaplane.scheduler.dra import ClaimAllocator
from numaplane.scheduler.extender import Extender
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.loop import StandaloneScheduler
from numaplane.scheduler.metrics import SchedulerMetrics
from numaplane.scheduler.requeue import RequeueSignal
from numaplane.scheduler.state import SchedulerState
from numaplane.supervisor import Supervisor, TaskFailed

__all__ = [
    "EXIT_LEADERSHIP_LOST",
    "EXIT_OK",
    "EXIT_TASK_FAILED",
    "ExtenderService",
    "SchedulerService",
    "default_identity",
    "resync_loop",
]

log = structlog.get_logger("numaplane.scheduler")

#: Largest request body the extender accepts (:mod:`numaplane.limits`).
MAX_BODY_BYTES = MAX_EXTENDER_BODY_BYTES

EXIT_OK = 0
EXIT_LEADERSHIP_LOST = 1
#: A supervised task failed (logged as ``task_failed``); every other task was stopped.
EXIT_TASK_FAILED = 2


def default_identity() -> str:
    """``<hostname>_<uuid>``, kube-scheduler's lease holder identity format."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


async def resync_loop(
    state: SchedulerState, clock: Clock, metrics: SchedulerMetrics, on_flush: Callable[[tuple[str, ...]], None]
) -> None:
    """Tick the state until cancelled: every second (the staleness gate's resolution), and the
    over-reserve cache at a quarter of its period when that is shorter."""
    interval = 1.0
    if state.config.cache_mode == "overreserve":
        interval = max(0.02, min(1.0, state.config.cache.resync_period_seconds / 4))
    while True:
        await clock.sleep(interval)
        try:
            flushed = state.tick(clock.monotonic())
        except Exception:
            log.exception("cache resync failed")
            continue
        if flushed:
            metrics.flushed_nodes(len(flushed))
            log.info("cache resynced", nodes=list(flushed), generation=getattr(state.cache, "generation", None))
            try:
                on_flush(flushed)
            except Exception:
                log.exception("handling a cache resync failed")


class _Process:
    """What both modes share: state, informers, metrics, tasks, stop signal."""

    mode = ""

    def __init__(
        self,
        kube: KubePort,
        config: SchedulerConfig,
        *,
        clock: Clock | None = None,
        metrics: SchedulerMetrics | None,
        freeze_gc: bool = False,
    ) -> None:
        self.kube = kube
        self.freeze_gc = freeze_gc
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.metrics = metrics or SchedulerMetrics()
        self.state = SchedulerState(config)
        self.dra = ClaimAllocator(kube, clock=self.clock) if config.dra else None
        self.informers = ClusterInformers(
            kube, self.state, clock=self.clock, extra=self.dra.informers if self.dra is not None else ()
        )
        self.http = ProbeServer(
            self.metrics.registry, liveness=self._liveness, readiness=self._readiness, max_body_bytes=MAX_BODY_BYTES
        )
        self._tasks = Supervisor(f"scheduler-{self.mode}")
        self.metrics.info.labels(mode=self.mode, cache=config.cache_mode, scoring_strategy=config.strategy.type).set(1)

    @property
    def ports(self) -> dict[str, int]:
        """Bound ports by endpoint group (``extender``, ``metrics``, ``health``)."""
        return self.http.ports

    @property
    def ready(self) -> bool:
        return self.informers.synced

    def stop(self) -> None:
        """Ask :meth:`run` to return (safe from a signal handler)."""
        self._tasks.stop()

    def _liveness(self) -> tuple[bool, dict[str, Any]]:
        dead = [name for name, state in self._tasks.dead().items() if state.startswith("failed")]
        return not dead, {"failedTasks": dead}

    def _readiness(self) -> tuple[bool, dict[str, Any]]:
        return self.ready, {"informers": self.informers.status()}

    async def _freeze_gc_after_sync(self) -> None:
        # Move the start-up heap (caches of every Node, NRT and Pod) out of the collector's reach, so a
        # full collection triggered by a large request does not rescan it (cuts the Nodes-mode p99).
        # Safe for JSON documents: they hold no reference cycles, refcounting still frees them.
        await self.informers.wait_for_sync()
        gc.collect()
        gc.freeze()
        log.info("gc frozen after sync", frozen_objects=gc.get_freeze_count())

    async def _start_common(self) -> None:
        await self._tasks.start()
        for informer in self.informers.all:
            self._tasks.spawn(informer.run(), f"informer-{informer.name}")
        self._tasks.spawn(resync_loop(self.state, self.clock, self.metrics, self._on_flush), "resync")
        if self.freeze_gc:
            self._tasks.spawn(self._freeze_gc_after_sync(), "gc-freeze")

    async def _serve_until_stopped(self) -> int:
        """Wait for :meth:`stop` or a failing task; then stop every task and the HTTP endpoints."""
        try:
            await self._tasks.wait()
        except TaskFailed:
            return EXIT_TASK_FAILED
        finally:
            await self._cleanup()
        return EXIT_OK

    async def _cleanup(self) -> None:
        await self._tasks.close()
        await self.http.stop()

    def _on_flush(self, nodes: tuple[str, ...]) -> None:
        del nodes

    async def close(self) -> None:
        """Stop everything :meth:`start` started (for callers that use ``start`` without ``run``)."""
        await self._cleanup()


#: Any pod: the warm-up asks the emptied-node arrays about it only to build them.
_WARM_UP_POD: Pod = parse_pod({"metadata": {"name": "numaplane-warm-up"}, "spec": {"containers": []}})


class ExtenderService(_Process):
    """``numaplane scheduler extender`` (module docstring)."""

    mode = "extender"

    def __init__(
        self,
        kube: KubePort,
        config: SchedulerConfig,
        *,
        address: str = "127.0.0.1:8888",
        prefix: str = "",
        metrics_address: str | None = None,
        health_address: str | None = None,
        clock: Clock | None = None,
        metrics: SchedulerMetrics | None = None,
        freeze_gc: bool = False,
        tls: ssl.SSLContext | None = None,
        client_subjects: Collection[str] | None = None,
        decode_workers: int = DECODE_WORKERS,
        start_decode_workers: bool = False,
    ) -> None:
        super().__init__(kube, config, clock=clock, metrics=metrics, freeze_gc=freeze_gc)
        #: Worker processes for large bodies (0: all decoding in process); started with :meth:`start`
        #: when ``start_decode_workers`` (the CLI), else at the first large body.
        self.decode_pool = DecodePool(decode_workers) if decode_workers > 0 else None
        self.start_decode_workers = start_decode_workers
        self.tls = tls
        self.client_subjects = client_subjects
        self.address = address
        self.prefix = prefix
        self.metrics_address = metrics_address
        self.health_address = health_address
        self.requeue = RequeueSignal(self.state, kube, clock=self.clock, metrics=self.metrics)
        self.extender = Extender(
            self.state,
            kube,
            self.metrics,
            ready=lambda: self.ready,
            on_refused=self.requeue.refused,
            dra=self.dra,
            decode_pool=self.decode_pool,
        )
        changed = self.requeue.object_changed
        # an NRT deleted (its node left the stack) ends a stale node's refusal too
        self.informers.nrts.add_handler(EventHandlers(on_add=changed, on_update=changed, on_delete=changed))
        self.informers.nodes.add_handler(EventHandlers(on_add=changed, on_update=changed))

        self._warm = False

    @property
    def ready(self) -> bool:
        """Informers synced and the arrays warm (module docstring)."""
        return self._warm and self.informers.synced

    async def _warm_after_sync(self) -> None:
        """Once the informers have synced, build the arrays the first filter that rejects a node would
        build (the emptied-node arrays of :meth:`Cycle.emptied_evaluation`); then the extender is ready."""
        await self.informers.wait_for_sync()
        if self.state.cycle.cache is not None:
            started = time.perf_counter()
            self.state.cycle.emptied_evaluation(_WARM_UP_POD)
            log.info("extender arrays warm", nodes=len(self.state.cycle.names), seconds=time.perf_counter() - started)
        self._warm = True

    def _on_flush(self, nodes: tuple[str, ...]) -> None:
        self.requeue.changed(nodes)

    async def start(self) -> None:
        """Start informers, the resync loop and the HTTP server; returns once listening."""
        if self.decode_pool is not None and self.start_decode_workers:
            await self.decode_pool.start()
        await self._start_common()
        self._tasks.spawn(self._warm_after_sync(), "warm-up")
        self._tasks.spawn(self.requeue.run(), "requeue")
        self.http.add_routes("extender", self.extender.add_routes(self.prefix))
        await self.http.start(
            self.metrics_address or self.address,
            self.health_address or self.address,
            tls={"extender": self.tls} if self.tls is not None else None,
            client_subjects={"extender": self.client_subjects} if self.client_subjects is not None else None,
            extender=self.address,
        )
        log.info("extender listening", port=self.ports.get("extender"), prefix=self.prefix, **self.config.describe())

    async def run(self) -> int:
        """Serve until :meth:`stop` (or a failing task: :data:`EXIT_TASK_FAILED`)."""
        await self.start()
        return await self._serve_until_stopped()

    async def _cleanup(self) -> None:
        try:
            await super()._cleanup()
        finally:
            if self.decode_pool is not None:
                await self.decode_pool.close()


class SchedulerService(_Process):
    """``numaplane scheduler run`` (module docstring)."""

    mode = "standalone"

    def __init__(
        self,
        kube: KubePort,
        config: SchedulerConfig,
        *,
        leader_election: LeaderElectionConfig | None = None,
        metrics_address: str | None = DEFAULT_ADDRESSES["scheduler"][0],
        health_address: str | None = DEFAULT_ADDRESSES["scheduler"][1],
        clock: Clock | None = None,
        metrics: SchedulerMetrics | None = None,
        freeze_gc: bool = False,
    ) -> None:
        super().__init__(kube, config, clock=clock, metrics=metrics, freeze_gc=freeze_gc)
        self.leader_election = leader_election
        self.metrics_address = metrics_address
        self.health_address = health_address
        self.scheduler = StandaloneScheduler(
            kube, self.state, self.informers, metrics=self.metrics, clock=self.clock, dra=self.dra
        )
        self.elector: LeaderElector | None = None
        self.leading = False
        self._work_ended = False

    def _on_flush(self, nodes: tuple[str, ...]) -> None:
        self.scheduler.cluster_changed("cache resync")

    def _readiness(self) -> tuple[bool, dict[str, Any]]:
        ok, details = super()._readiness()
        details["leading"] = self.leading
        return ok, details

    async def _lead(self) -> None:
        self.leading = True
        self.metrics.leader.set(1)
        log.info("started leading" if self.leader_election else "scheduling without leader election")
        try:
            await self.scheduler.run()
        finally:
            self.leading = False
            self.metrics.leader.set(0)

    async def start(self) -> None:
        """Start informers, the resync loop and the HTTP endpoints."""
        await self._start_common()
        await self.http.start(self.metrics_address, self.health_address)
        log.info("scheduler started", ports=self.ports, **self.config.describe())

    async def run(self) -> int:
        """Schedule (while leading) until :meth:`stop` or the loss of the lease."""
        await self.start()
        if self.leader_election is None:
            self._tasks.spawn(self._until_done(self._lead()), "schedule")
        else:
            self.elector = LeaderElector(
                self.kube,
                self.leader_election,
                clock=self.clock,
                on_started_leading=self._lead,
                on_new_leader=lambda holder: log.info("leader observed", leader=holder),
            )
            self._tasks.spawn(self._until_done(self.elector.run()), "leader-election")
        code = await self._serve_until_stopped()
        if code == EXIT_OK and self._work_ended and self.leader_election is not None:
            log.error("leader election lost")
            return EXIT_LEADERSHIP_LOST
        return code

    async def _until_done(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work``; when it returns (the lease was lost) stop the process."""
        await work
        self._work_ended = True
        self._tasks.stop()

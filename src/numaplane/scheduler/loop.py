"""``numaplane scheduler run``: a standalone secondary scheduler for pods whose ``schedulerName`` is ours.

One scheduling cycle per pod, one pod at a time (like kube-scheduler's scheduling cycle):

1. take a key off the :class:`~numaplane.scheduler.queue.SchedulingQueue`; skip pods that are gone,
   bound, terminating, gated (``spec.schedulingGates``), not ours, or already assumed (binding in flight);
2. decide (:func:`~numaplane.scheduler.decision.decide`): the basic predicates on every node
   (unschedulable nodes, ``nodeName``, taints, ``nodeSelector`` / required node affinity, resources
   against allocatable minus bound and assumed pods), the NUMA filter and score on the nodes that
   passed, and the node the shared selection rule picks;
3. the reasons of the nodes that failed are worked out only when they are reported;
4. no node left → ``FailedScheduling`` Warning Event with kube-scheduler's aggregated message
   (:func:`~numaplane.scheduler.decision.fit_error_message`: ``0/5 nodes are available: 2 Insufficient cpu, 3 cannot align
   container.``), the pod condition ``PodScheduled=False`` reason ``Unschedulable`` with that message
   (written when it changes; cluster-autoscaler and ``kubectl describe`` read it), and the pod waits
   in the unschedulable queue. An identical FailedScheduling of the same pod is aggregated into the
   previous Event object (``count``, ``lastTimestamp``; written at most every 30 s), not a new one;
5. otherwise the pod is *assumed* there (cache Reserve + usage) and its binding runs in the background
   (at most ``bind_concurrency`` at once) while the next pod is scheduled. A successful binding is followed by
   PostBind and a ``Scheduled`` Normal Event; a failed one by Unreserve and a retry after backoff.

A pod that uses DRA ResourceClaims (``spec.resourceClaims``): with ``--dra`` the scheduler allocates
the supported subset of claims itself (:mod:`numaplane.scheduler.dra`): among the cycle's feasible
nodes, best first, the first whose zones hold the pod's CPUs and memory together with free matching
devices; it writes the claims' allocation and reservation, then binds (a failed binding clears
them). Claims it does not support, or no node with devices, leave the pod pending with a
``FailedScheduling`` Warning Event naming why. Without ``--dra`` such a pod is never bound (binding
it would leave the kubelet a pod whose claims nobody allocated): it stays pending with an event naming
its claims (:func:`claims_message`), retried from the unschedulable queue like any other.

Structured logs explain each decision (``pod``, ``podUID``, ``node``, scores, reasons).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from numaplane.kube.clock import Clock, SystemClock, format_time
from numaplane.kube.conditions import apply_pod_condition, condition, find_condition
from numaplane.kube.errors import Conflict, KubeError, NotFound
from numaplane.kube.events import make_event
from numaplane.kube.informer import EventHandlers
from numaplane.kube.port import JsonObj, KubePort
from numaplane.kube.resources import EVENT
from numaplane.kube.worker import run_worker
from numaplane.policy.dra import DRAError
from numaplane.resources.pod import Pod
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.decision import Decision, decide, fit_error_message
from numaplane.scheduler.dra import ClaimAllocator, Placement, PodClaimDemand
from numaplane.scheduler.informers import ClusterInformers
from numaplane.scheduler.metrics import SchedulerMetrics
from numaplane.scheduler.queue import SchedulingQueue
from numaplane.scheduler.records import TERMINAL_PHASES, pod_key
from numaplane.scheduler.state import SchedulerState

__all__ = ["StandaloneScheduler"]

log = structlog.get_logger("numaplane.scheduler")

#: Field manager of the scheduler's writes to ``pods/status``.
FIELD_MANAGER = "numaplane-scheduler"
#: A repeated identical FailedScheduling event of a pod updates its Event object at most this often.
EVENT_REPEAT_WRITE_SECONDS = 30.0
#: Pods whose last FailedScheduling event is remembered (oldest forgotten first).
MAX_TRACKED_EVENTS = 50_000
#: Event writes in flight at once; the others wait their turn in the process. Unbounded, a burst of
#: bindings queues hundreds of requests in the HTTP client's connection pool, whose bookkeeping per
#: request grows with that queue (found by profiling ``bench/live_schedulers.py``).
EVENT_CONCURRENCY = 4


@dataclass
class _LastEvent:
    """The last FailedScheduling Event object posted for a pod, for aggregation."""

    uid: str
    message: str
    name: str
    namespace: str
    count: int
    written_at: float


def _pending_and_ours(pod: Pod, state: SchedulerState) -> bool:
    raw = pod.raw
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    return (
        state.is_ours(pod)
        and not pod.node_name
        and pod.phase not in TERMINAL_PHASES
        and not meta.get("deletionTimestamp")
        and not spec.get("schedulingGates")
    )


def claims_message(pod: Pod) -> str:
    """Why ``pod`` is not scheduled here, if it uses ResourceClaims (``""``: it uses none)."""
    entries = (pod.raw.get("spec") or {}).get("resourceClaims") or []
    if not isinstance(entries, list) or not entries:
        return ""
    names = [str(e.get("name", "?")) if isinstance(e, dict) else "?" for e in entries[:8]]
    more = f" and {len(entries) - 8} more" if len(entries) > 8 else ""
    return (
        f"pod uses ResourceClaims ({', '.join(names)}{more}) and numaplane scheduler run allocates DRA claims "
        "only with --dra: start it with --dra, or schedule the pod with kube-scheduler (DynamicResources "
        "plugin) and the numaplane extender"
    )


class StandaloneScheduler:
    """The scheduling loop of one instance (module docstring). :meth:`run` schedules until cancelled."""

    def __init__(
        self,
        kube: KubePort,
        state: SchedulerState,
        informers: ClusterInformers,
        *,
        metrics: SchedulerMetrics | None = None,
        clock: Clock | None = None,
        dra: ClaimAllocator | None = None,
    ) -> None:
        self.kube = kube
        self.dra = dra
        self.state = state
        self.config: SchedulerConfig = state.config
        self.informers = informers
        self.metrics = metrics or SchedulerMetrics()
        self.clock: Clock = clock or SystemClock()
        cfg = self.config
        self.queue = SchedulingQueue(
            initial_backoff_seconds=cfg.backoff_initial_seconds,
            max_backoff_seconds=cfg.backoff_max_seconds,
            max_unschedulable_seconds=cfg.max_unschedulable_seconds,
            clock=self.clock,
        )
        for informer in dra.informers if dra is not None else ():
            # a claim deallocated, a slice or class added: pods waiting for devices may fit now
            informer.add_handler(
                EventHandlers(
                    on_add=lambda obj: self.cluster_changed("dra object added"),
                    on_update=lambda old, new: self.cluster_changed("dra object updated"),
                    on_delete=lambda obj: self.cluster_changed("dra object deleted"),
                )
            )
        self.metrics.watch_queues({q: functools.partial(self._queue_size, q) for q in self.queue.sizes()})
        self._bind_slots = asyncio.Semaphore(cfg.bind_concurrency)
        self._event_slots = asyncio.Semaphore(EVENT_CONCURRENCY)
        self._background: set[asyncio.Task[None]] = set()
        self._last_events: dict[str, _LastEvent] = {}
        informers.pods.add_handler(
            EventHandlers(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        )
        node_events = EventHandlers(
            on_add=lambda obj: self.cluster_changed("node added"),
            on_update=self._node_updated,
            on_delete=None,
        )
        informers.nodes.add_handler(node_events)
        informers.nrts.add_handler(
            EventHandlers(
                on_add=lambda obj: self.cluster_changed("NodeResourceTopology added"),
                on_update=lambda old, new: self.cluster_changed("NodeResourceTopology updated"),
                # a deleted NRT (the operator removes those of nodes that left the stack) ends a
                # stale node's refusal too: its pods are judged without NUMA data, as upstream
                on_delete=lambda obj: self.cluster_changed("NodeResourceTopology deleted"),
            )
        )

    def _queue_size(self, queue: str) -> float:
        return float(self.queue.sizes()[queue])

    # --- informer events ---------------------------------------------------------------------------

    def _consider(self, obj: JsonObj) -> None:
        self._consider_key(pod_key(obj))

    def _consider_key(self, key: str) -> None:
        pod = self.state.pods.get(key)
        if pod is not None and _pending_and_ours(pod, self.state) and not self.state.usage.is_assumed(key):
            self.queue.add(key)

    def _pod_added(self, obj: JsonObj) -> None:
        self._consider(obj)
        self._pod_left_node(None, obj)

    def _pod_updated(self, old: JsonObj, new: JsonObj) -> None:
        self._consider(new)
        self._pod_left_node(old, new)

    def _pod_deleted(self, obj: JsonObj) -> None:
        self.queue.forget(pod_key(obj))
        self._last_events.pop(pod_key(obj), None)
        if (obj.get("spec") or {}).get("nodeName"):
            self.cluster_changed("pod deleted")

    def _pod_left_node(self, old: JsonObj | None, new: JsonObj) -> None:
        if old is None:
            return
        was = (old.get("status") or {}).get("phase")
        now = (new.get("status") or {}).get("phase")
        if (new.get("spec") or {}).get("nodeName") and now in TERMINAL_PHASES and was not in TERMINAL_PHASES:
            self.cluster_changed("pod finished")

    def _node_updated(self, old: JsonObj, new: JsonObj) -> None:
        def relevant(doc: JsonObj) -> tuple[Any, ...]:
            meta = doc.get("metadata") or {}
            status = doc.get("status") or {}
            return (meta.get("labels"), doc.get("spec"), status.get("allocatable"), status.get("capacity"))

        if relevant(old) != relevant(new):
            self.cluster_changed("node updated")

    def cluster_changed(self, why: str) -> None:
        """Something that may make unschedulable pods fit happened: move them to active (after backoff)."""
        moved = self.queue.move_all()
        if moved:
            log.debug("unschedulable pods moved", count=moved, trigger=why)

    # --- one cycle ---------------------------------------------------------------------------------

    def decide(self, pod: Pod) -> Decision:
        """This instance's cycle for ``pod`` (:func:`~numaplane.scheduler.decision.decide`)."""
        return decide(self.state, pod)

    async def schedule_one(self, key: str) -> None:
        """One scheduling cycle for ``key`` (module docstring)."""
        pod = self.state.pods.get(key)
        if pod is None or not _pending_and_ours(pod, self.state) or self.state.usage.is_assumed(key):
            self.queue.forget(key)
            return
        started = time.perf_counter()
        structlog.contextvars.bind_contextvars(pod=key, podUID=pod.uid)
        try:
            unsupported = claims_message(pod)
            demand: PodClaimDemand | None = None
            if unsupported and self.dra is not None:
                try:
                    demand, unsupported = self.dra.demand(pod), ""
                except DRAError as exc:
                    unsupported = f"numaplane scheduler run does not allocate this pod's claims: {exc}"
            if unsupported:
                self._left_pending(pod, unsupported, started)
                return
            decision = self.decide(pod)
            if decision.node is None:
                self._unschedulable(pod, decision, started)
                return
            node = decision.node
            placement: Placement | None = None
            if demand is not None and self.dra is not None:
                order = sorted(decision.scores, key=lambda n: (n != node, -decision.scores[n], n))
                views = {n: self.state.gate.get(n, pod).topology for n in order}
                placement, why = self.dra.place(pod, demand, order, views)
                if placement is None:
                    reasons = {**decision.reasons, **{n: [r] for n, r in why.items()}}
                    self._left_pending(pod, fit_error_message(decision.total, reasons), started)
                    return
                node = placement.node
            if not self.state.assume(pod, node):  # a binding of this pod is already in flight or done
                log.warning("pod already reserved; retrying later", node=node)
                self.queue.error(key)
                return
            log.info(
                "assumed",
                node=node,
                score=decision.score if node == decision.node else decision.scores[node],
                feasible=decision.feasible,
                rejected=decision.rejected,
                flow="schedule",
            )
            self._spawn_background(self._bind(pod, node, started, demand, placement))
        finally:
            structlog.contextvars.unbind_contextvars("pod", "podUID")

    def _unschedulable(self, pod: Pod, decision: Decision, started: float) -> None:
        message = decision.message
        delay = self.queue.unschedulable(pod.key)
        self.metrics.attempt_seconds.labels(result="unschedulable").observe(time.perf_counter() - started)
        log.info("unschedulable", reasons=decision.reasons, message=message, backoff_seconds=delay)
        self._post_event(pod, "FailedScheduling", message, "Warning")
        self._mark_unschedulable(pod, message)

    def _left_pending(self, pod: Pod, message: str, started: float) -> None:
        delay = self.queue.unschedulable(pod.key)
        self.metrics.attempt_seconds.labels(result="unschedulable").observe(time.perf_counter() - started)
        log.info("unschedulable", message=message, backoff_seconds=delay)
        self._post_event(pod, "FailedScheduling", message, "Warning")
        self._mark_unschedulable(pod, message)

    def _mark_unschedulable(self, pod: Pod, message: str) -> None:
        """Set ``PodScheduled=False`` (reason ``Unschedulable``) as kube-scheduler does — what
        ``kubectl describe`` and cluster-autoscaler read — unless the pod already says exactly that."""
        current = find_condition((pod.raw.get("status") or {}).get("conditions"), "PodScheduled")
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            "False",
            "Unschedulable",
            message,
        ):
            return
        wanted = condition(
            "PodScheduled", "False", "Unschedulable", message, previous=current, now=format_time(self.clock.now())
        )

        async def patch() -> None:
            try:
                await apply_pod_condition(self.kube, pod, wanted, field_manager=FIELD_MANAGER)
            except KubeError as exc:
                log.info("PodScheduled condition not recorded", pod=pod.key, error=str(exc))

        self._spawn_background(patch())

    async def _bind(
        self,
        pod: Pod,
        node: str,
        started: float,
        demand: PodClaimDemand | None = None,
        placement: Placement | None = None,
    ) -> None:
        key = pod.key
        async with self._bind_slots:
            try:
                if self.dra is not None and demand is not None and placement is not None:
                    try:
                        await self.dra.write(pod, demand, placement)
                    except KubeError:
                        await self._release(pod, demand)
                        raise
                    log.info(
                        "claims allocated", pod=key, node=node, zone=placement.zone, claims=sorted(placement.devices)
                    )
                try:
                    await self.kube.bind(pod.name, node, namespace=pod.namespace, pod_uid=pod.uid or None)
                except KubeError:
                    if demand is not None:
                        await self._release(pod, demand)
                    raise
            except (NotFound, Conflict) as exc:
                # Gone, recreated or bound by someone else: nothing to retry for this object.
                self.state.forget(pod, node)
                self.metrics.binds.labels(result="error").inc()
                self.metrics.attempt_seconds.labels(result="error").observe(time.perf_counter() - started)
                log.warning("binding refused", pod=key, node=node, error=str(exc))
                self.queue.forget(key)
                self._consider_key(key)
                return
            except KubeError as exc:
                self.state.forget(pod, node)
                self.metrics.binds.labels(result="error").inc()
                self.metrics.attempt_seconds.labels(result="error").observe(time.perf_counter() - started)
                delay = self.queue.error(key)
                log.warning("binding failed", pod=key, node=node, error=str(exc), backoff_seconds=delay)
                return
        self.state.bound(pod, node)
        self.queue.forget(key)
        self.metrics.binds.labels(result="success").inc()
        self.metrics.attempt_seconds.labels(result="scheduled").observe(time.perf_counter() - started)
        log.info("bound", pod=key, podUID=pod.uid, node=node, flow="bind")
        self._post_event(pod, "Scheduled", f"Successfully assigned {key} to {node}", "Normal")

    async def _release(self, pod: Pod, demand: PodClaimDemand) -> None:
        if self.dra is None:
            return
        try:
            await self.dra.release(pod, demand)
        except KubeError as exc:
            log.warning("claims not released after a failed binding", pod=pod.key, error=str(exc))

    def _repeat(self, pod: Pod, reason: str, message: str) -> bool:
        """Whether this event repeats the pod's last one; then it is aggregated into that Event object
        (``count``, ``lastTimestamp``), written at most every :data:`EVENT_REPEAT_WRITE_SECONDS`."""
        last = self._last_events.get(pod.key)
        if reason != "FailedScheduling" or last is None or (last.uid, last.message) != (pod.uid, message):
            return False
        last.count += 1
        now = self.clock.monotonic()
        if now - last.written_at < EVENT_REPEAT_WRITE_SECONDS:
            return True
        last.written_at = now
        patch = {"count": last.count, "lastTimestamp": format_time(self.clock.now())}

        async def update() -> None:
            try:
                await self.kube.patch(EVENT, last.name, patch, namespace=last.namespace)
            except NotFound:  # expired (the API server's event TTL): the next repeat creates a new one
                self._last_events.pop(pod.key, None)
            except KubeError as exc:
                log.info("event not updated", reason=reason, pod=pod.key, error=str(exc))

        self._spawn_background(update())
        return True

    def _spawn_background(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _post_event(self, pod: Pod, reason: str, message: str, kind: Literal["Normal", "Warning"]) -> None:
        if self._repeat(pod, reason, message):
            return
        if reason == "FailedScheduling":
            if len(self._last_events) >= MAX_TRACKED_EVENTS:
                self._last_events.pop(next(iter(self._last_events)))
        else:
            self._last_events.pop(pod.key, None)
        involved = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(pod.raw.get("metadata") or {})}
        event = make_event(
            involved,
            reason=reason,
            message=message,
            now=self.clock.now(),
            event_type=kind,
            component=pod.scheduler_name,
            action="Scheduling" if reason == "FailedScheduling" else "Binding",
        )
        self.metrics.events.labels(reason=reason).inc()
        if reason == "FailedScheduling":
            meta = event["metadata"]
            self._last_events[pod.key] = _LastEvent(
                pod.uid, message, meta["name"], meta["namespace"], 1, self.clock.monotonic()
            )

        async def post() -> None:
            try:
                async with self._event_slots:
                    await self.kube.create_event(event)
            except KubeError as exc:
                log.info("event not recorded", reason=reason, pod=pod.key, error=str(exc))

        self._spawn_background(post())

    # --- run ---------------------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        interval = max(0.05, min(5.0, self.config.max_unschedulable_seconds / 4))
        while True:
            await self.clock.sleep(interval)
            self.queue.flush_unschedulable()

    async def run(self) -> None:
        """Schedule pods until cancelled (waits for the informers' first sync first)."""
        await self.informers.wait_for_sync()
        for obj in self.informers.pods.store.list_objects():
            self._consider(obj)
        log.info("scheduling", pending=self.queue.sizes())
        flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        try:
            await run_worker(self.queue, self.schedule_one, self._cycle_failed)
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            await self.drain()

    def _cycle_failed(self, key: str, exc: Exception) -> None:
        """Called inside the worker's ``except`` block: the pod goes back with the queue's error backoff."""
        log.exception("scheduling cycle failed", pod=key)
        self.queue.error(key)

    async def drain(self) -> None:
        """Cancel in-flight bindings and event posts (at shutdown or when leadership is lost)."""
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

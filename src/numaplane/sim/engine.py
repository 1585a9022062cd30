"""The discrete-event engine: one scheduler over one cluster, the same workload for every scheduler.

Events (time in simulated seconds; ties in insertion order):

* ``arrive``   a pod enters the scheduling queue and is tried at once;
* ``retry``    pending pods are tried again (after a departure or an NRT refresh freed or revealed
               capacity, and every ``retry_interval_s``);
* ``depart``   a running pod ends; its node's resource manager releases it;
* ``refresh``  a tenth of the nodes republish their NRT if their allocations changed (a periodic
               exporter with period ``refresh_period_s``, nodes staggered);
* ``resync``   the over-reserve cache's periodic resync (``tick``);
* ``recreate`` a pod rejected by its node's admission is recreated by its controller;
* ``sample``   metrics are sampled.

A scheduling attempt is one decision of a :class:`~numaplane.placement.cycle.Cycle`, the class the
standalone scheduler drives too (:mod:`numaplane.placement.cycle`): NodeResourcesFit and, for a
NUMA-aware scheduler, the NUMA filter through the real cache (:mod:`numaplane.placement.caches.cache`) and
the vectorised pipeline, searched following ``percentageOfNodesToScore``; the highest
``numa_weight * NUMA score + fit_weight * LeastAllocated score`` wins (the scheduler's default weights,
1 and 1), the lowest node name on ties; the ``default`` scheduler (kube-scheduler without the NUMA
plugin) takes the highest LeastAllocated score, the first in search order on ties (kube-scheduler
picks among ties at random). Binding calls
the node's :class:`~numaplane.policy.manager.ResourceManager` ``admit`` at once (the kubelet's
admission); a rejection is counted with its reason and the pod is recreated after
``recreate_delay_s``, at most ``max_recreates`` times. NRTs are produced by
:class:`numaplane.nrt.from_manager.NRTPublisher` (equal to ``node_nrt``) from the managers' real state. The engine has no
placement or admission logic of its own.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from numaplane.nrt.from_manager import NRTPublisher
from numaplane.placement.caches.cache import make_cache
from numaplane.placement.caches.cachebase import NRTCache
from numaplane.placement.caches.overreserve import OverReserveConfig
from numaplane.placement.cycle import Cycle, NumaSetup, SelectionRules
from numaplane.placement.model.effective import effective_placement, judged_policy
from numaplane.placement.model.node import node_info
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import Pod
from numaplane.sim.cluster import NodeTemplate, SimNode, instantiate
from numaplane.sim.spec import RunResult, SchedulerSpec, SimConfig
from numaplane.sim.workload import PodArrival

__all__ = ["Run", "cyclic_gc_paused", "run_scheduler"]

NUMA_SCHEDULER_NAME = "topo-aware-scheduler"
REFRESH_BUCKETS = 10


@dataclass
class _PodState:
    arrival: PodArrival
    pod: Pod
    recreates: int = 0
    node: int | None = None
    failures: int = 0
    next_try: float = 0.0
    vector: np.ndarray[Any, Any] | None = None  # NodeResourcesFit request vector while bound


class Run:
    """One scheduler's run over fresh nodes built from ``templates`` (or the prepared ``nodes``, one per
    template, e.g. already holding pods): :meth:`run` processes the events (module docstring)."""

    def __init__(
        self,
        spec: SchedulerSpec,
        templates: Sequence[NodeTemplate],
        arrivals: Sequence[PodArrival],
        config: SimConfig,
        progress: Callable[[float], None] | None,
        nodes: Sequence[SimNode] | None = None,
    ) -> None:
        self.spec = spec
        self.config = config
        self.progress = progress
        self.nodes: list[SimNode] = list(nodes) if nodes is not None else [instantiate(t) for t in templates]
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.arrivals = arrivals
        self.result = RunResult(spec.name, pods=len(arrivals))
        self.queue: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.pending: list[_PodState] = []
        self.retry_scheduled = False
        self.cache: NRTCache | None = None
        self.publishers: dict[str, NRTPublisher] = {}
        last = max((a.arrival_s for a in arrivals), default=0.0)
        self.end = config.duration_s if config.duration_s is not None else last + config.drain_s
        numa: NumaSetup | None = None
        if spec.numa_aware:
            if spec.cache == "overreserve":
                self.cache = make_cache(
                    resync_period_seconds=config.resync_period_s,
                    config=OverReserveConfig(resync_period_seconds=config.resync_period_s),
                )
            else:
                self.cache = make_cache(discard_reserved_nodes=spec.cache == "discard-reserved")
            # as many zone slots as the largest machine has NUMA nodes (the arrays grow if needed)
            zones = max((len(t.topology.numa_nodes) for t in templates), default=1)
            numa = NumaSetup(self.cache, ScoringStrategy(spec.strategy), zones=zones)
        # NUMA-aware: the standalone scheduler's rule; default: kube-scheduler's (random ties: search order)
        rules = SelectionRules(
            percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
            tie_break="name" if spec.numa_aware else "search-order",
        )
        self.cycle = Cycle(
            [n.name for n in self.nodes],
            [n.allocatable for n in self.nodes],
            {n.name: node_info(n.node_doc) for n in self.nodes},  # parsed once, reused by every sync
            rules,
            numa,
        )
        self.fit = self.cycle.fit
        self._util_acc = 0.0
        self._frag_acc = 0.0
        self._samples = 0
        self._zone_acc: dict[str, list[float]] = {}

    # -- event plumbing -------------------------------------------------------------------------------
    def push(self, t: float, kind: str, payload: Any = None) -> None:
        heapq.heappush(self.queue, (t, next(self.seq), kind, payload))

    def run(self) -> RunResult:
        started = time.perf_counter()
        for a in self.arrivals:
            pod = a.pod
            if self.spec.numa_aware:
                pod = pod.with_changes(scheduler_name=NUMA_SCHEDULER_NAME)
            self.push(a.arrival_s, "arrive", _PodState(a, pod))
        if self.cache is not None:
            for node in self.nodes:
                self._publish(node)
            step = self.config.refresh_period_s / REFRESH_BUCKETS
            t, k = step, 0
            while t <= self.end:
                self.push(t, "refresh", k % REFRESH_BUCKETS)
                t += step
                k += 1
            if self.spec.cache == "overreserve":
                t = self.config.resync_period_s
                while t <= self.end:
                    self.push(t, "resync")
                    t += self.config.resync_period_s
        t = self.config.retry_interval_s
        while t <= self.end:
            self.push(t, "retry")
            t += self.config.retry_interval_s
        samples = max(1, self.config.samples)
        for i in range(1, samples + 1):
            self.push(self.end * i / samples, "sample")
        done = 0
        while self.queue:
            now, _, kind, payload = heapq.heappop(self.queue)
            if now > self.end:
                break
            getattr(self, f"_on_{kind}")(now, payload)
            done += 1
            if self.progress is not None and done % 256 == 0:
                self.progress(min(1.0, now / self.end if self.end else 1.0))
        self.result.events = done
        self.result.pending = len(self.pending)
        if self.spec.numa_aware:
            for state in self.pending:
                invalid = effective_placement(state.pod).invalid
                if invalid is not None:
                    self.result.pending_invalid += 1
                    self.result.messages.setdefault("InvalidPreference", invalid)
        if self._samples:
            self.result.cpu_utilisation = self._util_acc / self._samples
            self.result.fragmentation = self._frag_acc / self._samples
            self.result.zone_utilisation = {k: [v / self._samples for v in vals] for k, vals in self._zone_acc.items()}
        self.result.wall_seconds = time.perf_counter() - started
        if self.progress is not None:
            self.progress(1.0)
        return self.result

    # -- events ---------------------------------------------------------------------------------------
    def _on_arrive(self, now: float, state: _PodState) -> None:
        if not self._try(now, state):
            self.pending.append(state)

    def _on_recreate(self, now: float, state: _PodState) -> None:
        self._on_arrive(now, state)

    def _on_retry(self, now: float, _: Any) -> None:
        self.retry_scheduled = False
        waiting, self.pending = self.pending, []
        for state in waiting:
            if state.next_try > now or not self._try(now, state):
                self.pending.append(state)

    def _schedule_retry(self, now: float) -> None:
        if self.pending and not self.retry_scheduled:
            self.retry_scheduled = True
            self.push(now, "retry")

    def _on_depart(self, now: float, state: _PodState) -> None:
        assert state.node is not None
        node = self.nodes[state.node]
        node.manager.remove(state.pod.uid)
        node.bound.pop(state.pod.uid, None)
        assert state.vector is not None
        self.fit.add_vector(state.node, state.vector, -1)
        node.dirty = True
        if self.cache is not None:
            self.cache.pod_deleted(state.pod.with_changes(node_name=node.name, phase="Succeeded"))
        self._schedule_retry(now)

    def _on_refresh(self, now: float, bucket: int) -> None:
        published = False
        for i in range(bucket, len(self.nodes), REFRESH_BUCKETS):
            node = self.nodes[i]
            if node.dirty:
                self._publish(node)
                published = True
        if published:
            self._schedule_retry(now)

    def _on_resync(self, now: float, _: Any) -> None:
        assert self.cache is not None
        self.cache.tick(now)

    def _on_sample(self, now: float, _: Any) -> None:
        self._samples += 1
        util = self.fit.cpu_used_fraction()
        self._util_acc += util
        free_total = 0
        free_fragmented = 0
        for node in self.nodes:
            available = node.manager.cpu.available()
            allocatable = node.manager.cpu.allocatable()
            row = self._zone_acc.setdefault(node.name, [0.0] * len(allocatable))
            for j, (numa, res) in enumerate(sorted(allocatable.items())):
                cap = res.get("cpu", 0)
                free = available.get(numa, {}).get("cpu", 0)
                free_total += free
                if free < self.config.fragmentation_cpus:
                    free_fragmented += free
                if self.config.sample_zones and j < len(row) and cap:
                    row[j] += 1.0 - free / cap
        self._frag_acc += free_fragmented / free_total if free_total else 0.0
        self.result.times.append(now)
        self.result.rejections_over_time.append(self.result.rejected)
        self.result.utilisation_over_time.append(util)
        self.result.pending_over_time.append(len(self.pending))

    # -- scheduling -----------------------------------------------------------------------------------
    def _publish(self, node: SimNode) -> None:
        assert self.cache is not None
        publisher = self.publishers.get(node.name)
        if publisher is None:
            publisher = self.publishers[node.name] = NRTPublisher(node.manager, node.name)
        self.cache.nrt_updated(publisher.publish())
        node.dirty = False

    def _try(self, now: float, state: _PodState) -> bool:
        self.result.attempts += 1
        pod = state.pod
        row = self.cycle.decide(pod)
        if row is None:
            self.result.unschedulable_attempts += 1
            # kube-scheduler's per-pod backoff: 1 s doubling up to 10 s
            state.failures += 1
            state.next_try = now + min(self.config.max_backoff_s, 2.0 ** (state.failures - 1))
            return False
        self._bind(now, state, row)
        return True

    def _bind(self, now: float, state: _PodState, row: int) -> None:
        node = self.nodes[row]
        vector = self.fit.vector_of(state.pod)  # binding changes no request: the bound pod's vector
        bound = state.pod.with_changes(node_name=node.name, phase="Running")
        if self.cache is not None:
            self.cache.reserve(node.name, bound)
            self.cache.post_bind(node.name, bound)
            self.cache.pod_updated(bound)
        admission = node.manager.admit(bound)
        self.result.admissions.append((bound.uid, node.name, admission.admitted, admission.reason))
        if not admission.admitted and admission.reason and admission.message:
            self.result.messages.setdefault(admission.reason, admission.message)
        if admission.admitted:
            state.node = row
            state.pod = bound
            node.bound[bound.uid] = bound
            node.dirty = True
            state.vector = vector
            self.fit.add_vector(row, vector)
            self.result.placed += 1
            exclusive = [c for c in admission.containers if c.exclusive_cpus is not None]
            if exclusive:
                self.result.exclusive += 1
                numas: set[int] = set()
                for c in admission.containers:
                    for a in c.allocations:
                        if a.numa is not None:
                            numas.update(a.numa.ids())
                if len(numas) <= 1:
                    self.result.aligned += 1
            if state.arrival.duration_s is not None:
                self.push(now + state.arrival.duration_s, "depart", state)
            return
        reason = admission.reason or "UnexpectedAdmissionError"
        self.result.rejections[reason] = self.result.rejections.get(reason, 0) + 1
        if self.spec.numa_aware and reason != "InvalidPreference":
            node_policy = node.manager.config.topology_policy
            if judged_policy(bound, node_policy) != "single-numa-node":  # the NUMA filter passed it unchecked
                self.result.unfiltered += 1
        if self.cache is not None:
            self.cache.pod_deleted(bound.with_changes(phase="Failed"))
        if state.recreates < self.config.max_recreates:
            state.recreates += 1
            suffix = f"-r{state.recreates}"
            base = state.arrival.pod
            state.pod = state.pod.with_changes(name=base.name + suffix, uid=base.uid + suffix, node_name="", phase="")
            self.push(now + self.config.recreate_delay_s, "recreate", state)
        else:
            self.result.failed += 1


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (restored afterwards).

    A run keeps millions of objects alive and replaces many of them (NRT objects, views, pods), so
    the collector's full passes re-scan the whole heap again and again — a fifth of a large run's
    time — while finding next to nothing: the engine and the code it runs create (almost) no
    reference cycles, so reference counting frees what they drop. Results do not depend on it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_scheduler(
    spec: SchedulerSpec,
    templates: Sequence[NodeTemplate],
    arrivals: Sequence[PodArrival],
    config: SimConfig | None = None,
    progress: Callable[[float], None] | None = None,
) -> RunResult:
    """Run ``arrivals`` through ``spec`` on fresh nodes built from ``templates`` (``config``: default
    :class:`SimConfig` when ``None``)."""
    with cyclic_gc_paused():
        return Run(spec, templates, arrivals, config or SimConfig(), progress).run()

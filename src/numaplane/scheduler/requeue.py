"""Extender mode: get kube-scheduler to retry, within seconds, a pod the extender refused once the NUMA
zones free room for it (issue 12, defect 3).

Why it is needed: kube-scheduler does not watch NodeResourceTopology objects. A pod the extender
refused waits in its unschedulable pool until some cluster event moves it — or until the pool's
5-minute flush (measured on a real v1.36.2: 5 min 25 s). The freeing event itself (an assigned pod's
deletion) typically moves the pod *before* the exporter republishes the NRT, so that retry is refused
too and the pod is stuck for the flush.

The mechanism kube-scheduler honours (v1.29+, upstream issue 122019): when an extender removes nodes,
kube-scheduler adds the pseudo-plugin ``Extender`` to the pod's rejectors, and that pseudo-plugin is
registered for every cluster event with the default hint *Queue*. An update of the pending pod itself
is such an event (``UnscheduledPod/Update``: the queue's ``Update`` asks the rejectors' hints for it),
so one write to the pod moves it to the backoff or active queue — whatever other plugins rejected it.

What :class:`RequeueSignal` does: the extender's filter reports each pod of our profiles it refused on
every node (:meth:`RequeueSignal.refused`). After a change that can free room — an NRT added or
updated, a Node added or updated, an over-reserve resync flush — it evaluates each waiting pod with
the same state (kube-scheduler's basic predicates, then the NUMA filter) on the nodes that changed;
for a pod that now fits one of them it applies (server-side apply on ``pods/status``, field manager ``numaplane-scheduler``) the pod
condition ``numaplane.io/NUMAResourcesAvailable=True`` naming that node, and forgets the pod (a later
refusal registers it again). ``pods/status`` patch is already in kube-scheduler's RBAC, which the
extender shares. Changes are coalesced (``debounce_seconds``); a check costs one basic filter and one
NUMA evaluation per waiting pod, restricted to the changed nodes, and yields between pods.

The resulting delay from the NRT update to the retry: the over-reserve resync tick (at most a quarter
of the resync period, and no more than 1 s, when the change needs a flush), ``debounce_seconds``, one
API write, then kube-scheduler's remaining backoff of the pod (``podInitialBackoffSeconds`` doubling per
attempt up to ``podMaxBackoffSeconds``, 1 s and 10 s by default; nothing if the pod has waited longer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import structlog

from numaplane.kube.clock import Clock, SystemClock, format_time
from numaplane.kube.conditions import apply_pod_condition, condition, find_condition
from numaplane.kube.errors import KubeError, NotFound
from numaplane.kube.port import KubePort
from numaplane.resources.pod import Pod
from numaplane.scheduler.metrics import SchedulerMetrics
from numaplane.scheduler.records import TERMINAL_PHASES, object_name
from numaplane.scheduler.state import SchedulerState

__all__ = ["CONDITION_TYPE", "FIELD_MANAGER", "RequeueSignal"]

log = structlog.get_logger("numaplane.scheduler.requeue")

CONDITION_TYPE = "numaplane.io/NUMAResourcesAvailable"
FIELD_MANAGER = "numaplane-scheduler"
REASON = "NUMAResourcesFreed"


@dataclass
class _Waiting:
    uid: str
    refused_at: float


class RequeueSignal:
    """Pods the extender refused, and the pod condition that makes kube-scheduler retry them (module
    docstring). Call the input methods from the event loop; :meth:`run` does the checks and writes."""

    def __init__(
        self,
        state: SchedulerState,
        kube: KubePort,
        *,
        clock: Clock | None = None,
        metrics: SchedulerMetrics | None = None,
        debounce_seconds: float = 0.1,
        max_waiting: int = 10_000,
    ) -> None:
        self.state = state
        self.kube = kube
        self.clock: Clock = clock or SystemClock()
        self.metrics = metrics
        self.debounce_seconds = debounce_seconds
        self.max_waiting = max_waiting
        self.waiting: dict[str, _Waiting] = {}
        self.signalled = 0
        self._wake = asyncio.Event()
        self._dirty: set[str] = set()

    # --- input -------------------------------------------------------------------------------------

    def refused(self, pod: Pod) -> None:
        """The extender refused ``pod`` on every node it was asked about."""
        if not self.state.is_ours(pod) or pod.node_name:
            return
        known = self.waiting.get(pod.key)
        if known is not None and known.uid == pod.uid:
            return
        if len(self.waiting) >= self.max_waiting:  # bounded memory; the oldest waits for the flush
            self.waiting.pop(next(iter(self.waiting)))
        self.waiting[pod.key] = _Waiting(pod.uid, self.clock.monotonic())

    def changed(self, nodes: Iterable[str]) -> None:
        """The cached view of ``nodes`` may have more room now (a flush, an NRT or a Node change)."""
        if self.waiting:
            self._dirty.update(nodes)
            self._wake.set()

    def object_changed(self, *objs: Mapping[str, Any]) -> None:
        """Informer handler (``on_add(obj)`` / ``on_update(old, new)``) for Nodes and NRTs."""
        name = object_name(objs[-1]) if objs else ""
        if name:
            self.changed((name,))

    # --- work --------------------------------------------------------------------------------------

    def fits(self, key: str, nodes: AbstractSet[str] | None = None) -> tuple[Pod, str] | None:
        """Waiting pod ``key`` and the best node of ``nodes`` (default: all) it fits now, if any;
        forgets the pod when it is gone, bound or terminal. Pure: no API call."""
        entry = self.waiting.get(key)
        if entry is None:
            return None
        pod = self.state.pods.get(key)
        if pod is None or pod.uid != entry.uid or pod.node_name or pod.phase in TERMINAL_PHASES:
            del self.waiting[key]
            return None
        candidates = [n for n in self.state.basic_filter(pod).passed if nodes is None or n in nodes]
        if not candidates:
            return None
        ev = self.state.evaluate(pod, candidates, mark=False)
        if not ev.scores:
            return None
        return pod, max(sorted(ev.scores), key=lambda n: ev.scores[n])

    async def check(self, nodes: AbstractSet[str] | None = None) -> int:
        """Signal every waiting pod that fits one of ``nodes`` (default: any node) now; returns how
        many were signalled. Yields to the event loop between pods (the extender keeps answering)."""
        count = 0
        for key in list(self.waiting):
            found = self.fits(key, nodes)
            await asyncio.sleep(0)
            if found is None:
                continue
            pod, node = found
            self.waiting.pop(key, None)
            if await self._signal(pod, node):
                count += 1
        self.signalled += count
        return count

    async def _signal(self, pod: Pod, node: str) -> bool:
        now = format_time(self.clock.now())
        wanted = condition(
            CONDITION_TYPE,
            "True",
            REASON,
            f"numaplane: node {node} can now align this pod's resources on its NUMA zones; kube-scheduler retries it",
            previous=find_condition((pod.raw.get("status") or {}).get("conditions"), CONDITION_TYPE),
            now=now,
            lastProbeTime=now,
        )
        try:
            await apply_pod_condition(self.kube, pod, wanted, field_manager=FIELD_MANAGER)
        except NotFound:
            self._count("gone")
            return False
        except KubeError as exc:
            self._count("error")
            log.warning("requeue signal failed", pod=pod.key, node=node, error=str(exc))
            return False
        self._count("success")
        log.info("requeue signalled", pod=pod.key, podUID=pod.uid, node=node)
        return True

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.requeue_signals.labels(result=result).inc()

    async def run(self) -> None:
        """Check after every change (coalesced) until cancelled."""
        while True:
            await self._wake.wait()
            await self.clock.sleep(self.debounce_seconds)
            self._wake.clear()
            nodes, self._dirty = self._dirty, set()
            try:
                await self.check(nodes)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("requeue check failed")

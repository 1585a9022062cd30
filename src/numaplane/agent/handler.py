"""The agent's NRI handler: NRI events → :class:`~numaplane.agent.state.NodeAgentState` calls → answers.

A handler in the stub's protocol (``nri/stub.py``): one method per event, over the values of
``nri/events.py``; the stub derives the subscribed events from these methods, joins a split
Synchronize, and translates to and from protobuf. Nothing here sees a protobuf message.

Serialisation: every state-machine call goes through one :class:`StateRunner` and runs inline on the
event loop (the state machine does no I/O: in-process plugins are pure and take ~0.1 ms), so the state machine sees
one call at a time. An admission that asks an out-of-process plugin is parked by the state machine and
answered by :class:`~numaplane.agent.asking.Answering` — concurrently, with per-plugin deadlines, on
the event loop — while every other request is served: a pod that waits for a slow or hung plugin
delays no other pod.

**The agent never wedges the runtime.** Cpuset changes for *other* containers (the shared pool
shrinking or growing, a waiting container pinned, a re-pin after a restart) are owed updates
(:class:`UpdateSender`) delivered in the ``update`` lists of the answers the runtime asks for —
CreateContainer, UpdateContainer, StopContainer and Synchronize — which the runtime applies inside
that event under the locks it already holds. ``Runtime.UpdateContainers`` (an unsolicited call) is
used only when the runtime named in Configure has the NRI fix for the lock inversion that otherwise
deadlocks it under pod churn (containerd >= 2.4.0; containerd 1.7 — every 1.7.x — to 2.3 do not:
:mod:`numaplane.nri.runtimes`). The price on those runtimes: a change caused by an event answered
with an empty message (a container or pod removal, a POST_START re-pin) reaches the runtime with its
next CreateContainer, UpdateContainer or StopContainer request, or the next Synchronize. Only growth
waits: the shared pool never shrinks late, because the CPUs a new container takes leave the shared
containers in that container's own CreateContainer answer. ``numaplane_agent_owed_updates`` counts
what waits.

What goes where:

* CreateContainer → ``state.create`` (an admission waiting for out-of-process plugins comes back as
  a ``Pending`` value the runner settles); the answer sets ``linux.resources.cpu.cpus`` (and ``mems`` when
  memory is pinned) and carries every owed update (at most ``reply_updates``, 512) — the shared
  containers leaving the new exclusive CPUs first. On a runtime that allows unsolicited updates, up
  to ``inline_updates`` (16) travel in the answer and more are sent right after it with
  ``Runtime.UpdateContainers`` (the runtime applies every update of an answer before it creates the
  container). A rejection is raised as a :class:`~numaplane.nri.errors.StatusError` carrying
  ``numaplane: pod … container …: <Reason>: <message>``: the runtime fails the creation with that text;
* RUN_POD_SANDBOX → admit the pod as a whole when its Pod is known (``state.run_pod``);
  a rejection is only logged (the sandbox runs; the pod's first CreateContainer fails with it);
* StopContainer → release (a container of a pod admitted as a whole is only forgotten: its allocation
  stays with the pod for a restarted container); the answer carries the owed updates;
* REMOVE_CONTAINER / STOP_POD_SANDBOX / REMOVE_POD_SANDBOX → release (a whole pod's
  containers keep its allocation until the sandbox stops; a finished init container's removal
  releases what later containers do not reuse); the pool changes (and the pins of waiting containers
  that fit now) become owed updates;
* POST_START_CONTAINER of a container the agent did not pin at creation (adopted by Synchronize, or
  created while the agent was away) → owed re-pin (a Synchronize update may have raced the start);
* UpdateContainer (e.g. a resize by the kubelet) that would change the cpuset → the answer restores
  ours, and carries the owed updates;
* Synchronize → ``state.synchronize``; every mismatching container is fixed in the answer (what was
  owed before is dropped: Synchronize compared every container with the runtime's view). A state
  split over several requests (NRI >= 0.8) reaches this handler once complete: the stub collects it.

No blocking I/O happens here: checkpoints are written by the background writer (``on_change`` marks it
dirty), owed updates wait in the sender.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import structlog

from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.runner import StateRunner, UpdateSender
from numaplane.agent.state import NodeAgentState
from numaplane.nri.errors import StatusCode, StatusError
from numaplane.nri.events import (
    Adjustment,
    CgroupResources,
    CpusetUpdate,
    RuntimeContainer,
    RuntimeInfo,
    Sandbox,
    cpuset_text,
)
from numaplane.nri.runtimes import unsolicited_updates_safe

__all__ = ["AgentHandler", "StateRunner", "UpdateSender"]

log = structlog.get_logger("numaplane.agent")


class AgentHandler:
    """The agent's NRI handler (see the module docstring). Its methods are its subscription:
    RUN/STOP/REMOVE_POD_SANDBOX, CREATE/POST_START/UPDATE/STOP/REMOVE_CONTAINER."""

    def __init__(
        self,
        runner: StateRunner,
        *,
        metrics: AgentMetrics | None = None,
        sender: UpdateSender | None = None,
        on_change: Callable[[], None] | None = None,
        on_waiting: Callable[[NodeAgentState], None] | None = None,
        inline_updates: int = 16,
        reply_updates: int = 512,
    ) -> None:
        self.runner = runner
        self.inline_updates = inline_updates
        self.reply_updates = reply_updates
        runner.state.inline_limit = inline_updates
        self.metrics = metrics or AgentMetrics()
        self.sender = sender or UpdateSender(runner, self.metrics)
        self.on_change = on_change or (lambda: None)
        # after every state change: the containers waiting in the shared pool (Events on their pods)
        self.on_waiting = on_waiting or (lambda _state: None)
        self.synchronized = asyncio.Event()
        # set once the runtime confirmed the cpusets Synchronize decided (see _verify)
        self.verified = asyncio.Event()
        self._verify_task: asyncio.Task[None] | None = None
        self.synchronizations = 0
        self.configurations = 0
        self.runtime = ("", "")  # (name, version) from the last Configure

    @property
    def state(self) -> NodeAgentState:
        return self.runner.state

    def observe(self, method: str, seconds: float, result: str) -> None:
        """One request served (also called by the stub for Synchronize parts and ignored events)."""
        self.metrics.nri_requests.labels(method=method, result=result).inc()
        self.metrics.nri_duration.labels(method=method).observe(seconds)

    def _observe(self, method: str, started: float, result: str) -> None:
        self.observe(method, time.perf_counter() - started, result)

    def _updates(self, updates: Sequence[CpusetUpdate], path: str, exclude: str = "") -> list[CpusetUpdate]:
        """What goes into an answer's ``update`` list (see the module docstring); the rest stays owed."""
        if self.sender.unsolicited:
            out: list[CpusetUpdate] = []
            if len(updates) <= self.inline_updates:
                out = list(updates)
                self.metrics.container_updates.labels(path=path, result="ok").inc(len(updates))
            else:
                self.sender.submit((u.container_id for u in updates), path)
            self._deferred(path)
            return out
        self.sender.submit((u.container_id for u in updates), path)
        if self.state.take_deferred():
            self.sender.submit_shared(path)
        return self.sender.take(self.reply_updates, exclude=(exclude,))

    def _deferred(self, path: str) -> None:
        if self.state.take_deferred():
            self.sender.submit_shared(path)

    def _owed(self, updates: Sequence[CpusetUpdate], path: str) -> None:
        """Owe ``updates`` (and a deferred pool change) to the runtime: an event answered empty."""
        self.sender.submit((u.container_id for u in updates), path)
        self._deferred(path)

    async def configure(self, info: RuntimeInfo) -> None:
        self.configurations += 1
        self.metrics.nri_registrations.inc()
        self.runtime = (info.runtime, info.version)
        unsolicited = unsolicited_updates_safe(info.runtime, info.version)
        self.sender.allow_unsolicited(unsolicited)
        log.info(
            "nri configured",
            runtime=info.runtime,
            version=info.version,
            updates="unsolicited allowed" if unsolicited else "in answers only",
        )

    async def synchronize(self, pods: Sequence[Sandbox], containers: Sequence[RuntimeContainer]) -> list[CpusetUpdate]:
        started = time.perf_counter()
        self.verified.clear()
        result = await self.runner.call(lambda: self.state.synchronize(pods, containers))
        for cid, reason, message in result.failed:
            log.warning(
                "running container could not be admitted; it waits in the shared pool until resources free up",
                container=cid[:12],
                reason=reason,
                message=message,
            )
        if result.failed:
            self.metrics.adoptions.labels(result="failed").inc(len(result.failed))
        if len(result.adopted) > len(result.failed):
            self.metrics.adoptions.labels(result="admitted").inc(len(result.adopted) - len(result.failed))
        self.metrics.container_updates.labels(path="sync", result="ok").inc(len(result.updates))
        self.sender.forget()
        self.synchronizations += 1
        self.synchronized.set()
        if self._verify_task is not None:
            self._verify_task.cancel()
        if self.sender.unsolicited:
            self._verify_task = asyncio.get_running_loop().create_task(
                self._verify([u.container_id for u in result.updates]), name="nri-sync-verify"
            )
        else:
            # the runtime applies the answer's updates before it registers the plugin (containerd
            # reports a failed one only in its own log); asking it to confirm would take an
            # unsolicited call, which is what wedges it
            self._verify_task = None
            self.verified.set()
        self.on_change()
        self.on_waiting(self.state)
        elapsed = time.perf_counter() - started
        self.metrics.sync_duration.set(elapsed)
        self._observe("Synchronize", started, "ok")
        log.info(
            "synchronized",
            pods=len(pods),
            containers=len(containers),
            adopted=len(result.adopted),
            dropped=len(result.dropped),
            failed=len(result.failed),
            updates=len(result.updates),
            seconds=round(elapsed, 4),
        )
        return list(result.updates)

    async def _verify(self, container_ids: list[str], attempts: int = 5) -> None:
        """After Synchronize: send the containers whose cpuset it changed once more, as an
        UpdateContainers call the runtime answers only after applying them to the cgroups, and set
        :attr:`verified` when none failed. The Synchronize answer's updates may race a container's
        start (or, after a restart, a creation without adjustments), so readiness waits for this."""
        if not container_ids:
            self.verified.set()
            return
        await asyncio.sleep(0)  # after the Synchronize answer went out
        for attempt in range(attempts):
            before = self.sender.problems
            self.sender.submit(container_ids, "verify")
            try:
                await self.sender.wait_idle(10.0)
            except TimeoutError:
                continue
            if self.sender.problems == before:
                self.verified.set()
                log.info("container cpusets confirmed by the runtime after Synchronize", containers=len(container_ids))
                return
            await asyncio.sleep(0.2 * (attempt + 1))
        log.error(
            "the runtime did not confirm the cpusets decided at Synchronize; staying unready",
            containers=len(container_ids),
        )

    async def create_container(
        self, pod: Sandbox, container: RuntimeContainer
    ) -> tuple[Adjustment, list[CpusetUpdate]]:
        started = time.perf_counter()
        try:
            decision = await self.runner.call(lambda: self.state.create(pod, container))
        except AdmissionRejected as exc:
            self.metrics.admissions.labels(result="rejected", reason=exc.reason).inc()
            self._observe("CreateContainer", started, "rejected")
            log.info(
                "container rejected",
                pod=f"{pod.namespace}/{pod.name}",
                container=container.name,
                reason=exc.reason,
                message=exc.message,
            )
            raise StatusError(StatusCode.FAILED_PRECONDITION, str(exc)) from None
        adjust = Adjustment(decision.cpus, decision.mems, decision.env)
        updates = self._updates(decision.updates, "create", exclude=container.id)
        self.metrics.admissions.labels(result="admitted", reason="").inc()
        self.on_change()
        self._observe("CreateContainer", started, "ok")
        log.debug(
            "container pinned",
            pod=f"{pod.namespace}/{pod.name}",
            container=container.name,
            cpus=cpuset_text(decision.cpus),
            exclusive=decision.exclusive,
            updates=len(decision.updates),
        )
        return adjust, updates

    async def update_container(
        self, pod: Sandbox, container: RuntimeContainer, resources: CgroupResources
    ) -> list[CpusetUpdate]:
        started = time.perf_counter()
        cid, asked = container.id, resources.cpus

        def keep_ours() -> CpusetUpdate | None:
            record = self.state.record_for(cid)
            if record is None or not asked:
                return None
            cpus, mems = self.state.desired(record)
            return None if asked == cpuset_text(cpus) else CpusetUpdate(cid, cpus, mems)

        update = await self.runner.call(keep_ours)
        self._observe("UpdateContainer", started, "ok")
        updates = self._updates((), "update", exclude=cid)
        if update is not None:
            updates.append(update)  # the container asked about: last
        return updates

    async def stop_container(self, pod: Sandbox, container: RuntimeContainer) -> list[CpusetUpdate]:
        started = time.perf_counter()
        cid = container.id
        updates = await self.runner.call(lambda: self.state.stop(cid))
        answer = self._updates(updates, "stop")
        self.on_change()
        self.on_waiting(self.state)
        self._observe("StopContainer", started, "ok")
        return answer

    async def remove_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        started = time.perf_counter()
        sandbox_id = container.pod_sandbox_id or pod.id
        updates = await self.runner.call(
            lambda: self.state.remove_container(container.id, pod.uid, container.name, sandbox_id)
        )
        self._owed(updates, "remove")
        self.on_change()
        self.on_waiting(self.state)
        self._observe("REMOVE_CONTAINER", started, "ok")

    async def run_pod_sandbox(self, pod: Sandbox) -> None:
        started = time.perf_counter()
        started_pod = await self.runner.call(lambda: self.state.run_pod(pod))
        if started_pod.rejection is not None:
            log.info(
                "pod not admitted at sandbox start; its first container will be refused",
                pod=f"{pod.namespace}/{pod.name}",
                reason=started_pod.rejection.reason,
                message=started_pod.rejection.message,
            )
        if started_pod.admitted or started_pod.updates:
            self._owed(started_pod.updates, "run-pod")
            self.on_change()
        self._observe("RUN_POD_SANDBOX", started, "ok")

    async def _pod_gone(self, pod: Sandbox, event: str) -> None:
        started = time.perf_counter()
        updates = await self.runner.call(lambda: self.state.remove_pod(pod.id, pod.uid))
        self._owed(updates, "remove")
        self.on_change()
        self.on_waiting(self.state)
        self._observe(event, started, "ok")

    async def stop_pod_sandbox(self, pod: Sandbox) -> None:
        await self._pod_gone(pod, "STOP_POD_SANDBOX")

    async def remove_pod_sandbox(self, pod: Sandbox) -> None:
        await self._pod_gone(pod, "REMOVE_POD_SANDBOX")

    async def post_start_container(self, pod: Sandbox, container: RuntimeContainer) -> None:
        started = time.perf_counter()
        record = self.state.record_for(container.id)
        if record is not None and not record.adjusted:
            log.info("re-pinning a container the agent did not pin at creation", container=container.id[:12])
            self.sender.submit([container.id], "repin")
        self._observe("POST_START_CONTAINER", started, "ok")

"""The node agent's state machine: NRI container events in, cpuset decisions out (synchronous, no I/O).

:class:`NodeAgentState` owns a :class:`~numaplane.policy.manager.ResourceManager`, a registry of the
containers the runtime runs (:class:`ContainerRecord`, keyed by container id) and the pods admitted
as a whole (:class:`~numaplane.agent.wholepod.PodEntry`, keyed by pod uid). Every method is a plain
call that mutates state and returns what the runtime must be told; the NRI handler (``handler.py``)
serialises the calls and does the talking. The state machine sees only the agent's own values
(:mod:`numaplane.nri.events`: sandboxes, containers, cpuset updates), never a protobuf message: the
handler translates them with :mod:`numaplane.nri.translate` (import-linter checks this).

Two ways a container is admitted:

* **with its whole pod** (``whole_pod``) — when the Pod is known from the API (``pod_lookup``) and
  needs the manager (Guaranteed, or extended resources): the manager admits the real pod once, as
  the kubelet does — init containers' resources reused by later containers, topology scope ``pod``,
  pod-level resources — and each container receives its own allocation when it is created (the
  per-pod bookkeeping is :class:`~numaplane.agent.wholepod.PodEntry`). A container's allocation
  outlives the container (a restarted container gets it again); a finished regular init container's
  RemoveContainer releases what later containers do not reuse; the pod's StopPodSandbox /
  RemovePodSandbox releases the rest;
* **one container at a time** — without the Pod (no API access, or not seen yet), or for a pod
  whose containers were already admitted that way: the container becomes a single-container pod
  ``<pod uid>/<container name>`` built from what NRI carries (``containers.py``, which documents what
  this cannot do), released when the container stops or goes.

Invariants: see ``consistency.py`` (checked by :meth:`check` and on every checkpoint restore).

Decisions:

* :meth:`create` — admit (or reject with :class:`AdmissionRejected`) and return the creation-time
  adjustment plus updates of running shared containers when the pool shrank (they travel in the
  CreateContainer answer, so the pool shrinks before the new container starts); an admission that
  asks out-of-process plugins returns :class:`~numaplane.agent.records.Pending` instead, whose
  ``resume()`` finishes the same call once the plugins answered (``asking.py`` drives it);
* :meth:`stop` / :meth:`remove_container` / :meth:`remove_pod` — release, and return updates when
  the pool grew. Allocations are keyed by pod uid and container name and kept across a container's
  restart, whatever the agent knows of the Pod (the kubelet's rule): a stopped container keeps its
  allocation (a one-at-a-time record is marked ``stopped``; a whole pod's stays with the pod) until
  the container is removed or its sandbox stops, and a container re-created under the same pod and
  name inherits it. One exception, because the runtime does not say which containers are init
  containers: the first creation of another container name in the sandbox releases the stopped
  one-at-a-time containers of that sandbox first (the kubelet creates the next container only after
  the init containers before it completed, and reuses their CPUs);
* :meth:`synchronize` — reconcile with the runtime's full list: drop records of containers that are
  gone or stopped and pod entries whose sandbox is gone, adopt live containers the state does not know
  (admission as at creation, whole pods included; a container that cannot be admitted keeps running in
  the shared pool, is reported, and waits in :attr:`waiting` unless its rejection is final), release
  finished init containers removed meanwhile, and return an update for every live container whose
  cpuset differs from the desired one.

This class is the one owner of the registry (``records``, ``pods``, ``holders``, ``waiting``): no other
module mutates them (``admitting``, ``consistency``, ``listing`` and ``wholepod`` read them or keep
their own parts).

The restart window: while no plugin is connected the runtime creates containers without NRI
adjustments (unpinned, on every CPU); Synchronize adopts them when the agent is back. A Guaranteed
container that then cannot be admitted (its CPUs were taken meanwhile) runs in the shared pool and
waits in :attr:`NodeAgentState.waiting` (metric ``numaplane_agent_unpinned_containers``): every release
(:meth:`stop`, :meth:`remove_container`, :meth:`remove_pod`) retries the waiting containers and pins
those that fit, and the next Synchronize (after a restart too) tries again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from numaplane.agent.admitting import ManagerAdmissions
from numaplane.agent.consistency import canonical_check, validate_manager_doc, violations
from numaplane.agent.containers import ContainerInfo, check_claims, derive, parse_cpuset
from numaplane.agent.errors import AdmissionRejected, CheckpointCorrupted
from numaplane.agent.listing import pod_resources
from numaplane.agent.records import (
    ContainerRecord,
    CreateDecision,
    Pending,
    PodLookup,
    PodStarted,
    SyncResult,
    settled,
)
from numaplane.agent.wholepod import PodEntry, admission_pod, pod_needs_manager
from numaplane.nri.events import CpusetUpdate, RuntimeContainer, Sandbox, cpuset_text
from numaplane.nrt.podresources import AllocatableResources, PodResources
from numaplane.policy.asks import AdmissionRun
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.manager import Admission, ResourceManager
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "FINAL_REJECTIONS",
    "ContainerRecord",
    "CpusetUpdate",
    "CreateDecision",
    "NodeAgentState",
    "Pending",
    "PodLookup",
    "PodStarted",
    "SyncResult",
    "cpuset_text",
]

#: Rejections that retrying cannot cure (the others, such as a lack of CPUs, may pass later).
FINAL_REJECTIONS = frozenset({"InvalidContainer", "DuplicateContainer", "InvalidPreference", "ResourceNotRequested"})


class NodeAgentState:
    """Containers, the resource manager, and the decisions between them. Not thread-safe: callers serialise."""

    def __init__(self, manager: ResourceManager, *, pod_lookup: PodLookup | None = None) -> None:
        self.manager = manager
        self.pod_lookup = pod_lookup
        self.records: dict[str, ContainerRecord] = {}
        self.pods: dict[str, PodEntry] = {}  # pods admitted as a whole, by uid
        self.holders: dict[str, str] = {}  # manager key (``<pod uid>/<name>``) → the container holding it
        self._pool = manager.shared_pool()
        self.inline_limit: int | None = None  # see _pool_updates
        self.pool_update_deferred = False
        self.generation = 0  # bumped on every state change (the checkpoint writer follows it)
        self.saved_plugin_states: dict[str, Any] = {}  # states of plugins not registered yet
        # running containers Synchronize could not admit for lack of resources, retried on releases
        self.waiting: dict[str, tuple[Sandbox, RuntimeContainer]] = {}
        self.admissions = ManagerAdmissions(manager)

    @property
    def parked(self) -> dict[str, AdmissionRun[Admission]]:
        """Admissions waiting for out-of-process plugins' answers, by manager pod uid."""
        return self.admissions.parked

    def abandon(self, pod_uid: str) -> None:
        """Give up the parked admission of ``pod_uid`` (see :meth:`ManagerAdmissions.abandon`)."""
        if self.admissions.abandon(pod_uid):
            self.generation += 1

    def take_saved_plugin_state(self, name: str) -> Any:
        """The checkpointed state of plugin ``name`` registered only now (forgotten here), or ``None``."""
        return self.saved_plugin_states.pop(name, None)

    # -- views ----------------------------------------------------------------------------------------
    @property
    def shared_pool(self) -> CPUSet:
        return self._pool

    def desired(self, record: ContainerRecord) -> tuple[CPUSet, CPUSet | None]:
        if record.exclusive is not None:
            return record.exclusive, record.mems
        return self._pool, record.mems

    def exclusive_cpus(self) -> CPUSet:
        mask = 0
        for r in self.records.values():
            if r.exclusive is not None:
                mask |= r.exclusive.mask
        return CPUSet.from_mask(mask)

    def record_for(self, container_id: str) -> ContainerRecord | None:
        return self.records.get(container_id)

    # -- admission ------------------------------------------------------------------------------------
    def lookup(self, sandbox: Sandbox) -> Pod | None:
        if self.pod_lookup is None or not sandbox.uid:
            return None
        return self.pod_lookup(sandbox.uid)

    def register(self, record: ContainerRecord) -> None:
        self.records[record.container_id] = record
        self.holders[record.key] = record.container_id
        self.generation += 1

    def create(self, sandbox: Sandbox, container: RuntimeContainer) -> CreateDecision | Pending[CreateDecision]:
        """CreateContainer: admit and decide (raises :class:`AdmissionRejected`), or :class:`Pending`
        when the admission waits for out-of-process plugins (its ``resume()`` decides)."""
        known = self.records.get(container.id)
        if known is not None:  # the same request again (e.g. answered after a reconnect)
            return self._known(known)
        entry = self._pod_entry(sandbox)
        if entry is None:
            admitted = self._admit_pod(sandbox, container.name, park=True)
            if isinstance(admitted, Pending):
                pending = admitted
                return Pending(pending.run, lambda: self._create_resumed(sandbox, container, pending.resume))
            entry = admitted
        if entry is not None:
            return self._decide(self._bind(entry, sandbox, container))
        info = derive(sandbox, container, self.lookup(sandbox))
        self._release_completed(info.sandbox_id, container.name)
        predecessor_id = self.holders.get(info.key)
        if predecessor_id is not None and predecessor_id != container.id:
            return self._decide(self.transfer(predecessor_id, info))
        alone = self.admissions.admit_alone(info, park=True)
        if isinstance(alone, Pending):
            waiting = alone
            return Pending(waiting.run, lambda: self._create_resumed(sandbox, container, waiting.resume))
        self.register(alone)
        return self._decide(alone)

    def _create_resumed(
        self, sandbox: Sandbox, container: RuntimeContainer, resume: Callable[[], PodEntry | ContainerRecord]
    ) -> CreateDecision:
        """The rest of :meth:`create` once its parked admission was answered. Another call waiting for
        the same run may have taken its decision first: the container's record, or the pod's entry."""
        known = self.records.get(container.id)
        if known is not None:
            return self._known(known)
        got = resume()  # the pod's entry (whole pod), or the container's record (alone, not registered)
        if isinstance(got, PodEntry):
            return self._decide(self._bind(got, sandbox, container))
        self.register(got)
        return self._decide(got)

    def _known(self, known: ContainerRecord) -> CreateDecision:
        cpus, mems = self.desired(known)
        return CreateDecision(cpus, mems, known.exclusive is not None, env=self.admissions.env(known))

    def _decide(self, record: ContainerRecord) -> CreateDecision:
        """The creation-time answer for the registered ``record``: its cpuset, the pool's updates, env."""
        cpus, mems = self.desired(record)
        record.applied = cpuset_text(cpus)
        record.adjusted = True
        updates = self._pool_updates(exclude=record.container_id)
        env = self.admissions.env(record)
        return CreateDecision(cpus, mems, record.exclusive is not None, tuple(updates), env)

    def run_pod(self, sandbox: Sandbox) -> PodStarted | Pending[PodStarted]:
        """RUN_POD_SANDBOX: admit the pod as a whole now if the Pod is known (a rejection is not an
        error here: the sandbox runs, and the pod's first CreateContainer retries and fails), or
        :class:`Pending` as :meth:`create`."""
        if self._pod_entry(sandbox) is not None:
            return PodStarted()
        try:
            entry = self._admit_pod(sandbox, None, park=True)
        except AdmissionRejected as exc:
            return PodStarted(tuple(self._pool_updates()), rejection=exc)
        if isinstance(entry, Pending):
            pending = entry
            return Pending(pending.run, lambda: self._pod_started(pending.resume))
        return PodStarted(tuple(self._pool_updates()), admitted=entry is not None)

    def _pod_started(self, resume: Callable[[], PodEntry]) -> PodStarted:
        try:
            resume()
        except AdmissionRejected as exc:
            return PodStarted(tuple(self._pool_updates()), rejection=exc)
        return PodStarted(tuple(self._pool_updates()), admitted=True)

    # -- whole-pod admission --------------------------------------------------------------------------
    def _pod_entry(self, sandbox: Sandbox) -> PodEntry | None:
        """The whole-pod entry of ``sandbox``; an entry left by an older sandbox of the pod is released."""
        if not sandbox.uid:
            return None
        entry = self.pods.get(sandbox.uid)
        if entry is None or entry.sandbox_id == sandbox.id:
            return entry
        # The pod got a new sandbox: its containers all start again. (The kubelet stops the old
        # sandbox first; had the agent missed that, containers still registered there keep running
        # in the shared pool, holding nothing, until they go.)
        for record in [r for r in self.records.values() if r.whole_pod and r.pod_uid == entry.uid]:
            if self.holders.get(record.key) == record.container_id:
                del self.holders[record.key]
            record.managed = record.whole_pod = False
            record.exclusive = record.mems = None
            record.error = f"PodSandboxReplaced: the pod now runs in sandbox {sandbox.id[:12]}"
        self.release_entry(entry)
        return None

    def _admit_pod(
        self, sandbox: Sandbox, name: str | None, *, park: bool = False
    ) -> PodEntry | Pending[PodEntry] | None:
        """Admit the sandbox's pod as a whole (raises :class:`AdmissionRejected`); ``None`` when the
        Pod is unknown, needs no admission, or already has containers admitted one at a time; with
        ``park``, :class:`Pending` when the admission waits for out-of-process plugins.
        ``name``: the container being created (``None`` at RUN_POD_SANDBOX). Records of regular init
        containers before it (admitted one at a time while the Pod was not known yet) have finished:
        they are released first; any other live container of the sandbox keeps the pod one-at-a-time.
        """
        api = self.lookup(sandbox)
        if api is None:
            return None
        pod = admission_pod(api)
        where = f"{pod.namespace}/{pod.name}"
        for c in pod.all_containers():  # annotations never grant: a claim the spec does not back is refused
            check_claims(sandbox.annotations, c.name, pod, pod=where)
            check_claims(api.annotations, c.name, pod, pod=where)
        if not pod_needs_manager(pod):
            return None
        mine = [r for r in self.records.values() if r.sandbox_id == sandbox.id]
        if mine:
            order = {c.name: i for i, c in enumerate(pod.all_containers())}
            position = order.get(name, len(order)) if name is not None else -1
            regular_init = {c.name for c in pod.init_containers if not c.sidecar}
            if any(r.name not in regular_init or order[r.name] >= position for r in mine):
                return None
            for r in mine:
                self.release(r)
        admission = self.admissions.admit(pod, {"pod": where, "container": name or ""}, park=park)
        if isinstance(admission, Pending):
            pending = admission

            def resume() -> PodEntry:
                entry = self.pods.get(pod.uid)
                if entry is not None and entry.sandbox_id == sandbox.id:
                    return entry  # another call waiting for the same run took its decision
                pending.resume()
                return self._enter(pod, sandbox)

            return Pending(pending.run, resume)
        return self._enter(pod, sandbox)

    def _enter(self, pod: Pod, sandbox: Sandbox) -> PodEntry:
        """Record the pod admitted as a whole in ``sandbox``."""
        entry = PodEntry(pod, sandbox.id)
        self.pods[pod.uid] = entry
        self.generation += 1
        return entry

    def _bind(self, entry: PodEntry, sandbox: Sandbox, container: RuntimeContainer) -> ContainerRecord:
        """Register ``container`` with its allocation from the pod's admission (registered; no I/O)."""
        name = container.name
        predecessor = self.holders.get(f"{entry.uid}/{name}")
        if predecessor is not None and predecessor != container.id:
            self.release(self.records[predecessor])  # a re-created container: the allocation stays the pod's
        pod = entry.pod
        record = ContainerRecord(
            container_id=container.id,
            sandbox_id=container.pod_sandbox_id or sandbox.id,
            pod_uid=entry.uid,
            pod_name=sandbox.name or pod.name,
            namespace=sandbox.namespace or pod.namespace,
            name=name,
            qos=pod.qos_class,
        )
        if name in entry.released:
            # a completed init container created again in the same sandbox (the kubelet re-runs
            # init containers only in a new sandbox): what it held was given back; it shares the pool
            record.error = "InitContainerReleased: its allocation was released when it completed"
        elif entry.knows(name):
            # the kubelet's memory manager AddContainer: the regular init containers before this one have
            # completed, their memory (what later containers did not reuse) goes back at once
            if self.manager.release_finished_init_memory(entry.uid, name):
                self.generation += 1
            record.managed = record.whole_pod = True
            record.exclusive = self.manager.exclusive_cpus(entry.uid, name)
            record.mems = self.admissions.mems(entry.uid, name)
        entry.note_created(name)
        self.register(record)
        return record

    def transfer(self, old_id: str, info: ContainerInfo) -> ContainerRecord:
        """A container re-created under the same pod and name takes over its predecessor's allocation."""
        old = self.records.pop(old_id)  # the predecessor: stopped, or gone without a StopContainer
        record = ContainerRecord(
            container_id=info.container_id,
            sandbox_id=info.sandbox_id,
            pod_uid=old.pod_uid,
            pod_name=old.pod_name,
            namespace=old.namespace,
            name=old.name,
            qos=old.qos,
            managed=old.managed,
            exclusive=old.exclusive,
            mems=old.mems,
            error=old.error,
        )
        self.register(record)
        return record

    # -- release --------------------------------------------------------------------------------------
    def release(self, record: ContainerRecord) -> None:
        """Forget the record; a one-at-a-time container also gives its allocation back (a whole
        pod's container leaves it to the pod: a restarted container gets it again)."""
        self.records.pop(record.container_id, None)
        if self.holders.get(record.key) == record.container_id:
            del self.holders[record.key]
            if record.managed and not record.whole_pod:
                self.manager.remove(record.key)
        self.generation += 1

    def release_entry(self, entry: PodEntry) -> None:
        """Release a whole pod: its records and everything the manager holds for it."""
        for record in [r for r in self.records.values() if r.whole_pod and r.pod_uid == entry.uid]:
            self.release(record)
        if self.pods.get(entry.uid) is entry:
            del self.pods[entry.uid]
        self.manager.remove(entry.uid)
        self.generation += 1

    def release_init(self, entry: PodEntry, name: str) -> None:
        """A finished regular init container is gone: give back what later containers do not reuse."""
        self.manager.remove_container(entry.uid, name)
        entry.released.add(name)
        self.generation += 1

    def stop(self, container_id: str) -> list[CpusetUpdate]:
        """StopContainer: a one-at-a-time container that holds an allocation keeps it (marked
        ``stopped``, released at RemoveContainer or the sandbox's stop); any other is forgotten (a
        whole pod's allocation stays with the pod). Updates for a grown pool."""
        record = self.records.get(container_id)
        if record is None:
            return []
        self.waiting.pop(container_id, None)
        if record.managed and not record.whole_pod:
            if not record.stopped:
                record.stopped = True
                self.generation += 1
            return []
        self.release(record)
        return self._with_retries(self._pool_updates())

    def _release_completed(self, sandbox_id: str, name: str) -> None:
        """The first creation of ``name`` in the sandbox: release its stopped one-at-a-time containers
        (completed init containers, see the module docstring)."""
        if not sandbox_id:
            return
        mine = [r for r in self.records.values() if r.sandbox_id == sandbox_id]
        if any(r.name == name for r in mine):
            return  # a restart of a container this sandbox ran: nothing completed
        for record in mine:
            if record.stopped:
                self.release(record)

    def remove_container(
        self, container_id: str, pod_uid: str = "", name: str = "", sandbox_id: str = ""
    ) -> list[CpusetUpdate]:
        """RemoveContainer: as :meth:`stop`; besides, the removal of a finished regular init
        container of a whole pod (identified by the event's pod uid, name and sandbox when the
        agent no longer has its record) releases what later containers do not reuse."""
        record = self.records.get(container_id)
        if record is not None:
            pod_uid, name, sandbox_id = record.pod_uid, record.name, record.sandbox_id
            self.release(record)
        entry = self.pods.get(pod_uid) if pod_uid else None
        if (
            entry is not None
            and (not sandbox_id or sandbox_id == entry.sandbox_id)
            and entry.finished(name)
            and name not in entry.released
            and f"{pod_uid}/{name}" not in self.holders
        ):
            self.release_init(entry, name)
        return self._with_retries(self._pool_updates())

    def remove_pod(self, sandbox_id: str, pod_uid: str = "") -> list[CpusetUpdate]:
        """StopPodSandbox / RemovePodSandbox: release every container of the sandbox and its pod entry.

        ``pod_uid`` matches only records and entries that know no sandbox id (a newer sandbox of
        the same pod keeps its own)."""

        def mine(sandbox: str, uid: str) -> bool:
            return sandbox == sandbox_id if sandbox else bool(pod_uid) and uid == pod_uid

        if pod_uid:
            self.abandon(pod_uid)  # a parked whole-pod admission of the pod
        for entry in [e for e in self.pods.values() if mine(e.sandbox_id, e.uid)]:
            self.release_entry(entry)
        for record in [r for r in self.records.values() if mine(r.sandbox_id, r.pod_uid)]:
            self.release(record)
        return self._with_retries(self._pool_updates())

    def _with_retries(self, updates: list[CpusetUpdate]) -> list[CpusetUpdate]:
        """``updates`` plus those of waiting containers admitted now that resources were released."""
        if not self.waiting:
            return updates
        retried = self.retry_waiting()
        if not retried:
            return updates
        merged = {u.container_id: u for u in [*updates, *retried, *self._pool_updates()]}
        return list(merged.values())

    # -- shared pool ----------------------------------------------------------------------------------
    def _pool_updates(self, exclude: str = "") -> list[CpusetUpdate]:
        """Updates for the shared containers when the pool moved (``exclude``: the one being created).

        With more than :attr:`inline_limit` shared containers nothing is computed here (the request
        path stays O(1)); :attr:`pool_update_deferred` is set instead and :meth:`stale_shared` lists
        them later, off the request path.
        """
        pool = self.manager.shared_pool()
        if pool == self._pool:
            return []
        self._pool = pool
        self.generation += 1
        shared: list[ContainerRecord] = []
        limit = self.inline_limit
        for cid, record in self.records.items():
            if record.exclusive is None and cid != exclude and not record.stopped:
                shared.append(record)
                if limit is not None and len(shared) > limit:
                    self.pool_update_deferred = True
                    return []
        text = cpuset_text(pool)
        updates = []
        for record in shared:
            if record.applied != text:
                record.applied = text
                updates.append(CpusetUpdate(record.container_id, pool, record.mems))
        return updates

    def take_deferred(self) -> bool:
        """Whether a pool change was left for :meth:`stale_shared` (and reset the flag)."""
        deferred, self.pool_update_deferred = self.pool_update_deferred, False
        return deferred

    def stale_shared(self) -> list[str]:
        """Shared containers not yet told the current pool."""
        text = cpuset_text(self._pool)
        return [cid for cid, r in self.records.items() if r.exclusive is None and r.applied != text and not r.stopped]

    def update_for(self, container_id: str) -> CpusetUpdate | None:
        """The desired cpuset of one container as an update (e.g. to re-pin it at POST_START)."""
        record = self.records.get(container_id)
        if record is None:
            return None
        cpus, mems = self.desired(record)
        record.applied = cpuset_text(cpus)
        record.adjusted = True
        return CpusetUpdate(container_id, cpus, mems)

    # -- reconciliation -------------------------------------------------------------------------------
    def synchronize(self, pods: Sequence[Sandbox], containers: Sequence[RuntimeContainer]) -> SyncResult:
        """Reconcile with the runtime's complete list of pods and containers (see the module docstring)."""
        sandboxes = {p.id: p for p in pods}
        live = {c.id: c for c in containers if c.state.live}
        present = {c.id for c in containers}
        dropped = []
        for cid, record in list(self.records.items()):
            if cid in live:
                record.stopped = False
            elif cid in present and record.managed and not record.whole_pod and record.sandbox_id in sandboxes:
                record.stopped = True  # stopped, not removed: keeps its allocation for a restart (self.stop)
            else:
                dropped.append(cid)
                self.release(record)
        for entry in [e for e in self.pods.values() if e.sandbox_id not in sandboxes]:
            self.release_entry(entry)  # the pod went while the agent was away
        adopted: list[str] = []
        failed: list[tuple[str, str, str]] = []
        unknown = [c for c in live.values() if c.id not in self.records or self.records[c.id].unadmitted]
        unknown.sort(
            key=lambda c: (sandboxes[c.pod_sandbox_id].uid if c.pod_sandbox_id in sandboxes else "", c.name, c.id)
        )
        self.waiting = {}
        for c in unknown:
            sandbox = sandboxes.get(c.pod_sandbox_id) or Sandbox(id=c.pod_sandbox_id)
            self.records.pop(c.id, None)  # a placeholder of an earlier failed adoption: try again
            try:
                self._adopt(sandbox, c, live)
            except AdmissionRejected as exc:
                failed.append((c.id, exc.reason, exc.message))
                self._unadmitted(sandboxes, c, exc.reason, exc.message)
                if exc.reason not in FINAL_REJECTIONS:
                    self.waiting[c.id] = (sandbox, c)  # retried whenever resources are released
            adopted.append(c.id)
        # finished init containers removed while the agent was away: release them now
        names_in: dict[str, set[str]] = {}
        for c in containers:
            names_in.setdefault(c.pod_sandbox_id, set()).add(c.name)
        for entry in list(self.pods.values()):
            names = names_in.get(entry.sandbox_id, set())
            for name in sorted(entry.regular_init - entry.released - names):
                if entry.finished(name) and f"{entry.uid}/{name}" not in self.holders:
                    self.release_init(entry, name)
        self.refresh_pool()
        updates: list[CpusetUpdate] = []
        for cid, c in live.items():
            record = self.records.get(cid) or self._unadmitted(sandboxes, c, "Released", "its pod was released")
            cpus, mems = self.desired(record)
            reported = parse_cpuset(c.resources.cpus)
            reported_mems = parse_cpuset(c.resources.mems)
            if reported != cpus or (mems is not None and reported_mems != mems):
                updates.append(CpusetUpdate(cid, cpus, mems))
                record.adjusted = False  # re-pin again at POST_START: the update may race the start
            record.applied = cpuset_text(cpus)
        self.generation += 1
        return SyncResult(tuple(updates), tuple(adopted), tuple(dropped), tuple(failed))

    def _unadmitted(
        self, sandboxes: Mapping[str, Sandbox], c: RuntimeContainer, reason: str, message: str
    ) -> ContainerRecord:
        """Register a running container that holds nothing: it runs in the shared pool."""
        sandbox = sandboxes.get(c.pod_sandbox_id) or Sandbox(id=c.pod_sandbox_id)
        record = ContainerRecord(
            container_id=c.id,
            sandbox_id=c.pod_sandbox_id,
            pod_uid=sandbox.uid or c.pod_sandbox_id,
            pod_name=sandbox.name,
            namespace=sandbox.namespace,
            name=c.name,
            qos="",
            error=f"{reason}: {message}",
        )
        self.records[c.id] = record
        self.generation += 1
        return record

    def _adopt(self, sandbox: Sandbox, c: RuntimeContainer, live: Mapping[str, RuntimeContainer]) -> None:
        """Register a running container the agent does not know (raises :class:`AdmissionRejected`)."""
        entry = self._pod_entry(sandbox) or settled(self._admit_pod(sandbox, c.name))
        key = f"{entry.uid if entry is not None else sandbox.uid or sandbox.id}/{c.name}"
        holder = self.holders.get(key)
        if holder == c.id:  # its own placeholder (restored from a checkpoint)
            del self.holders[key]
            holder = None
        if holder is not None and holder in live:
            raise AdmissionRejected("DuplicateContainer", f"container {holder[:12]} already runs as {key}")
        if entry is not None:
            self._bind(entry, sandbox, c)
            return
        info = derive(sandbox, c, self.lookup(sandbox))
        if holder is not None:
            self.transfer(holder, info)
        else:
            self.register(settled(self.admissions.admit_alone(info)))

    def retry_waiting(self) -> list[CpusetUpdate]:
        """Admit the running containers Synchronize could not admit (resources were short), where they
        fit now; the updates pin them. The others keep waiting in the shared pool."""
        updates: list[CpusetUpdate] = []
        for cid, (sandbox, c) in list(self.waiting.items()):
            placeholder = self.records.get(cid)
            if placeholder is None or not placeholder.unadmitted:
                del self.waiting[cid]
                continue
            del self.records[cid]
            try:
                self._adopt(sandbox, c, {cid: c})
            except AdmissionRejected:
                self.records[cid] = placeholder
                continue
            del self.waiting[cid]
            record = self.records[cid]
            cpus, mems = self.desired(record)
            record.applied = cpuset_text(cpus)
            updates.append(CpusetUpdate(cid, cpus, mems))
            self.generation += 1
        return updates

    def refresh_pool(self) -> None:
        """Take the manager's current shared pool as the one containers are told (no updates made)."""
        self._pool = self.manager.shared_pool()

    # -- configuration --------------------------------------------------------------------------------
    def reconfigure(self, config: NodeResourceConfig | Mapping[str, Any]) -> list[CpusetUpdate]:
        """Apply a new config to new admissions (raises ``ReconfigureRejected``); updates if the pool moved."""
        self.manager.reconfigure(config)
        self.generation += 1
        return self._pool_updates()

    # -- consistency ----------------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Every violated invariant (empty: consistent)."""
        return violations(self.records, self.pods, self.manager)

    # -- snapshots ------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """JSON-ready state: the manager's snapshot, the container registry and the whole pods."""
        return {
            "manager": self.manager.snapshot(),
            "containers": [r.to_dict() for r in self.records.values()],
            "pods": [e.to_dict() for e in self.pods.values()],
        }

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Restore a :meth:`snapshot`; raise :class:`CheckpointCorrupted` if it is inconsistent.

        Every problem of the document — its shape, an id the machine lacks, an inconsistency between the
        parts, a value the agent could not serve or write back — is a :class:`CheckpointCorrupted`
        (the caller quarantines the file and rebuilds from the runtime); no other exception escapes.
        On failure the container registry and whole pods are as before; the manager may hold part of the
        document: the caller discards this state."""
        before = (self.records, self.pods, self.holders, self._pool, self.saved_plugin_states)
        try:
            problems = self._restore(doc)
        except Exception as exc:
            problems = [] if isinstance(exc, CheckpointCorrupted) else [f"{type(exc).__name__}: {exc}"]
            self.records, self.pods, self.holders, self._pool, self.saved_plugin_states = before
            if not problems:
                raise
            raise CheckpointCorrupted(f"cannot restore the agent state: {problems[0]}") from exc
        if problems:
            self.records, self.pods, self.holders, self._pool, self.saved_plugin_states = before
            raise CheckpointCorrupted("inconsistent agent state: " + "; ".join(problems[:5]))
        self.generation += 1

    def _restore(self, doc: Mapping[str, Any]) -> list[str]:
        """The restore itself (any exception is a corrupted checkpoint); the invariants it violates."""
        manager_doc = doc["manager"]
        topology = self.manager.topology
        validate_manager_doc(manager_doc, {n.id for n in topology.numa_nodes}, {c.cpu for c in topology.cpus})
        records = [ContainerRecord.from_dict(r) for r in doc.get("containers", [])]
        self.manager.restore(manager_doc)
        entries = [PodEntry.from_dict(e, self.manager.pods) for e in doc.get("pods", [])]
        plugins = manager_doc.get("plugins") or {}
        known = {p.name for p in self.manager.plugins}
        self.saved_plugin_states = {k: v for k, v in plugins.items() if k not in known}
        self.records = {r.container_id: r for r in records}
        self.pods = {e.uid: e for e in entries}
        self.holders = {r.key: r.container_id for r in records}
        self._pool = self.manager.shared_pool()
        problems = self.check()
        if len(self.pods) != len(entries):
            problems.append("a pod is admitted as a whole twice")
        if not problems:
            # what the agent will do with this state at once must work: List, and the next checkpoint
            try:
                self.pod_resources()
                canonical_check(self.snapshot())
            except Exception as exc:
                problems.append(f"the restored state cannot be served: {type(exc).__name__}: {exc}")
        return problems

    # -- PodResources ---------------------------------------------------------------------------------
    def pod_resources(self) -> tuple[AllocatableResources, tuple[PodResources, ...]]:
        """The PodResources ``GetAllocatableResources`` and ``List`` answers now (see ``listing.py``)."""
        return pod_resources(self.records, self.pods, self.manager)

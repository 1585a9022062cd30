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
  the kubelet does, and each container receives its own allocation when it is created
  (``podadmission.py``, ``wholepod.py``);
* **one container at a time** — without the Pod (no API access, or not seen yet), or for a pod
  whose containers were already admitted that way: the container becomes a single-container pod
  ``<pod uid>/<container name>`` built from what NRI carries (``containers.py``, which documents what
  this cannot do), released when the container stops or goes.

Invariants: see ``consistency.py`` (checked by :meth:`check` and on every checkpoint restore).

Decisions:

* :meth:`create` — admit (or reject with :class:`AdmissionRejected`) and return the creation-time
  adjustment plus updates of running shared containers when the pool shrank (they travel in the
  CreateContainer answer, so the pool shrinks before the new container starts);
* :meth:`stop` / :meth:`remove_container` / :meth:`remove_pod` — release, and return updates when
  the pool grew. Allocations are keyed by pod uid and container name and kept across a container's
  restart, whatever the agent knows of the Pod (the kubelet's rule): a stopped container keeps its
  allocation (a one-at-a-time record is marked ``stopped``; a whole pod's stays with the pod) until
  the container is removed or its sandbox stops, and a container re-created under the same pod and
  name inherits it. One exception, because the runtime does not say which containers are init
  containers: the first creation of another container name in the sandbox releases the stopped
  one-at-a-time containers of that sandbox first (the kubelet creates the next container only after
  the init containers before it completed, and reuses their CPUs);
* :meth:`synchronize` — reconcile with the runtime's full list (``reconcile.py``).

The restart window: while no plugin is connected the runtime creates containers without NRI
adjustments (unpinned, on every CPU); Synchronize adopts them when the agent is back. A Guaranteed
container that then cannot be admitted (its CPUs were taken meanwhile) runs in the shared pool and
waits in :attr:`NodeAgentState.waiting` (metric ``numaplane_agent_unpinned_containers``): every release
(:meth:`stop`, :meth:`remove_container`, :meth:`remove_pod`) retries the waiting containers and pins
those that fit, and the next Synchronize (after a restart too) tries again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numaplane.agent import podadmission, reconcile
from numaplane.agent.admitting import ManagerAdmissions
from numaplane.agent.consistency import canonical_check, validate_manager_doc, violations
from numaplane.agent.containers import ContainerInfo, derive
from numaplane.agent.errors import AdmissionRejected, CheckpointCorrupted
from numaplane.agent.listing import pod_resources
from numaplane.agent.records import ContainerRecord, CreateDecision, PodLookup, PodStarted, SyncResult
from numaplane.agent.wholepod import PodEntry
from numaplane.nri.events import CpusetUpdate, RuntimeContainer, Sandbox, cpuset_text
from numaplane.nrt.podresources import AllocatableResources, PodResources
from numaplane.policy.asks import AdmissionRun
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.manager import Admission, ResourceManager
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "ContainerRecord",
    "CpusetUpdate",
    "CreateDecision",
    "NodeAgentState",
    "PodLookup",
    "PodStarted",
    "SyncResult",
    "cpuset_text",
]


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

    def abandon(self, pod_uid: str, *, waiting: bool = True) -> None:
        """Give up the parked admission of ``pod_uid`` (see :meth:`ManagerAdmissions.abandon`)."""
        if self.admissions.abandon(pod_uid, waiting=waiting):
            self.generation += 1

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

    def create(self, sandbox: Sandbox, container: RuntimeContainer) -> CreateDecision:
        """CreateContainer: admit and decide (raises :class:`AdmissionRejected`, or :class:`AnswersNeeded`
        — answer the parked run and call again)."""
        self.admissions.may_park = True
        try:
            return self._create(sandbox, container)
        finally:
            self.admissions.may_park = False

    def _create(self, sandbox: Sandbox, container: RuntimeContainer) -> CreateDecision:
        known = self.records.get(container.id)
        if known is not None:  # the same request again (e.g. answered after a reconnect)
            cpus, mems = self.desired(known)
            return CreateDecision(cpus, mems, known.exclusive is not None, env=self.admissions.env(known))
        entry = podadmission.pod_entry(self, sandbox) or podadmission.admit_pod(self, sandbox, container.name)
        if entry is not None:
            record = podadmission.bind(self, entry, sandbox, container)
        else:
            info = derive(sandbox, container, self.lookup(sandbox))
            self._release_completed(info.sandbox_id, container.name)
            predecessor_id = self.holders.get(info.key)
            if predecessor_id is not None and predecessor_id != container.id:
                record = self.transfer(predecessor_id, info)
            else:
                record = self.admissions.admit_alone(info)
                self.register(record)
        cpus, mems = self.desired(record)
        record.applied = cpuset_text(cpus)
        record.adjusted = True
        updates = self._pool_updates(exclude=record.container_id)
        env = self.admissions.env(record)
        return CreateDecision(cpus, mems, record.exclusive is not None, tuple(updates), env)

    def run_pod(self, sandbox: Sandbox) -> PodStarted:
        """RUN_POD_SANDBOX: admit the pod as a whole now if the Pod is known (a rejection is not an
        error here: the sandbox runs, and the pod's first CreateContainer retries and fails). Raises
        :class:`AnswersNeeded` as :meth:`create`."""
        if podadmission.pod_entry(self, sandbox) is not None:
            return PodStarted()
        self.admissions.may_park = True
        try:
            entry = podadmission.admit_pod(self, sandbox, None)
        except AdmissionRejected as exc:
            return PodStarted(tuple(self._pool_updates()), rejection=exc)
        finally:
            self.admissions.may_park = False
        return PodStarted(tuple(self._pool_updates()), admitted=entry is not None)

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
        retried = reconcile.retry_waiting(self)
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
        """Reconcile with the runtime's complete list of pods and containers (see ``reconcile.py``)."""
        return reconcile.synchronize(self, pods, containers)

    def retry_waiting(self) -> list[CpusetUpdate]:
        """Pin the waiting containers that fit now (see ``reconcile.py``)."""
        return reconcile.retry_waiting(self)

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

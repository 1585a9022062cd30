"""The agent's state machine: NRI container events in, cpuset decisions out (synchronous, no I/O).

:class:`AgentCore` owns a :class:`~numaplane.policy.manager.ResourceManager`, a registry of the
containers the runtime runs (:class:`ContainerRecord`, keyed by container id) and the pods admitted
as a whole (:class:`~numaplane.agent.wholepod.PodEntry`, keyed by pod uid). Every method is a plain
call that mutates state and returns what the runtime must be told; the NRI handler (``handler.py``)
serialises the calls and does the talking. The state machine sees only the agent's own values
(:mod:`numaplane.nri.events`: sandboxes, containers, cpuset updates), never a protobuf message: the
handler translates them with :mod:`numaplane.nri.translate` (import-linter checks this).

Two ways a container is admitted:

* **with its whole pod** (``whole_pod``) — when the Pod is known from the API (``pod_lookup``) and
  needs the manager (Guaranteed, or extended resources): at the pod's first CreateContainer, or at
  RUN_POD_SANDBOX when the Pod is known then (:meth:`run_pod`), the manager admits the real pod once
  (manager pod = the pod uid) exactly as the kubelet does — init containers' resources reused by
  later containers, topology scope ``pod``, pod-level resources — and each container receives its
  own allocation when it is created. A container's allocation outlives the container (a restarted
  container gets it again); a finished regular init container's RemoveContainer releases what later
  containers do not reuse; the pod's StopPodSandbox / RemovePodSandbox releases the rest. See
  ``wholepod.py``;
* **one container at a time** — without the Pod (no API access, or not seen yet), or for a pod
  whose containers were already admitted that way: the container becomes a single-container pod
  ``<pod uid>/<container name>`` built from what NRI carries (``containers.py``, which documents what
  this cannot do), released when the container stops or goes.

Invariants (checked by :meth:`AgentCore.check` and on every checkpoint restore):

* a container admitted one at a time (``managed``, not ``whole_pod``) holds the manager pod
  ``<pod uid>/<container name>``; a ``whole_pod`` container belongs to the pod entry of its uid and
  sandbox; every manager pod belongs to exactly one live record or one pod entry;
* a record's ``exclusive`` CPUs equal the CPU plugin's assignment for it; the exclusive CPUs of
  different pods (or one-at-a-time containers) are disjoint and disjoint from the shared pool — no
  CPU is held twice (within one pod a later container may reuse a regular init container's CPUs,
  as on the kubelet);
* a container's desired cpuset is its exclusive set, else the current shared pool; desired memory
  nodes are those of its pinned memory (``None``: the agent leaves ``cpuset.mems`` alone).

Decisions:

* :meth:`create` — admit (or reject with :class:`AdmissionRejected`) and return the creation-time
  adjustment plus updates of running shared containers when the pool shrank (they travel in the
  CreateContainer answer, so the pool shrinks before the new container starts);
* :meth:`stop` / :meth:`remove_container` / :meth:`remove_pod` — release, and return updates when
  the pool grew; a container re-created under the same pod and name while its predecessor is still
  registered (a restart without a StopContainer, e.g. a crash) inherits the predecessor's allocation;
* :meth:`synchronize` — reconcile with the runtime's full list: drop records of containers that are
  gone or stopped and pod entries whose sandbox is gone, adopt live containers it does not know
  (admission as at creation, whole pods included; a container that cannot be admitted keeps running
  in the shared pool and is reported), release finished init containers removed meanwhile, and
  return an update for every live container whose cpuset differs from the desired one.

The restart window: while no plugin is connected the runtime creates containers without NRI
adjustments (unpinned, on every CPU); Synchronize adopts them when the agent is back. A Guaranteed
container that then cannot be admitted (its CPUs were taken meanwhile) runs in the shared pool and
waits in :attr:`AgentCore.waiting` (metric ``numaplane_agent_unpinned_containers``): every release
(:meth:`stop`, :meth:`remove_container`, :meth:`remove_pod`) retries the waiting containers and pins
those that fit, and the next Synchronize (after a restart too) tries again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numaplane.agent.containers import ContainerInfo, derive, parse_cpuset
from numaplane.agent.errors import AdmissionRejected, AnswersNeeded, CheckpointCorrupted
from numaplane.agent.wholepod import PodEntry, admission_pod, pod_needs_manager
from numaplane.nri.events import CpusetUpdate, RuntimeContainer, Sandbox, cpuset_text
from numaplane.nrt.from_manager import allocation_state
from numaplane.nrt.podresources import AllocatableResources, ContainerResources, PodResources
from numaplane.policy.asks import AdmissionRun, answer_in_process, answers_in_process
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import AdmissionError
from numaplane.policy.manager import Admission, ResourceManager
from numaplane.policy.preferences import parse_preferences
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "AgentCore",
    "ContainerRecord",
    "CpusetUpdate",
    "CreateDecision",
    "PodLookup",
    "PodStarted",
    "SyncResult",
    "cpuset_text",
]

#: pod uid → the Pod from the Kubernetes API (or ``None`` when unknown).
PodLookup = Callable[[str], Pod | None]


@dataclass(frozen=True, slots=True)
class CreateDecision:
    """The answer to one CreateContainer: the new container's cpuset and updates of others."""

    cpus: CPUSet
    mems: CPUSet | None
    exclusive: bool
    updates: tuple[CpusetUpdate, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # from the plugins' allocations (``extra["env"]``), sorted


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What :meth:`AgentCore.synchronize` did. ``failed`` lists ``(container id, reason, message)``."""

    updates: tuple[CpusetUpdate, ...]
    adopted: tuple[str, ...]
    dropped: tuple[str, ...]
    failed: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class PodStarted:
    """What :meth:`AgentCore.run_pod` did: ``admitted`` when the pod was admitted as a whole now;
    ``rejection`` when that admission failed (it is retried, and reported, at CreateContainer)."""

    updates: tuple[CpusetUpdate, ...] = ()
    admitted: bool = False
    rejection: AdmissionRejected | None = None


@dataclass
class ContainerRecord:
    """A container the agent tracks. ``applied`` is the cpuset string the runtime was last told.

    ``whole_pod``: admitted with its whole pod (manager pod = ``pod_uid``), else one at a time
    (manager pod = :attr:`key`, when ``managed``).
    """

    container_id: str
    sandbox_id: str
    pod_uid: str
    pod_name: str
    namespace: str
    name: str
    qos: str
    managed: bool = False
    exclusive: CPUSet | None = None
    mems: CPUSet | None = None
    applied: str = ""
    adjusted: bool = False
    error: str = ""
    whole_pod: bool = False

    @property
    def key(self) -> str:
        return f"{self.pod_uid}/{self.name}"

    @property
    def unadmitted(self) -> bool:
        """A running container Synchronize could not admit (a placeholder in the shared pool)."""
        return bool(self.error) and not self.error.startswith("Released:") and not self.managed

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.container_id,
            "sandbox": self.sandbox_id,
            "podUID": self.pod_uid,
            "pod": self.pod_name,
            "namespace": self.namespace,
            "name": self.name,
            "qos": self.qos,
            "managed": self.managed,
            "applied": self.applied,
        }
        if self.exclusive is not None:
            doc["exclusive"] = self.exclusive.format()
        if self.mems is not None:
            doc["mems"] = self.mems.format()
        if self.error:
            doc["error"] = self.error
        if self.whole_pod:
            doc["wholePod"] = True
        return doc

    @staticmethod
    def from_dict(doc: Mapping[str, Any]) -> ContainerRecord:
        exclusive = doc.get("exclusive")
        mems = doc.get("mems")
        return ContainerRecord(
            container_id=str(doc["id"]),
            sandbox_id=str(doc.get("sandbox", "")),
            pod_uid=str(doc["podUID"]),
            pod_name=str(doc.get("pod", "")),
            namespace=str(doc.get("namespace", "")),
            name=str(doc["name"]),
            qos=str(doc.get("qos", "")),
            managed=bool(doc.get("managed", False)),
            exclusive=None if exclusive is None else CPUSet.parse(str(exclusive)),
            mems=None if mems is None else CPUSet.parse(str(mems)),
            applied=str(doc.get("applied", "")),
            error=str(doc.get("error", "")),
            whole_pod=bool(doc.get("wholePod", False)),
        )


class AgentCore:
    """Containers, the resource manager, and the decisions between them. Not thread-safe: callers serialise."""

    def __init__(self, manager: ResourceManager, *, pod_lookup: PodLookup | None = None) -> None:
        self.manager = manager
        self.pod_lookup = pod_lookup
        self.records: dict[str, ContainerRecord] = {}
        self.pods: dict[str, PodEntry] = {}  # pods admitted as a whole, by uid
        self._by_key: dict[str, str] = {}
        self._pool = manager.shared_pool()
        self.inline_limit: int | None = None  # see _pool_updates
        self.pool_update_deferred = False
        self.generation = 0  # bumped on every state change (the checkpoint writer follows it)
        self.saved_plugin_states: dict[str, Any] = {}  # states of plugins not registered yet
        # running containers Synchronize could not admit for lack of resources, retried on releases
        self.waiting: dict[str, tuple[Sandbox, RuntimeContainer]] = {}
        # admissions waiting for out-of-process plugins' answers, by manager pod (see _manager_admit)
        self.parked: dict[str, AdmissionRun[Admission]] = {}
        self._abandoned: set[str] = set()  # parked admissions given up: their waiting call is refused
        self._may_park = False

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
    def _lookup(self, sandbox: Sandbox) -> Pod | None:
        if self.pod_lookup is None or not sandbox.uid:
            return None
        return self.pod_lookup(sandbox.uid)

    def _admit(self, info: ContainerInfo) -> ContainerRecord:
        """Admit ``info`` alone (raises :class:`AdmissionRejected`); the record is not registered yet."""
        record = ContainerRecord(
            container_id=info.container_id,
            sandbox_id=info.sandbox_id,
            pod_uid=info.pod_uid,
            pod_name=info.pod_name,
            namespace=info.namespace,
            name=info.name,
            qos=info.qos,
        )
        where = {"pod": f"{info.namespace}/{info.pod_name}", "container": info.name}
        if not info.needs_manager:
            if info.preferences:
                try:
                    parse_preferences(info.preferences, self.manager.config.topology_policy)
                except AdmissionError as exc:
                    raise AdmissionRejected(exc.reason, exc.message, **where) from None
            return record
        admission = self._manager_admit(info.pod, where)
        record.managed = True
        (container,) = admission.containers
        record.exclusive = self.manager.cpu.state.get(info.key, info.name)
        numa = container.memory_numa
        if numa:
            record.mems = CPUSet(numa)
        return record

    def _manager_admit(self, pod: Pod, where: dict[str, str]) -> Admission:
        """The manager's admission of ``pod``, a rejection raised as :class:`AdmissionRejected` (nothing held then).

        Asks of in-process plugins are answered here. An admission that asks an out-of-process plugin
        is *parked* (``parked[pod uid]``) and :class:`AnswersNeeded` raised, when the call allows it
        (:meth:`create`, :meth:`run_pod`): the caller answers the run and makes the same call again,
        which takes the finished run's decision. Everything a call does before it reaches here is
        idempotent, so the call can be made again. Elsewhere (Synchronize, retries of waiting
        containers) such an admission is given up and refused with ``PluginUnavailable``.
        """
        run = self.parked.pop(pod.uid, None)
        if run is None and pod.uid in self._abandoned:
            self._abandoned.discard(pod.uid)  # the call that waited for it comes back: refuse it
            raise AdmissionRejected(
                "PluginUnavailable", "the admission was abandoned while plugins were asked", **where
            )
        try:
            if run is None:
                run = self.manager.begin(pod)
            plugins = {p.name: p for p in self.manager.plugins}
            while not run.done and all(answers_in_process(plugins[a.plugin]) for a in run.asks):
                run.answer([answer_in_process(plugins, a) for a in run.asks])
        except AdmissionError as exc:
            raise AdmissionRejected(exc.reason, exc.message, **where) from None
        except Exception as exc:  # a plugin bug must not take the agent down; the pod is refused
            if run is not None:
                run.abort()
            raise AdmissionRejected("UnexpectedAdmissionError", f"{type(exc).__name__}: {exc}", **where) from None
        if not run.done:
            if not self._may_park:
                run.abort()
                names = sorted({a.plugin for a in run.asks} or {"?"})
                message = f"plugin(s) {', '.join(names)} run out of process and are asked only at creation"
                raise AdmissionRejected("PluginUnavailable", message, **where)
            self.parked[pod.uid] = run
            raise AnswersNeeded(run)
        admission = run.result
        if admission is None:
            raise AdmissionRejected(
                "PluginUnavailable", "the admission was abandoned while plugins were asked", **where
            )
        if not admission.admitted:
            where = {**where, "container": admission.container or where.get("container", "")}
            raise AdmissionRejected(admission.reason, admission.message, **where)
        return admission

    def abandon(self, pod_uid: str, *, waiting: bool = True) -> None:
        """Give up the parked admission of ``pod_uid`` (its pod went, or its caller): what it holds is
        released; ``waiting``: a call still waits for it, and is refused when it comes back."""
        run = self.parked.pop(pod_uid, None)
        if run is not None:
            run.abort()
            if waiting:
                self._abandoned.add(pod_uid)
            self.generation += 1

    def _entry(self, sandbox: Sandbox) -> PodEntry | None:
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
            if self._by_key.get(record.key) == record.container_id:
                del self._by_key[record.key]
            record.managed = record.whole_pod = False
            record.exclusive = record.mems = None
            record.error = f"PodSandboxReplaced: the pod now runs in sandbox {sandbox.id[:12]}"
        self._release_entry(entry)
        return None

    def _admit_pod(self, sandbox: Sandbox, name: str | None) -> PodEntry | None:
        """Admit the sandbox's pod as a whole (raises :class:`AdmissionRejected`); ``None`` when the
        Pod is unknown, needs no admission, or already has containers admitted one at a time.

        ``name``: the container being created (``None`` at RUN_POD_SANDBOX). Records of regular init
        containers before it (admitted one at a time while the Pod was not known yet) have finished:
        they are released first; any other live container of the sandbox keeps the pod one-at-a-time.
        """
        api = self._lookup(sandbox)
        if api is None:
            return None
        pod = admission_pod(api)
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
                self._release(r)
        self._manager_admit(pod, {"pod": f"{pod.namespace}/{pod.name}", "container": name or ""})
        entry = PodEntry(pod, sandbox.id)
        self.pods[pod.uid] = entry
        self.generation += 1
        return entry

    def _bind(self, entry: PodEntry, sandbox: Sandbox, container: RuntimeContainer) -> ContainerRecord:
        """Register ``container`` with its allocation from the pod's admission (registered; no I/O)."""
        name = container.name
        predecessor = self._by_key.get(f"{entry.uid}/{name}")
        if predecessor is not None and predecessor != container.id:
            self._release(self.records[predecessor])  # a re-created container: the allocation stays the pod's
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
            record.managed = record.whole_pod = True
            record.exclusive = self.manager.cpu.state.get(entry.uid, name)
            record.mems = self._mems(entry.uid, name)
        entry.note_created(name)
        self._register(record)
        return record

    def _mems(self, pod_uid: str, name: str) -> CPUSet | None:
        admission = self.manager.admissions.get(pod_uid)
        if admission is not None:
            for c in admission.containers:
                if c.name == name:
                    numa = c.memory_numa
                    return CPUSet(numa) if numa else None
        return None

    def _env(self, record: ContainerRecord) -> tuple[tuple[str, str], ...]:
        """Environment the plugins asked for this container (``PluginAllocation.extra["env"]``): a
        vendor plugin's allocation is enforced through the same NRI adjustment as the cpuset. The
        manager knows the container under its own key, or under its pod's uid when admitted whole."""
        admissions = self.manager.admissions
        admission = admissions.get(record.key) if record.key in admissions else admissions.get(record.pod_uid)
        env: dict[str, str] = {}
        if admission is not None:
            for c in admission.containers:
                if c.name == record.name:
                    for alloc in c.allocations:
                        wanted = alloc.extra.get("env")
                        if isinstance(wanted, dict):
                            env.update({str(k): str(v) for k, v in wanted.items()})
        return tuple(sorted(env.items()))

    def _register(self, record: ContainerRecord) -> None:
        self.records[record.container_id] = record
        self._by_key[record.key] = record.container_id
        self.generation += 1

    def create(self, sandbox: Sandbox, container: RuntimeContainer) -> CreateDecision:
        """CreateContainer: admit and decide (raises :class:`AdmissionRejected`, or :class:`AnswersNeeded`
        — answer the parked run and call again)."""
        self._may_park = True
        try:
            return self._create(sandbox, container)
        finally:
            self._may_park = False

    def _create(self, sandbox: Sandbox, container: RuntimeContainer) -> CreateDecision:
        known = self.records.get(container.id)
        if known is not None:  # the same request again (e.g. answered after a reconnect)
            cpus, mems = self.desired(known)
            return CreateDecision(cpus, mems, known.exclusive is not None, env=self._env(known))
        entry = self._entry(sandbox) or self._admit_pod(sandbox, container.name)
        if entry is not None:
            record = self._bind(entry, sandbox, container)
        else:
            info = derive(sandbox, container, self._lookup(sandbox))
            predecessor_id = self._by_key.get(info.key)
            if predecessor_id is not None and predecessor_id != container.id:
                record = self._transfer(predecessor_id, info)
            else:
                record = self._admit(info)
                self._register(record)
        cpus, mems = self.desired(record)
        record.applied = cpuset_text(cpus)
        record.adjusted = True
        updates = self._pool_updates(exclude=record.container_id)
        env = self._env(record)
        return CreateDecision(cpus, mems, record.exclusive is not None, tuple(updates), env)

    def run_pod(self, sandbox: Sandbox) -> PodStarted:
        """RUN_POD_SANDBOX: admit the pod as a whole now if the Pod is known (a rejection is not an
        error here: the sandbox runs, and the pod's first CreateContainer retries and fails). Raises
        :class:`AnswersNeeded` as :meth:`create`."""
        if self._entry(sandbox) is not None:
            return PodStarted()
        self._may_park = True
        try:
            entry = self._admit_pod(sandbox, None)
        except AdmissionRejected as exc:
            return PodStarted(tuple(self._pool_updates()), rejection=exc)
        finally:
            self._may_park = False
        return PodStarted(tuple(self._pool_updates()), admitted=entry is not None)

    def _transfer(self, old_id: str, info: ContainerInfo) -> ContainerRecord:
        """A container re-created under the same pod and name takes over its predecessor's allocation."""
        old = self.records.pop(old_id)
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
        self._register(record)
        return record

    # -- release --------------------------------------------------------------------------------------
    def _release(self, record: ContainerRecord) -> None:
        """Forget the record; a one-at-a-time container also gives its allocation back (a whole
        pod's container leaves it to the pod: a restarted container gets it again)."""
        self.records.pop(record.container_id, None)
        if self._by_key.get(record.key) == record.container_id:
            del self._by_key[record.key]
            if record.managed and not record.whole_pod:
                self.manager.remove(record.key)
        self.generation += 1

    def _release_entry(self, entry: PodEntry) -> None:
        """Release a whole pod: its records and everything the manager holds for it."""
        for record in [r for r in self.records.values() if r.whole_pod and r.pod_uid == entry.uid]:
            self._release(record)
        if self.pods.get(entry.uid) is entry:
            del self.pods[entry.uid]
        self.manager.remove(entry.uid)
        self.generation += 1

    def _release_init(self, entry: PodEntry, name: str) -> None:
        """A finished regular init container is gone: give back what later containers do not reuse."""
        self.manager.remove_container(entry.uid, name)
        entry.released.add(name)
        self.generation += 1

    def stop(self, container_id: str) -> list[CpusetUpdate]:
        """StopContainer: forget the container (releasing a one-at-a-time container); updates for a grown pool."""
        record = self.records.get(container_id)
        if record is None:
            return []
        self._release(record)
        self.waiting.pop(container_id, None)
        return self._with_retries(self._pool_updates())

    def remove_container(
        self, container_id: str, pod_uid: str = "", name: str = "", sandbox_id: str = ""
    ) -> list[CpusetUpdate]:
        """RemoveContainer: as :meth:`stop`; besides, the removal of a finished regular init
        container of a whole pod (identified by the event's pod uid, name and sandbox when the
        agent no longer has its record) releases what later containers do not reuse."""
        record = self.records.get(container_id)
        if record is not None:
            pod_uid, name, sandbox_id = record.pod_uid, record.name, record.sandbox_id
            self._release(record)
        entry = self.pods.get(pod_uid) if pod_uid else None
        if (
            entry is not None
            and (not sandbox_id or sandbox_id == entry.sandbox_id)
            and entry.finished(name)
            and name not in entry.released
            and f"{pod_uid}/{name}" not in self._by_key
        ):
            self._release_init(entry, name)
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
            self._release_entry(entry)
        for record in [r for r in self.records.values() if mine(r.sandbox_id, r.pod_uid)]:
            self._release(record)
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
            if record.exclusive is None and cid != exclude:
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
        return [cid for cid, r in self.records.items() if r.exclusive is None and r.applied != text]

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
        dropped = [cid for cid in self.records if cid not in live]
        for cid in dropped:
            self._release(self.records[cid])
        for entry in [e for e in self.pods.values() if e.sandbox_id not in sandboxes]:
            self._release_entry(entry)  # the pod went while the agent was away
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
                if exc.reason not in _FINAL_REJECTIONS:
                    self.waiting[c.id] = (sandbox, c)  # retried whenever resources are released
            adopted.append(c.id)
        # finished init containers removed while the agent was away: release them now
        present: dict[str, set[str]] = {}
        for c in containers:
            present.setdefault(c.pod_sandbox_id, set()).add(c.name)
        for entry in list(self.pods.values()):
            names = present.get(entry.sandbox_id, set())
            for name in sorted(entry.regular_init - entry.released - names):
                if entry.finished(name) and f"{entry.uid}/{name}" not in self._by_key:
                    self._release_init(entry, name)
        self._pool = self.manager.shared_pool()
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
        entry = self._entry(sandbox) or self._admit_pod(sandbox, c.name)
        key = f"{entry.uid if entry is not None else sandbox.uid or sandbox.id}/{c.name}"
        holder = self._by_key.get(key)
        if holder == c.id:  # its own placeholder (restored from a checkpoint)
            del self._by_key[key]
            holder = None
        if holder is not None and holder in live:
            raise AdmissionRejected("DuplicateContainer", f"container {holder[:12]} already runs as {key}")
        if entry is not None:
            self._bind(entry, sandbox, c)
            return
        info = derive(sandbox, c, self._lookup(sandbox))
        if holder is not None:
            self._transfer(holder, info)
        else:
            self._register(self._admit(info))

    # -- configuration --------------------------------------------------------------------------------
    def reconfigure(self, config: NodeResourceConfig | Mapping[str, Any]) -> list[CpusetUpdate]:
        """Apply a new config to new admissions (raises ``ReconfigureRejected``); updates if the pool moved."""
        self.manager.reconfigure(config)
        self.generation += 1
        return self._pool_updates()

    # -- consistency ----------------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Every violated invariant (empty: consistent)."""
        problems: list[str] = []
        keys: dict[str, str] = {}
        owners: dict[str, int] = {}  # holder (a whole pod's uid, else a container key) → exclusive CPUs
        cpu_state = self.manager.cpu.state
        for cid, r in self.records.items():
            if r.container_id != cid:
                problems.append(f"record {cid} names container {r.container_id}")
            if r.whole_pod:
                entry = self.pods.get(r.pod_uid)
                if entry is None or entry.sandbox_id != r.sandbox_id or not entry.knows(r.name):
                    problems.append(f"container {cid} ({r.key}) belongs to no pod admitted as a whole")
                if r.key in keys:
                    problems.append(f"{r.key} is held by containers {keys[r.key]} and {cid}")
                keys[r.key] = cid
                if cpu_state.get(r.pod_uid, r.name) != r.exclusive:
                    problems.append(f"container {cid} ({r.key}): exclusive CPUs differ from the CPU state")
            elif r.managed:
                if r.key in keys:
                    problems.append(f"{r.key} is held by containers {keys[r.key]} and {cid}")
                keys[r.key] = cid
                if r.key not in self.manager.pods:
                    problems.append(f"container {cid} ({r.key}) is not admitted in the resource manager")
                if cpu_state.get(r.key, r.name) != r.exclusive:
                    problems.append(f"container {cid} ({r.key}): exclusive CPUs differ from the CPU state")
            elif r.exclusive is not None:
                problems.append(f"container {cid} holds exclusive CPUs without an admission")
            if r.exclusive is not None:
                holder = r.pod_uid if r.whole_pod else r.key
                owners[holder] = owners.get(holder, 0) | r.exclusive.mask
        for uid, entry in self.pods.items():
            if entry.uid != uid or uid not in self.manager.pods:
                problems.append(f"pod {uid} admitted as a whole is not admitted in the resource manager")
            for name in entry.released:
                if cpu_state.get(uid, name) is not None:
                    problems.append(f"pod {uid}: released init container {name} still holds CPUs")
            held = cpu_state.pod_cpus(uid).mask  # also containers not created yet
            owners[uid] = owners.get(uid, 0) | held
        seen = 0
        for mask in owners.values():
            if mask & seen:
                problems.append(f"CPUs {CPUSet.from_mask(mask & seen)} are held twice")
            seen |= mask
        for key in self.manager.pods:
            if key not in keys and key not in self.pods:
                problems.append(f"resource manager pod {key} belongs to no container")
        if seen & self.manager.shared_pool().mask:
            problems.append("exclusive CPUs overlap the shared pool")
        return problems

    # -- snapshots ------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """JSON-ready state: the manager's snapshot, the container registry and the whole pods."""
        return {
            "manager": self.manager.snapshot(),
            "containers": [r.to_dict() for r in self.records.values()],
            "pods": [e.to_dict() for e in self.pods.values()],
        }

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Restore a :meth:`snapshot`; raise :class:`CheckpointCorrupted` if it is inconsistent."""
        try:
            manager_doc = doc["manager"]
            _validate_manager_doc(manager_doc, {n.id for n in self.manager.topology.numa_nodes})
            records = [ContainerRecord.from_dict(r) for r in doc.get("containers", [])]
            self.manager.restore(manager_doc)
            entries = [PodEntry.from_dict(e, self.manager.pods) for e in doc.get("pods", [])]
        except Exception as exc:
            raise CheckpointCorrupted(f"cannot restore the agent state: {type(exc).__name__}: {exc}") from exc
        plugins = manager_doc.get("plugins") or {}
        known = {p.name for p in self.manager.plugins}
        self.saved_plugin_states = {k: v for k, v in plugins.items() if k not in known}
        self.records = {r.container_id: r for r in records}
        self.pods = {e.uid: e for e in entries}
        self._by_key = {r.key: r.container_id for r in records}
        self._pool = self.manager.shared_pool()
        problems = self.check()
        if len(self.pods) != len(entries):
            problems.append("a pod is admitted as a whole twice")
        if not problems:
            # what the agent will do with this state at once must work: List, and the next checkpoint
            try:
                self.pod_resources()
                _canonical_check(self.snapshot())
            except Exception as exc:
                problems.append(f"the restored state cannot be served: {type(exc).__name__}: {exc}")
        if problems:
            raise CheckpointCorrupted("inconsistent agent state: " + "; ".join(problems[:5]))
        self.generation += 1

    # -- PodResources ---------------------------------------------------------------------------------
    def pod_resources(self) -> tuple[AllocatableResources, tuple[PodResources, ...]]:
        """The PodResources ``GetAllocatableResources`` and ``List`` answers for the current state.

        A pod admitted as a whole is listed as the kubelet lists it: its app containers and sidecars,
        created yet or not, with what the manager gave them (not its regular init containers, whose
        CPUs later containers may reuse). Every other registered container is listed under its pod
        (shared-pool containers with no CPU ids, as the kubelet lists them); exclusive CPUs, pinned
        memory and devices come from the manager.
        """
        allocatable, listed = allocation_state(self.manager, vendor_devices=True).to_podresources()
        by_container = {(p.namespace, p.name, c.name): c for p in listed for c in p.containers}
        pods: dict[tuple[str, str], list[ContainerResources]] = {}
        for r in self.records.values():
            entry = self.pods.get(r.pod_uid)
            if entry is not None and entry.sandbox_id == r.sandbox_id:
                continue
            found = by_container.get((r.namespace, r.pod_name, r.name)) or ContainerResources(r.name)
            pods.setdefault((r.namespace, r.pod_name), []).append(found)
        for entry in self.pods.values():
            ns, name = entry.pod.namespace, entry.pod.name
            pods.setdefault((ns, name), []).extend(
                by_container.get((ns, name, c)) or ContainerResources(c) for c in entry.listed
            )
        return allocatable, tuple(PodResources(name, ns, tuple(cs)) for (ns, name), cs in pods.items())


#: Rejections that retrying cannot cure (the others, such as a lack of CPUs, may pass later).
_FINAL_REJECTIONS = frozenset({"InvalidContainer", "DuplicateContainer", "InvalidPreference"})

_NUMA_KEYS = frozenset({"numa", "numaAffinity", "cells", "numaNode", "numaNodes"})


def _validate_manager_doc(doc: Any, numa_ids: set[int]) -> None:
    """Check a manager snapshot's shape and every NUMA id in it against this machine, before restoring
    (an id such as 2**32 would make bitmask arithmetic slow and large); raises ``ValueError``."""
    if not isinstance(doc, Mapping):
        raise ValueError("manager is not an object")
    for key in ("plugins", "pods", "admissions"):
        if not isinstance(doc.get(key) or {}, Mapping):
            raise ValueError(f"manager.{key} is not an object")
    pods = doc.get("pods") or {}
    for uid, adm in (doc.get("admissions") or {}).items():
        pod = adm.get("pod", uid) if isinstance(adm, Mapping) else uid
        if uid not in pods or pod not in pods:
            raise ValueError(f"admission {uid!r} has no pod")
    stack: list[Any] = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            for key, child in value.items():
                if key in _NUMA_KEYS:
                    ids = child if isinstance(child, list) else [child]
                    for i in ids:
                        if not isinstance(i, int) or isinstance(i, bool) or i not in numa_ids:
                            raise ValueError(f"{key}: NUMA id {str(i)[:24]!r} is not one of this machine's")
                elif key == "machineState" and isinstance(child, Mapping):
                    for k in child:
                        if not (isinstance(k, str) and k.isdigit() and len(k) < 8 and int(k) in numa_ids):
                            raise ValueError(f"machineState: NUMA id {str(k)[:24]!r} is not one of this machine's")
                stack.append(child)
        elif isinstance(value, list):
            stack.extend(value)


def _canonical_check(doc: Any) -> None:
    """The checkpoint writer's encoding of ``doc`` works (sorted keys: every key a string)."""
    import json

    json.dumps(doc, sort_keys=True, separators=(",", ":"))

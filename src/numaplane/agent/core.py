"""The agent's state machine: NRI container events in, cpuset decisions out (synchronous, no I/O).

:class:`AgentCore` owns a :class:`~numaplane.policy.manager.ResourceManager` and a registry of the
containers the runtime runs (:class:`ContainerRecord`, keyed by container id). Every method is a
plain call that mutates state and returns what the runtime must be told; the NRI handler
(``handler.py``) serialises the calls and does the talking.

Invariants (checked by :meth:`AgentCore.check` and on every checkpoint restore):

* a container admitted through the manager (``managed``) holds the manager pod
  ``<pod uid>/<container name>``; every manager pod belongs to exactly one live record;
* a record's ``exclusive`` CPUs equal the CPU plugin's assignment for it; exclusive sets are
  pairwise disjoint and disjoint from the shared pool — no CPU is held twice;
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
  gone or stopped, adopt live containers it does not know (admission as at creation; a container that
  cannot be admitted keeps running in the shared pool and is reported), and return an update for
  every live container whose cpuset differs from the desired one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from numaplane.agent.containers import ContainerInfo, derive, parse_cpuset
from numaplane.agent.errors import AdmissionRejected, CheckpointCorrupted
from numaplane.nri.proto import api_pb2
from numaplane.nrt.from_manager import allocation_state
from numaplane.nrt.podresources import AllocatableResources, ContainerResources, PodResources
from numaplane.policy.config import NodeResourceConfig
from numaplane.policy.errors import AdmissionError
from numaplane.policy.manager import ResourceManager
from numaplane.policy.preferences import parse_preferences
from numaplane.resources.pod import Pod
from numaplane.topology.cpuset import CPUSet

__all__ = [
    "AgentCore",
    "ContainerRecord",
    "CpusetUpdate",
    "CreateDecision",
    "PodLookup",
    "SyncResult",
    "cpuset_text",
]

#: pod uid → the Pod from the Kubernetes API (or ``None`` when unknown).
PodLookup = Callable[[str], Pod | None]


@lru_cache(maxsize=4096)
def cpuset_text(cpus: CPUSet) -> str:
    """``cpus.format()``, memoised: a pool change formats one set for hundreds of containers."""
    return cpus.format()


@dataclass(frozen=True, slots=True)
class CpusetUpdate:
    """Set a container's ``cpuset.cpus`` (and ``cpuset.mems`` unless ``None``)."""

    container_id: str
    cpus: CPUSet
    mems: CPUSet | None = None


@dataclass(frozen=True, slots=True)
class CreateDecision:
    """The answer to one CreateContainer: the new container's cpuset and updates of others."""

    cpus: CPUSet
    mems: CPUSet | None
    exclusive: bool
    updates: tuple[CpusetUpdate, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What :meth:`AgentCore.synchronize` did. ``failed`` lists ``(container id, reason, message)``."""

    updates: tuple[CpusetUpdate, ...]
    adopted: tuple[str, ...]
    dropped: tuple[str, ...]
    failed: tuple[tuple[str, str, str], ...]


@dataclass
class ContainerRecord:
    """A container the agent tracks. ``applied`` is the cpuset string the runtime was last told."""

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

    @property
    def key(self) -> str:
        return f"{self.pod_uid}/{self.name}"

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
        )


class AgentCore:
    """Containers, the resource manager, and the decisions between them. Not thread-safe: callers serialise."""

    def __init__(self, manager: ResourceManager, *, pod_lookup: PodLookup | None = None) -> None:
        self.manager = manager
        self.pod_lookup = pod_lookup
        self.records: dict[str, ContainerRecord] = {}
        self._by_key: dict[str, str] = {}
        self._pool = manager.shared_pool()
        self.inline_limit: int | None = None  # see _pool_updates
        self.pool_update_deferred = False
        self.generation = 0  # bumped on every state change (the checkpoint writer follows it)
        self.saved_plugin_states: dict[str, Any] = {}  # states of plugins not registered yet

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
    def _lookup(self, sandbox: api_pb2.PodSandbox) -> Pod | None:
        if self.pod_lookup is None or not sandbox.uid:
            return None
        return self.pod_lookup(sandbox.uid)

    def _admit(self, info: ContainerInfo) -> ContainerRecord:
        """Admit ``info`` (raises :class:`AdmissionRejected`); the record is not registered yet."""
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
        try:
            admission = self.manager.admit(info.pod)
        except AdmissionError as exc:
            raise AdmissionRejected(exc.reason, exc.message, **where) from None
        except Exception as exc:  # a plugin bug must not take the agent down; the pod is refused
            self.manager.remove(info.key)
            raise AdmissionRejected("UnexpectedAdmissionError", f"{type(exc).__name__}: {exc}", **where) from None
        if not admission.admitted:
            raise AdmissionRejected(admission.reason, admission.message, **where)
        record.managed = True
        (container,) = admission.containers
        record.exclusive = self.manager.cpu.state.get(info.key, info.name)
        numa = container.memory_numa
        if numa:
            record.mems = CPUSet(numa)
        return record

    def _register(self, record: ContainerRecord) -> None:
        self.records[record.container_id] = record
        self._by_key[record.key] = record.container_id
        self.generation += 1

    def create(self, sandbox: api_pb2.PodSandbox, container: api_pb2.Container) -> CreateDecision:
        """CreateContainer: admit and decide (raises :class:`AdmissionRejected`)."""
        known = self.records.get(container.id)
        if known is not None:  # the same request again (e.g. answered after a reconnect)
            cpus, mems = self.desired(known)
            return CreateDecision(cpus, mems, known.exclusive is not None)
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
        return CreateDecision(cpus, mems, record.exclusive is not None, tuple(updates))

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
        self.records.pop(record.container_id, None)
        if self._by_key.get(record.key) == record.container_id:
            del self._by_key[record.key]
            if record.managed:
                self.manager.remove(record.key)
        self.generation += 1

    def stop(self, container_id: str) -> list[CpusetUpdate]:
        """StopContainer / RemoveContainer: release the container; updates for a grown pool."""
        record = self.records.get(container_id)
        if record is None:
            return []
        self._release(record)
        return self._pool_updates()

    remove_container = stop

    def remove_pod(self, sandbox_id: str, pod_uid: str = "") -> list[CpusetUpdate]:
        """RemovePodSandbox: release every container of the pod still registered."""
        for record in [
            r for r in self.records.values() if r.sandbox_id == sandbox_id or (pod_uid and r.pod_uid == pod_uid)
        ]:
            self._release(record)
        return self._pool_updates()

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
    def synchronize(self, pods: Sequence[api_pb2.PodSandbox], containers: Sequence[api_pb2.Container]) -> SyncResult:
        """Reconcile with the runtime's complete list of pods and containers (see the module docstring)."""
        sandboxes = {p.id: p for p in pods}
        live = {c.id: c for c in containers if c.state != api_pb2.CONTAINER_STOPPED}
        dropped = [cid for cid in self.records if cid not in live]
        for cid in dropped:
            self._release(self.records[cid])
        adopted: list[str] = []
        failed: list[tuple[str, str, str]] = []
        unknown = [c for c in live.values() if c.id not in self.records]
        unknown.sort(
            key=lambda c: (sandboxes[c.pod_sandbox_id].uid if c.pod_sandbox_id in sandboxes else "", c.name, c.id)
        )
        for c in unknown:
            sandbox = sandboxes.get(c.pod_sandbox_id) or api_pb2.PodSandbox(id=c.pod_sandbox_id)
            try:
                info = derive(sandbox, c, self._lookup(sandbox))
                holder = self._by_key.get(info.key)
                if holder is not None and holder in live:
                    raise AdmissionRejected("DuplicateContainer", f"container {holder[:12]} already runs as {info.key}")
                if holder is not None:
                    record = self._transfer(holder, info)
                else:
                    record = self._admit(info)
                    self._register(record)
            except AdmissionRejected as exc:
                failed.append((c.id, exc.reason, exc.message))
                record = ContainerRecord(
                    container_id=c.id,
                    sandbox_id=c.pod_sandbox_id,
                    pod_uid=sandbox.uid or c.pod_sandbox_id,
                    pod_name=sandbox.name,
                    namespace=sandbox.namespace,
                    name=c.name,
                    qos="",
                    error=f"{exc.reason}: {exc.message}",
                )
                self.records[c.id] = record  # runs in the shared pool, holds nothing
                self.generation += 1
            adopted.append(c.id)
        self._pool = self.manager.shared_pool()
        updates: list[CpusetUpdate] = []
        for cid, c in live.items():
            record = self.records[cid]
            cpus, mems = self.desired(record)
            reported = parse_cpuset(c.linux.resources.cpu.cpus)
            reported_mems = parse_cpuset(c.linux.resources.cpu.mems)
            if reported != cpus or (mems is not None and reported_mems != mems):
                updates.append(CpusetUpdate(cid, cpus, mems))
                record.adjusted = False  # re-pin again at POST_START: the update may race the start
            record.applied = cpuset_text(cpus)
        self.generation += 1
        return SyncResult(tuple(updates), tuple(adopted), tuple(dropped), tuple(failed))

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
        seen = 0
        keys: dict[str, str] = {}
        cpu_state = self.manager.cpu.state
        for cid, r in self.records.items():
            if r.container_id != cid:
                problems.append(f"record {cid} names container {r.container_id}")
            if r.managed:
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
                if r.exclusive.mask & seen:
                    problems.append(f"CPUs {CPUSet.from_mask(r.exclusive.mask & seen)} are held twice")
                seen |= r.exclusive.mask
        for key in self.manager.pods:
            if key not in keys:
                problems.append(f"resource manager pod {key} belongs to no container")
        if seen & self.manager.shared_pool().mask:
            problems.append("exclusive CPUs overlap the shared pool")
        return problems

    # -- snapshots ------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """JSON-ready state: the manager's snapshot and the container registry."""
        return {
            "manager": self.manager.snapshot(),
            "containers": [r.to_dict() for r in self.records.values()],
        }

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Restore a :meth:`snapshot`; raise :class:`CheckpointCorrupted` if it is inconsistent."""
        try:
            manager_doc = doc["manager"]
            records = [ContainerRecord.from_dict(r) for r in doc.get("containers", [])]
            self.manager.restore(manager_doc)
        except Exception as exc:
            raise CheckpointCorrupted(f"cannot restore the agent state: {type(exc).__name__}: {exc}") from exc
        plugins = manager_doc.get("plugins") or {}
        known = {p.name for p in self.manager.plugins}
        self.saved_plugin_states = {k: v for k, v in plugins.items() if k not in known}
        self.records = {r.container_id: r for r in records}
        self._by_key = {r.key: r.container_id for r in records}
        self._pool = self.manager.shared_pool()
        problems = self.check()
        if problems:
            raise CheckpointCorrupted("inconsistent agent state: " + "; ".join(problems[:5]))
        self.generation += 1

    # -- PodResources ---------------------------------------------------------------------------------
    def pod_resources(self) -> tuple[AllocatableResources, tuple[PodResources, ...]]:
        """The PodResources ``GetAllocatableResources`` and ``List`` answers for the current state.

        Every registered container is listed under its pod (shared-pool containers with no CPU ids,
        as the kubelet lists them); exclusive CPUs, pinned memory and devices come from the manager.
        """
        allocatable, listed = allocation_state(self.manager).to_podresources()
        by_container = {(p.namespace, p.name, c.name): c for p in listed for c in p.containers}
        pods: dict[tuple[str, str], list[ContainerResources]] = {}
        for r in self.records.values():
            entry = by_container.get((r.namespace, r.pod_name, r.name)) or ContainerResources(r.name)
            pods.setdefault((r.namespace, r.pod_name), []).append(entry)
        return allocatable, tuple(PodResources(name, ns, tuple(cs)) for (ns, name), cs in pods.items())

"""Reconciliation of the agent's state with the runtime's full list, and the retries of waiting containers.

:func:`synchronize` (NRI Synchronize) drops records of containers that are gone or stopped and pod
entries whose sandbox is gone, adopts live containers the state does not know (admission as at
creation, whole pods included; a container that cannot be admitted keeps running in the shared pool,
is reported, and waits in ``state.waiting`` unless its rejection is final), releases finished init
containers removed meanwhile, and returns an update for every live container whose cpuset differs
from the desired one. :func:`retry_waiting` admits waiting containers that fit now. Functions of a
:class:`~numaplane.agent.state.NodeAgentState` (its public methods only); no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from numaplane.agent.containers import derive, parse_cpuset
from numaplane.agent.errors import AdmissionRejected
from numaplane.agent.podadmission import admit_pod, bind, pod_entry
from numaplane.agent.records import ContainerRecord, SyncResult
from numaplane.nri.events import CpusetUpdate, RuntimeContainer, Sandbox, cpuset_text

if TYPE_CHECKING:
    from numaplane.agent.state import NodeAgentState

__all__ = ["FINAL_REJECTIONS", "adopt", "retry_waiting", "synchronize", "unadmitted"]

#: Rejections that retrying cannot cure (the others, such as a lack of CPUs, may pass later).
FINAL_REJECTIONS = frozenset({"InvalidContainer", "DuplicateContainer", "InvalidPreference", "ResourceNotRequested"})


def synchronize(state: NodeAgentState, pods: Sequence[Sandbox], containers: Sequence[RuntimeContainer]) -> SyncResult:
    """Reconcile with the runtime's complete list of pods and containers (see the module docstring)."""
    sandboxes = {p.id: p for p in pods}
    live = {c.id: c for c in containers if c.state.live}
    present = {c.id for c in containers}
    dropped = []
    for cid, record in list(state.records.items()):
        if cid in live:
            record.stopped = False
        elif cid in present and record.managed and not record.whole_pod and record.sandbox_id in sandboxes:
            record.stopped = True  # stopped, not removed: keeps its allocation for a restart (state.stop)
        else:
            dropped.append(cid)
            state.release(record)
    for entry in [e for e in state.pods.values() if e.sandbox_id not in sandboxes]:
        state.release_entry(entry)  # the pod went while the agent was away
    adopted: list[str] = []
    failed: list[tuple[str, str, str]] = []
    unknown = [c for c in live.values() if c.id not in state.records or state.records[c.id].unadmitted]
    unknown.sort(key=lambda c: (sandboxes[c.pod_sandbox_id].uid if c.pod_sandbox_id in sandboxes else "", c.name, c.id))
    state.waiting = {}
    for c in unknown:
        sandbox = sandboxes.get(c.pod_sandbox_id) or Sandbox(id=c.pod_sandbox_id)
        state.records.pop(c.id, None)  # a placeholder of an earlier failed adoption: try again
        try:
            adopt(state, sandbox, c, live)
        except AdmissionRejected as exc:
            failed.append((c.id, exc.reason, exc.message))
            unadmitted(state, sandboxes, c, exc.reason, exc.message)
            if exc.reason not in FINAL_REJECTIONS:
                state.waiting[c.id] = (sandbox, c)  # retried whenever resources are released
        adopted.append(c.id)
    # finished init containers removed while the agent was away: release them now
    names_in: dict[str, set[str]] = {}
    for c in containers:
        names_in.setdefault(c.pod_sandbox_id, set()).add(c.name)
    for entry in list(state.pods.values()):
        names = names_in.get(entry.sandbox_id, set())
        for name in sorted(entry.regular_init - entry.released - names):
            if entry.finished(name) and f"{entry.uid}/{name}" not in state.holders:
                state.release_init(entry, name)
    state.refresh_pool()
    updates: list[CpusetUpdate] = []
    for cid, c in live.items():
        record = state.records.get(cid) or unadmitted(state, sandboxes, c, "Released", "its pod was released")
        cpus, mems = state.desired(record)
        reported = parse_cpuset(c.resources.cpus)
        reported_mems = parse_cpuset(c.resources.mems)
        if reported != cpus or (mems is not None and reported_mems != mems):
            updates.append(CpusetUpdate(cid, cpus, mems))
            record.adjusted = False  # re-pin again at POST_START: the update may race the start
        record.applied = cpuset_text(cpus)
    state.generation += 1
    return SyncResult(tuple(updates), tuple(adopted), tuple(dropped), tuple(failed))


def unadmitted(
    state: NodeAgentState, sandboxes: Mapping[str, Sandbox], c: RuntimeContainer, reason: str, message: str
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
    state.records[c.id] = record
    state.generation += 1
    return record


def adopt(state: NodeAgentState, sandbox: Sandbox, c: RuntimeContainer, live: Mapping[str, RuntimeContainer]) -> None:
    """Register a running container the agent does not know (raises :class:`AdmissionRejected`)."""
    entry = pod_entry(state, sandbox) or admit_pod(state, sandbox, c.name)
    key = f"{entry.uid if entry is not None else sandbox.uid or sandbox.id}/{c.name}"
    holder = state.holders.get(key)
    if holder == c.id:  # its own placeholder (restored from a checkpoint)
        del state.holders[key]
        holder = None
    if holder is not None and holder in live:
        raise AdmissionRejected("DuplicateContainer", f"container {holder[:12]} already runs as {key}")
    if entry is not None:
        bind(state, entry, sandbox, c)
        return
    info = derive(sandbox, c, state.lookup(sandbox))
    if holder is not None:
        state.transfer(holder, info)
    else:
        state.register(state.admissions.admit_alone(info))


def retry_waiting(state: NodeAgentState) -> list[CpusetUpdate]:
    """Admit the running containers Synchronize could not admit (resources were short), where they
    fit now; the updates pin them. The others keep waiting in the shared pool."""
    updates: list[CpusetUpdate] = []
    for cid, (sandbox, c) in list(state.waiting.items()):
        placeholder = state.records.get(cid)
        if placeholder is None or not placeholder.unadmitted:
            del state.waiting[cid]
            continue
        del state.records[cid]
        try:
            adopt(state, sandbox, c, {cid: c})
        except AdmissionRejected:
            state.records[cid] = placeholder
            continue
        del state.waiting[cid]
        record = state.records[cid]
        cpus, mems = state.desired(record)
        record.applied = cpuset_text(cpus)
        updates.append(CpusetUpdate(cid, cpus, mems))
        state.generation += 1
    return updates

"""Whole-pod admission inside the agent's state: a sandbox's pod entry, its admission, its containers bound.

When the Pod is known from the API (``pod_lookup``) and needs the manager (Guaranteed, or extended
resources): at the pod's first CreateContainer, or at RUN_POD_SANDBOX when the Pod is known then,
the manager admits the real pod once (manager pod = the pod uid) exactly as the kubelet does — init
containers' resources reused by later containers, topology scope ``pod``, pod-level resources — and
each container receives its own allocation when it is created (:func:`bind`). A container's
allocation outlives the container (a restarted container gets it again); a finished regular init
container's RemoveContainer releases what later containers do not reuse; the pod's StopPodSandbox /
RemovePodSandbox releases the rest. ``wholepod.py`` holds the per-pod bookkeeping. Functions of a :class:`~numaplane.agent.state.NodeAgentState` (its public
methods only); no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numaplane.agent.containers import check_claims
from numaplane.agent.records import ContainerRecord
from numaplane.agent.wholepod import PodEntry, admission_pod, pod_needs_manager
from numaplane.nri.events import RuntimeContainer, Sandbox

if TYPE_CHECKING:
    from numaplane.agent.state import NodeAgentState

__all__ = ["admit_pod", "bind", "pod_entry"]


def pod_entry(state: NodeAgentState, sandbox: Sandbox) -> PodEntry | None:
    """The whole-pod entry of ``sandbox``; an entry left by an older sandbox of the pod is released."""
    if not sandbox.uid:
        return None
    entry = state.pods.get(sandbox.uid)
    if entry is None or entry.sandbox_id == sandbox.id:
        return entry
    # The pod got a new sandbox: its containers all start again. (The kubelet stops the old
    # sandbox first; had the agent missed that, containers still registered there keep running
    # in the shared pool, holding nothing, until they go.)
    for record in [r for r in state.records.values() if r.whole_pod and r.pod_uid == entry.uid]:
        if state.holders.get(record.key) == record.container_id:
            del state.holders[record.key]
        record.managed = record.whole_pod = False
        record.exclusive = record.mems = None
        record.error = f"PodSandboxReplaced: the pod now runs in sandbox {sandbox.id[:12]}"
    state.release_entry(entry)
    return None


def admit_pod(state: NodeAgentState, sandbox: Sandbox, name: str | None) -> PodEntry | None:
    """Admit the sandbox's pod as a whole (raises :class:`AdmissionRejected`); ``None`` when the
    Pod is unknown, needs no admission, or already has containers admitted one at a time.

    ``name``: the container being created (``None`` at RUN_POD_SANDBOX). Records of regular init
    containers before it (admitted one at a time while the Pod was not known yet) have finished:
    they are released first; any other live container of the sandbox keeps the pod one-at-a-time.
    """
    api = state.lookup(sandbox)
    if api is None:
        return None
    pod = admission_pod(api)
    where = f"{pod.namespace}/{pod.name}"
    for c in pod.all_containers():  # annotations never grant: a claim the spec does not back is refused
        check_claims(sandbox.annotations, c.name, pod, pod=where)
        check_claims(api.annotations, c.name, pod, pod=where)
    if not pod_needs_manager(pod):
        return None
    mine = [r for r in state.records.values() if r.sandbox_id == sandbox.id]
    if mine:
        order = {c.name: i for i, c in enumerate(pod.all_containers())}
        position = order.get(name, len(order)) if name is not None else -1
        regular_init = {c.name for c in pod.init_containers if not c.sidecar}
        if any(r.name not in regular_init or order[r.name] >= position for r in mine):
            return None
        for r in mine:
            state.release(r)
    state.admissions.admit(pod, {"pod": f"{pod.namespace}/{pod.name}", "container": name or ""})
    entry = PodEntry(pod, sandbox.id)
    state.pods[pod.uid] = entry
    state.generation += 1
    return entry


def bind(state: NodeAgentState, entry: PodEntry, sandbox: Sandbox, container: RuntimeContainer) -> ContainerRecord:
    """Register ``container`` with its allocation from the pod's admission (registered; no I/O)."""
    name = container.name
    predecessor = state.holders.get(f"{entry.uid}/{name}")
    if predecessor is not None and predecessor != container.id:
        state.release(state.records[predecessor])  # a re-created container: the allocation stays the pod's
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
        if state.manager.release_finished_init_memory(entry.uid, name):
            state.generation += 1
        record.managed = record.whole_pod = True
        record.exclusive = state.manager.exclusive_cpus(entry.uid, name)
        record.mems = state.admissions.mems(entry.uid, name)
    entry.note_created(name)
    state.register(record)
    return record

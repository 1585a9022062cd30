"""The real-kubelet differential: the real kubelet v1.36.2 on a real machine's snapshot against numaplane's core.

For one snapshot (``shared/topologies/real/*.tar.gz``) and one :class:`DiffConfig`, the same pod sequence
(:func:`generate_ops`: seeded, adds and deletions, init containers, Guaranteed and shared pods, memory and
2Mi hugepages) is played

* on the real kubelet, which sees the snapshot through :mod:`numaplane_harness.machineoverlay` (its
  CPU manager static, memory manager Static where every node reports memory, topology manager): a
  decision is read once the kubelet has written the pod's status (admitted: ``Pending``/``Running``;
  rejected: ``Failed`` with its ``reason``), the CPUs and NUMA memory of each container from
  ``cpu_manager_state`` / ``memory_manager_state``;
* on numaplane's :class:`~numaplane.policy.manager.ResourceManager` over
  ``discover(snapshot, view="kubelet")`` with the same configuration, fed the pods as the API server
  returned them (same uids), and followed by :func:`node_admission` (the kubelet's generic admission,
  which runs beside the managers on a real node, over the Node the kubelet registered).

:func:`kubelet_topology` reads the machine as the kubelet saw it from its log and
:func:`topology_mismatch` compares it CPU by CPU with numaplane's view.

:func:`compare` lists every decision that differs and whether the final checkpoints are equal.
:func:`minimise` shrinks a sequence to the shortest prefix and then drops earlier operations one at a
time while the first mismatch stays (each try replays the kubelet: bounded by ``budget``).

Units: CPU in whole CPUs or millicores (``"1500m"``), memory and hugepages in MiB.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numaplane.placement.explain.predicates import BasicNode, parse_node, resource_reasons
from numaplane.policy.manager import ResourceManager
from numaplane.policy.memory_state import Block, MemoryState, charge
from numaplane.resources.pod import Pod, add_resources, parse_pod
from numaplane.resources.quantity import Quantity
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology
from numaplane_harness.busyboximage import BUSYBOX_IMAGE
from numaplane_harness.kubecluster import ApiStatus
from numaplane_harness.kubelet import EVICTION_MEMORY, KubeletPolicy, KubeletStartError, RealKubelet

__all__ = [
    "KUBELET_HYBRID_FULL_CORE",
    "KUBELET_KEEPS_REFUSED_POD_MEMORY",
    "KUBELET_NUMA_ID_OVER_63",
    "AddPod",
    "ContainerSpec",
    "Decision",
    "DeletePod",
    "DiffConfig",
    "Host",
    "KnownDivergence",
    "KubeletCrash",
    "Mismatch",
    "Outcome",
    "classify",
    "compare",
    "default_matrix",
    "explain_crash",
    "generate_ops",
    "kept_refused_memory",
    "kubelet_topology",
    "minimise",
    "named_state",
    "node_admission",
    "onto_online",
    "play_kubelet",
    "play_numaplane",
    "refusal_mismatch",
    "topology_mismatch",
    "unavailable_takes",
]


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    cpu: str  # "2" or "500m"
    memory_mi: int
    hugepages_mi: int = 0
    init: bool = False


@dataclass(frozen=True)
class AddPod:
    name: str
    containers: tuple[ContainerSpec, ...]


@dataclass(frozen=True)
class DeletePod:
    name: str


Op = AddPod | DeletePod


@dataclass(frozen=True)
class DiffConfig:
    """One configuration of both sides. ``memory_static``: the memory manager Static (else None)."""

    name: str
    topology_policy: str = "single-numa-node"
    topology_scope: str = "container"
    cpu_options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: str = "0"
    memory_static: bool = True
    #: the NUMA node of the reserved memory (the kubelet checks it exists even with its policy None)
    memory_node: int = 0

    def kubelet_policy(self) -> KubeletPolicy:
        return KubeletPolicy(
            cpu_manager_policy="static",
            reserved_system_cpus=self.reserved_cpus,
            cpu_manager_policy_options=dict(self.cpu_options),
            memory_manager_policy="Static" if self.memory_static else "None",
            reserved_memory={self.memory_node: EVICTION_MEMORY},
            topology_manager_policy=self.topology_policy,
            topology_manager_scope=self.topology_scope,
            feature_gates={"CPUManagerPolicyAlphaOptions": True, "CPUManagerPolicyBetaOptions": True}
            if self.cpu_options
            else {},
        )

    def numaplane_config(self) -> dict[str, Any]:
        return {
            "topologyManager": {"policy": self.topology_policy, "scope": self.topology_scope},
            "cpuManager": {"policy": "static", "reservedCPUs": self.reserved_cpus, "options": dict(self.cpu_options)},
            "memoryManager": {
                "policy": "Static" if self.memory_static else "None",
                "reservedMemory": [{"numaNode": self.memory_node, "limits": {"memory": EVICTION_MEMORY}}]
                if self.memory_static
                else [],
            },
        }


def default_matrix(*, memory_static: bool, reduced: bool = False) -> list[DiffConfig]:
    """Topology policy × scope, then each CPU manager option on best-effort/container (it admits
    every pod, so an option shows in the CPUs chosen), reserved CPUs 0-1 (``reduced``: CI's four)."""
    configs = [
        DiffConfig(f"{policy}/{scope}", policy, scope, memory_static=memory_static)
        for policy in ("single-numa-node", "restricted", "best-effort")
        for scope in ("container", "pod")
    ]
    options = [
        ("full-pcpus-only", {"full-pcpus-only": "true"}),
        ("distribute-across-numa", {"distribute-cpus-across-numa": "true"}),
        ("align-by-socket", {"align-by-socket": "true"}),
        ("uncorecache", {"prefer-align-cpus-by-uncorecache": "true"}),
        ("strict-reservation", {"strict-cpu-reservation": "true"}),
    ]
    configs += [
        DiffConfig(f"best-effort/container+{label}", "best-effort", "container", opts, memory_static=memory_static)
        for label, opts in options
    ]
    configs.append(
        DiffConfig("single-numa-node/container+reserved-0-1", reserved_cpus="0-1", memory_static=memory_static)
    )
    if reduced:  # a policy of each scope, the SMT-alignment and the uncore-cache options
        return [configs[0], configs[3], configs[6], configs[6 + 3]]
    return configs


def onto_online(config: DiffConfig, online: CPUSet, nodes: Sequence[int] = (0,)) -> DiffConfig:
    """``config`` with its reserved CPUs moved to as many of the lowest CPUs the kubelet sees when one of
    them is not (intel-xeon-e5-2680v3-2s-offline-cpu0-node0: CPU 0 offline, node 0 without a directory).
    Both sides refuse to start otherwise: the kubelet with ``reserved-cpus: 4 is not a subset of
    online-cpus: 5,7,…`` (its start-up check), numaplane with ``[cpumanager] unable to build the
    reserved physical CPUs from the reserved set`` (the static policy's own check). Likewise the
    reserved memory moves to the lowest of ``nodes`` when node 0 is not among them (the kubelet: ``the
    reserved memory configuration references a NUMA node 0 that does not exist on this machine``)."""
    if config.memory_node not in nodes:  # the kubelet refuses reserved memory on a node it does not see
        config = DiffConfig(**{**config.__dict__, "memory_node": min(nodes)})
    reserved = CPUSet.parse(config.reserved_cpus)
    if reserved <= online:
        return config
    moved = CPUSet(sorted(online)[: len(reserved)])
    return DiffConfig(
        **{**config.__dict__, "name": f"{config.name} (reserved {moved.format()})", "reserved_cpus": moved.format()}
    )


def generate_ops(seed: int, count: int, *, hugepages: bool, max_cpus: int) -> list[Op]:
    """A seeded sequence of ``count`` operations: mostly adds (1–3 containers, sometimes an init
    container, sometimes a shared-CPU pod), deletions of a live pod, never a deletion last."""
    rnd = random.Random(seed)
    ops: list[Op] = []
    live: list[str] = []
    biggest = max(1, min(8, max_cpus // 3))
    for i in range(count):
        if live and i < count - 1 and rnd.random() < 0.2:
            name = live.pop(rnd.randrange(len(live)))
            ops.append(DeletePod(name))
            continue
        containers = []
        shared = rnd.random() < 0.15
        for c in range(rnd.choice((1, 1, 1, 2, 3))):
            cpu = f"{rnd.choice((250, 500, 1500))}m" if shared else str(rnd.randint(1, biggest))
            pages = rnd.choice((0, 0, 2, 4)) if hugepages else 0
            containers.append(ContainerSpec(f"c{c}", cpu, rnd.choice((64, 128, 512, 2048)), pages))
        if rnd.random() < 0.25:
            first = containers[0]
            containers.insert(0, ContainerSpec("init", first.cpu, first.memory_mi, first.hugepages_mi, init=True))
        name = f"p{i}"
        ops.append(AddPod(name, tuple(containers)))
        live.append(name)
    return ops


def manifest(op: AddPod, node_name: str) -> dict[str, Any]:
    """A Guaranteed (or, with fractional CPU, still Guaranteed-shared) busybox pod bound to ``node_name``."""

    def container(spec: ContainerSpec) -> dict[str, Any]:
        amounts = {"cpu": spec.cpu, "memory": f"{spec.memory_mi}Mi"}
        if spec.hugepages_mi:
            amounts["hugepages-2Mi"] = f"{spec.hugepages_mi}Mi"
        return {
            "name": spec.name,
            "image": BUSYBOX_IMAGE,
            "imagePullPolicy": "Never",
            "command": ["true"] if spec.init else ["sleep", "3600"],
            "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        }

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": op.name, "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "hostNetwork": True,
            "dnsPolicy": "Default",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 0,
            # the containers cannot start (their CPUs are another machine's): Always keeps the pod
            # active, and so its allocations
            "restartPolicy": "Always",
            "tolerations": [{"operator": "Exists"}],
            "initContainers": [container(c) for c in op.containers if c.init],
            "containers": [container(c) for c in op.containers if not c.init],
        },
    }


@dataclass(frozen=True)
class Decision:
    """One pod's admission: the reason ("" when admitted), CPUs and memory blocks per container."""

    pod: str
    admitted: bool
    reason: str
    cpus: Mapping[str, str]
    memory: Mapping[str, Any]


@dataclass
class Outcome:
    decisions: list[Decision]
    cpu_state: dict[str, Any]
    memory_state: dict[str, Any]
    seconds: float = 0.0
    #: the pods as the API server returned them on creation, by name
    created: dict[str, dict[str, Any]] = field(default_factory=dict)


def _strip(state: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "checksum"}


def _by_name(entries: Mapping[str, Any], uid_to_name: Mapping[str, str]) -> dict[str, Any]:
    return {uid_to_name.get(uid, uid): value for uid, value in sorted(entries.items())}


def _named_state(state: Mapping[str, Any], uid_to_name: Mapping[str, str]) -> dict[str, Any]:
    out = _strip(state)
    if "entries" in out:
        out["entries"] = _by_name(out["entries"], uid_to_name)
    return out


def named_state(state: Mapping[str, Any], uid_to_name: Mapping[str, str]) -> dict[str, Any]:
    """A checkpoint (``cpu_manager_state`` / ``memory_manager_state`` format) without its checksum, its
    entries keyed by pod name instead of uid (the two sides' uids differ)."""
    return _named_state(state, uid_to_name)


def play_kubelet(kubelet: RealKubelet, ops: Sequence[Op], *, timeout: float = 60) -> Outcome:
    """Play ``ops`` on the running kubelet (its pods deleted first, its checkpoints fresh from
    :meth:`RealKubelet.restart`); the pods are left in place for the caller to delete."""
    began = time.monotonic()
    cp = kubelet.control_plane
    decisions: list[Decision] = []
    uids: dict[str, str] = {}
    created_pods: dict[str, dict[str, Any]] = {}
    for op in ops:
        if isinstance(op, DeletePod):
            uid = next(u for u, n in uids.items() if n == op.name)
            with contextlib.suppress(ApiStatus):
                cp.request("DELETE", f"/api/v1/namespaces/default/pods/{op.name}", {"gracePeriodSeconds": 0})
            cp.wait_for(f"pod {op.name} gone", lambda n=op.name: _gone(kubelet, n), timeout=timeout)
            # the CPU manager forgets a deleted pod in its reconcile loop (1 s)
            cp.wait_for(
                f"pod {op.name} out of cpu_manager_state",
                lambda u=uid: u not in kubelet.cpu_manager_state().get("entries", {}),
                timeout=timeout,
            )
            continue
        created = kubelet.create_pod(manifest(op, kubelet.node_name))
        uid = str(created["metadata"]["uid"])
        uids[uid] = op.name
        created_pods[op.name] = created
        try:
            pod = cp.wait_for(f"decision on {op.name}", lambda n=op.name: _decided_alive(kubelet, n), timeout=timeout)
        except TimeoutError as exc:  # say what the kubelet was doing instead
            alive = kubelet.process is not None and kubelet.process.poll() is None
            raise TimeoutError(
                f"{exc}; kubelet {'running' if alive else 'exited'}, its errors:\n" + _log_errors(kubelet)
            ) from None
        status = pod["status"]
        admitted = status.get("phase") != "Failed"
        cpu_state = kubelet.cpu_manager_state()
        memory_state = _memory_state(kubelet)
        decisions.append(
            Decision(
                op.name,
                admitted,
                "" if admitted else str(status.get("reason", "")),
                dict(cpu_state.get("entries", {}).get(uid, {})),
                dict(memory_state.get("entries", {}).get(uid, {})),
            )
        )
    # the CPU manager's reconcile loop (1 s) starts with removeStaleState (cpumanager/cpu_manager.go
    # reconcileState): what it gave a pod the kubelet then rejected (a container before a later one's
    # TopologyAffinityError, a pod before OutOfcpu) goes once the pod is not active. Read the final
    # state after that, not in the race with it (its memory manager has no such loop: a rejected pod's
    # memory stays until the next pod's allocation)
    # (settled: the static policy's RemoveContainer writes the checkpoint twice, the entry deleted and
    # then the shared pool grown, so a read between the two is taken only if a second one agrees)
    rejected = {u for u, n in uids.items() if any(d.pod == n and not d.admitted for d in decisions)}
    if rejected:

        def released() -> dict[str, Any] | None:
            first = kubelet.cpu_manager_state()
            if rejected & set(first.get("entries", {})):
                return None
            time.sleep(0.3)
            return first if kubelet.cpu_manager_state() == first else None

        with contextlib.suppress(TimeoutError):  # still held: the final comparison shows it
            cp.wait_for("rejected pods out of cpu_manager_state", released, timeout=10)
    return Outcome(
        decisions,
        _named_state(kubelet.cpu_manager_state(), uids),
        _named_state(_memory_state(kubelet), uids),
        time.monotonic() - began,
        created_pods,
    )


class KubeletCrash(RuntimeError):
    """The kubelet exited while ``pod`` waited for its decision; ``stack`` is its log from the ``panic:``
    line on (the Go stack: where it crashed), else the last error lines; ``code`` its exit status."""

    def __init__(self, pod: str, stack: str, code: int | None) -> None:
        first = stack.splitlines()[0] if stack else "no log"
        super().__init__(f"the kubelet exited ({code}) deciding {pod}: {first}\n{stack}")
        self.pod, self.stack, self.code = pod, stack, code

    @property
    def frame(self) -> str:
        """The innermost Go frame of the panic's goroutine (``package.(*type).func``), or ""."""
        lines = self.stack.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("goroutine ")), None)
        if start is None:
            return ""
        return next(
            (line.split("(0x")[0].split("({")[0] for line in lines[start + 1 :] if line and not line[0].isspace()), ""
        )


def _decided_alive(kubelet: RealKubelet, name: str) -> dict[str, Any] | None:
    """:func:`_decided`, raising :class:`KubeletCrash` at once when the kubelet has exited (a panic)."""
    if kubelet.process is not None and kubelet.process.poll() is not None:
        raise KubeletCrash(name, _log_errors(kubelet, lines=40), kubelet.process.returncode)
    return _decided(kubelet, name)


def _log_errors(kubelet: RealKubelet, lines: int = 12) -> str:
    """The last error (``E…``) and panic lines of the kubelet's log, or its tail when there are none."""
    tail = kubelet.log_tail(4000).splitlines()
    panic = next((i for i, line in enumerate(tail) if line.startswith("panic:")), None)
    if panic is not None:  # the Go stack: where the kubelet crashed
        return "\n".join(tail[panic : panic + 3 * lines])
    errors = [line for line in tail if line.startswith("E")]
    return "\n".join((errors or tail)[-lines:])


def _memory_state(kubelet: RealKubelet) -> dict[str, Any]:
    import json

    try:
        state: dict[str, Any] = json.loads(kubelet.memory_manager_state_file.read_text())
    except FileNotFoundError:
        return {}
    return state


def _gone(kubelet: RealKubelet, name: str) -> bool:
    try:
        kubelet.get_pod(name)
    except ApiStatus as exc:
        return exc.code == 404
    return False


def _decided(kubelet: RealKubelet, name: str) -> dict[str, Any] | None:
    pod = kubelet.get_pod(name)
    status = pod.get("status", {})
    if status.get("phase") == "Failed":
        return pod
    if status.get("containerStatuses") or status.get("initContainerStatuses"):
        return pod
    return None


def node_admission(pod: Pod, node: BasicNode, used: Mapping[str, Quantity], pods_on_node: int) -> str:
    """The reason the kubelet's generic admission (``lifecycle.NewPredicateAdmitHandler``) rejects
    ``pod`` ("" when it fits): its resources predicate is the scheduler's ``NodeResourcesFit`` over the
    Node's allocatable and the other admitted pods' requests, and the kubelet reports only the first
    failure as ``OutOf<resource>`` in the order ``noderesources.Fits`` checks: pods, cpu, memory,
    ephemeral-storage, then the other resources."""
    reasons = resource_reasons(pod, node, used, pods_on_node)
    if "Too many pods" in reasons:
        return "OutOfpods"
    short = [r.removeprefix("Insufficient ") for r in reasons if r.startswith("Insufficient ")]
    first = ("cpu", "memory", "ephemeral-storage")
    short.sort(key=lambda name: (first.index(name) if name in first else len(first), name))
    return f"OutOf{short[0]}" if short else ""


def play_numaplane(
    topology: Topology,
    config: DiffConfig,
    ops: Sequence[Op],
    pods: Callable[[AddPod], Mapping[str, Any]],
    node: BasicNode | None = None,
    host: Host | None = None,
    *,
    agent_mode: bool = False,
) -> Outcome:
    """Play ``ops`` on numaplane's manager; ``pods(op)`` gives the pod as the API server returned it.

    ``agent_mode``: the order of a node where ``numaplane agent`` decides (the kubelet's managers
    ``none``): the kubelet's generic admission over ``node`` first (a pod it rejects never reaches
    the manager), then the manager, whose refused pod's sandbox goes at once (its allocation with
    it). What :mod:`numaplane_harness.agentdiff` compares the agent process with, exactly.

    With ``node`` (the kubelet's Node as the API server holds it) the kubelet's generic admission is
    modelled too, as it stands beside numaplane on a real node: the kubelet runs the resource
    managers' admit handler first and then :func:`node_admission`; a pod the second rejects keeps what
    the managers gave it until the next pod's allocation (the CPU and memory managers'
    ``removeStaleState`` at the start of ``Allocate`` drops pods that are not active).

    ``host``: the CPUs and NUMA nodes of the host the kubelet really runs on. A pod whose first init
    container's CPUs and memory nodes are all there really runs it (``true``; elsewhere runc refuses
    its ``cpuset.cpus``/``cpuset.mems``) to completion, and the kubelet creates the next
    container, whose memory manager ``AddContainer`` drops the finished init containers' memory
    (:meth:`ResourceManager.release_finished_init_memory`); modelled after the pod's decision is read
    (kvm-skylake-4cpu-2offline, whose CPUs 0-1 are this host's). Elsewhere containers never start."""
    began = time.monotonic()
    manager = ResourceManager(topology, config.numaplane_config())
    decisions: list[Decision] = []
    uids: dict[str, str] = {}
    admitted: dict[str, dict[str, Quantity]] = {}  # uid -> effective requests, the pods the kubelet admitted
    stale: list[str] = []
    stale_containers: dict[str, list[str]] = {}
    used: dict[str, Quantity]
    for op in ops:
        if isinstance(op, DeletePod):
            uid = next(u for u, n in uids.items() if n == op.name)
            manager.remove(uid)
            admitted.pop(uid, None)
            continue
        pod = parse_pod(pods(op))
        uids[pod.uid] = op.name
        for uid in stale:
            manager.remove(uid)
        stale.clear()
        if agent_mode and node is not None:
            used = {}
            for requests in admitted.values():
                used = add_resources(used, requests)
            reason = node_admission(pod, node, used, len(admitted))
            if reason:  # the runtime never sees the pod
                decisions.append(Decision(op.name, False, reason, {}, {}))
                continue
            admitted[pod.uid] = pod.effective_requests()
        admission = manager.admit(pod)
        reason = admission.reason
        if agent_mode:
            if reason:  # the agent refused its container: the pod's sandbox goes
                admitted.pop(pod.uid, None)
                manager.remove(pod.uid)
        elif admission.admitted and node is not None:
            used = {}
            for requests in admitted.values():
                used = add_resources(used, requests)
            reason = node_admission(pod, node, used, len(admitted))
            if reason:
                stale.append(pod.uid)
                stale_containers[pod.uid] = [c.name for c in pod.all_containers()]
            else:
                admitted[pod.uid] = pod.effective_requests()
        cpu_state = manager.cpu.state.to_dict()
        memory_state = _numaplane_memory(manager)
        decisions.append(
            Decision(
                op.name,
                not reason,
                reason,
                dict(cpu_state.get("entries", {}).get(pod.uid, {})),
                dict(memory_state.get("entries", {}).get(pod.uid, {})),
            )
        )
        if not reason and host is not None and pod.init_containers and pod.containers:
            first = pod.init_containers[0].name
            runs_on = cpu_state.get("entries", {}).get(pod.uid, {}).get(first)
            cpus = CPUSet.parse(runs_on) if runs_on is not None else manager.shared_pool()
            blocks = memory_state.get("entries", {}).get(pod.uid, {}).get(first, [])
            nodes = {n for b in blocks for n in b.get("numaAffinity", [])}
            if cpus <= host.cpus and nodes <= host.nodes:
                manager.release_finished_init_memory(pod.uid, pod.containers[0].name)
    for uid in stale:  # the kubelet's CPU manager reconcile drops them (see play_kubelet); memory stays
        for name in stale_containers.get(uid, ()):
            manager.cpu.release(uid, name)
    return Outcome(
        decisions,
        _named_state(manager.cpu.state.to_dict(), uids),
        _named_state(_numaplane_memory(manager), uids),
        time.monotonic() - began,
    )


def _numaplane_memory(manager: ResourceManager) -> dict[str, Any]:
    policy = manager.memory.policy
    if policy is None:
        return {}
    doc: dict[str, Any] = policy.to_checkpoint()
    return doc


@dataclass(frozen=True)
class Mismatch:
    """Where the two sides differ: ``what`` is a pod name or ``final cpu_manager_state`` / ``…memory…``."""

    what: str
    kubelet: Any
    numaplane: Any


def compare(kubelet: Outcome, numaplane: Outcome, *, memory: bool) -> tuple[int, list[Mismatch]]:
    """``(decisions compared, mismatches)``; the final checkpoints count as one comparison each."""
    mismatches: list[Mismatch] = []
    for k, n in zip(kubelet.decisions, numaplane.decisions, strict=True):
        # the kubelet lists a container's blocks in Go map order (memory and hugepages either way round).
        # A pod both reject is compared by reason only: what the kubelet's managers gave its containers
        # before a later check failed (an init container's CPUs and memory before SMTAlignmentError, a
        # pod's before OutOfcpu) stays in its checkpoint until the next pod's hints or allocation
        # (``removeStaleState`` drops pods that are not active): garbage, not a decision.
        both_rejected = not k.admitted and not n.admitted
        k_view = (
            k.admitted,
            k.reason,
            {} if both_rejected else dict(k.cpus),
            _blocks(k.memory) if memory and not both_rejected else {},
        )
        n_view = (
            n.admitted,
            n.reason,
            {} if both_rejected else dict(n.cpus),
            _blocks(n.memory) if memory and not both_rejected else {},
        )
        if k_view != n_view:
            mismatches.append(Mismatch(k.pod, k_view, n_view))
    compared = len(kubelet.decisions) + 1
    if kubelet.cpu_state != numaplane.cpu_state:
        mismatches.append(Mismatch("final cpu_manager_state", kubelet.cpu_state, numaplane.cpu_state))
    if memory:
        compared += 1
        if _blocks_sorted(kubelet.memory_state) != _blocks_sorted(numaplane.memory_state):
            mismatches.append(Mismatch("final memory_manager_state", kubelet.memory_state, numaplane.memory_state))
    return compared, mismatches


def _blocks(memory: Mapping[str, Any]) -> dict[str, Any]:
    """A container's blocks in type order: the kubelet's static policy appends them in Go map order
    (``for resourceName, requestedSize := range requestedResources`` in ``Allocate``), a random order."""
    return {name: sorted(blocks, key=lambda b: str(b.get("type"))) for name, blocks in memory.items()}


def _blocks_sorted(state: Mapping[str, Any]) -> dict[str, Any]:
    """A memory checkpoint with every container's blocks in type order (:func:`_blocks`)."""
    out = dict(state)
    if "entries" in out:
        out["entries"] = {pod: _blocks(containers) for pod, containers in out["entries"].items()}
    return out


@dataclass(frozen=True)
class KnownDivergence:
    """A named difference where the kubelet, not numaplane, departs from its own contract, with the
    evidence; :func:`classify` moves the mismatches it explains out of the unexplained ones."""

    name: str
    why: str


#: kubelet v1.36.2 ``pkg/kubelet/cm/cpumanager``: ``topology.CPUsPerCore()`` is the integer division
#: ``NumCPUs / NumCores``; ``cpuAccumulator.isCoreFree`` (cpu_assignment.go) calls a core free when its
#: *available* CPUs number ``CPUsPerCore()``, and ``takeFullCores`` then takes
#: ``a.topo.CPUDetails.CPUsInCores(core)``: every CPU of the core in the whole topology, available or not.
#: On a machine whose cores have different thread counts (intel-hybrid-4p8e: 4 P cores × 2 threads and
#: 8 E cores × 1, 16 CPUs / 12 cores = 1) a P core with one thread left is "free", and taking it hands
#: out its other thread too: the reserved CPU 0 (``0-1,8`` for a 3-CPU container with CPU 0 reserved)
#: or a CPU another pod holds. numaplane keeps the reserved and held CPUs out (the static policy's
#: ``GetAvailableCPUs``: default set less reserved); from the first such kubelet decision on, the two
#: sides' states differ.
KUBELET_HYBRID_FULL_CORE = KnownDivergence(
    "kubelet-hybrid-full-core",
    "the kubelet's takeFullCores takes a whole core from the topology when its free threads number "
    "CPUsPerCore() = NumCPUs / NumCores (integer division): on cores of unequal thread counts it hands "
    "out a reserved CPU or a CPU another pod holds",
)


#: kubelet v1.36.2 ``pkg/kubelet/cm/memorymanager/policy_static.go`` ``calculateHints`` (the Static policy's
#: hints, asked for every Guaranteed container with memory) collects every NUMA node id of its machine
#: state and calls ``bitmask.IterateBitMasks(numaNodes, …)``; ``IterateBitMasks``
#: (``topologymanager/bitmask/bitmask.go``) builds each combination with ``mask, _ := NewBitMask(accum...)``,
#: dropping the error ``NewBitMask`` returns for a bit outside 0-63 ("bit number must be in range 0-63")
#: together with its mask, so the callback gets a nil ``BitMask`` and its first statement
#: ``mask.GetBits()`` (policy_static.go:899) dereferences it. On ibm-power9-2s-6gpumem-nodes (NUMA nodes
#: 0, 8 and 250-255: the six GPUs' memory, memory without CPUs, as sysfs numbers them on that machine)
#: the kubelet panics on the first pod (``SIGSEGV``, the stack through ``calculateHints`` →
#: ``IterateBitMasks``). numaplane's masks are Python integers: it decides there (memory on nodes with
#: CPUs first; tested in ``tests/realkube/test_kubeletdiff_model.py``).
KUBELET_NUMA_ID_OVER_63 = KnownDivergence(
    "kubelet-numa-id-over-63",
    "the kubelet's memory manager (Static) iterates hint masks with bitmask.IterateBitMasks, which drops "
    "NewBitMask's error for a NUMA node id over 63 and passes a nil mask to calculateHints' callback: "
    "nil pointer dereference (panic) on the first pod with memory",
)


#: kubelet v1.36.2 (file:line as the released binary's pclntab records them): the topology manager admits a
#: pod container by container — ``topologymanager/scope_container.go:56`` merges a container's hints,
#: ``:65``/``:67`` return ``TopologyAffinityError`` when they do not fit, ``:72`` calls
#: ``allocateAlignedResources`` (``scope.go:155``: each hint provider's ``Allocate``, CPU then memory manager,
#: the first error returned at ``:75``); in pod scope ``scope_pod.go:74``/``:77`` allocate the same way after
#: the pod's hints fit. So when a later container is refused (its hints, or its CPUs: SMTAlignmentError,
#: UnexpectedAdmissionError) the earlier containers already hold memory, and nothing on the refusal path gives
#: it back. The memory manager frees a container's blocks only in ``RemoveContainer``
#: (``memorymanager/memory_manager.go:299``: by container id, ``:306``, which a refused pod's containers never
#: get), for finished init containers in ``AddContainer`` (``:240``), and in ``removeStaleState`` (``:342``,
#: dropping containers of pods that are not active, ``:377``/``:385``), which runs only at the start of the
#: next ``Allocate`` (``:269``), ``AllocatePod`` (``:285``), ``GetPodTopologyHints`` (``:328``) or
#: ``GetTopologyHints`` (``:336``): it has no reconcile loop, unlike the CPU manager's ``reconcileState``
#: (``cpumanager/cpu_manager.go:455`` calls its ``removeStaleState`` every reconcile period). The refused
#: pod's memory therefore stays reserved in ``memory_manager_state`` until the next pod's admission — no
#: later decision sees it (each admission drops it first), but a checkpoint read after the last pod does.
#: numaplane gives it back when it refuses the pod (the state the kubelet reaches at its next admission);
#: it is not made to keep it. :func:`kept_refused_memory` checks that this, and only this, is the difference.
KUBELET_KEEPS_REFUSED_POD_MEMORY = KnownDivergence(
    "kubelet-keeps-refused-pod-memory",
    "the kubelet's memory manager keeps what it allocated to the first containers of a pod whose later "
    "container its admission refused, until the next pod's Allocate/GetTopologyHints runs removeStaleState "
    "(no reconcile loop): the final memory_manager_state holds the refused pod; numaplane releases it at once",
)


def kept_refused_memory(kubelet: Outcome, kubelet_state: Mapping[str, Any], numaplane_state: Mapping[str, Any]) -> bool:
    """Whether the two final ``memory_manager_state`` documents (entries keyed by pod name) differ only by
    :data:`KUBELET_KEEPS_REFUSED_POD_MEMORY`: the kubelet's holds every pod numaplane's holds with equal
    blocks, plus pods the kubelet refused (``kubelet.decisions``), and its machine state is numaplane's
    with exactly those pods' blocks charged as the kubelet's ``updateMachineState`` charges them
    (:func:`~numaplane.policy.memory_state.charge`: one assignment per node of the affinity, the size from
    the nodes' free memory in ascending order). Anything else — a different block, another pod, a
    byte more or less — is not this divergence."""
    refused = {d.pod for d in kubelet.decisions if not d.admitted}
    theirs: Mapping[str, Any] = kubelet_state.get("entries") or {}
    ours: Mapping[str, Any] = numaplane_state.get("entries") or {}
    extra = set(theirs) - set(ours)
    if not extra or not extra <= refused or not set(ours) <= set(theirs):
        return False
    if kubelet_state.get("policyName") != numaplane_state.get("policyName"):
        return False
    if any(_blocks(theirs[pod]) != _blocks(ours[pod]) for pod in ours):
        return False
    expected = MemoryState.from_dict(numaplane_state)
    for pod in sorted(extra):
        for blocks in theirs[pod].values():
            for block in map(Block.from_dict, blocks):
                if any(n not in expected.machine for n in block.numa):
                    return False
                charge(expected.machine, tuple(block.numa), block.type, block.size)
    return bool(expected.to_dict()["machineState"] == MemoryState.from_dict(kubelet_state).to_dict()["machineState"])


def explain_crash(crash: KubeletCrash, topology: Topology, config: DiffConfig) -> KnownDivergence | None:
    """The named kubelet bug a crash is, or None: :data:`KUBELET_NUMA_ID_OVER_63` when the machine has a
    NUMA node id over 63, the memory manager is Static and the stack is the nil mask's (a nil pointer
    dereference in ``calculateHints``' callback inside ``IterateBitMasks``)."""
    stack = crash.stack
    if (
        config.memory_static
        and any(n.id > 63 for n in topology.numa_nodes)
        and "nil pointer dereference" in stack
        and "memorymanager.(*staticPolicy).calculateHints.func1" in crash.frame
        and "topologymanager/bitmask.IterateBitMasks" in stack
    ):
        return KUBELET_NUMA_ID_OVER_63
    return None


def unavailable_takes(ops: Sequence[Op], kubelet: Outcome, reserved: CPUSet) -> list[tuple[str, str]]:
    """``(pod, CPUs)`` for each kubelet decision that gave a container a CPU that was not available: a
    reserved one, or one a live pod held (a pod's own init containers' CPUs are reused by its app
    containers, so CPUs are compared between pods only)."""
    decisions = {d.pod: d for d in kubelet.decisions}
    held: dict[str, CPUSet] = {}
    found: list[tuple[str, str]] = []
    for op in ops:
        if isinstance(op, DeletePod):
            held.pop(op.name, None)
            continue
        decision = decisions.get(op.name)
        if decision is None or not decision.admitted:
            continue
        cpus = CPUSet()
        for text in decision.cpus.values():
            cpus = cpus | CPUSet.parse(text)
        others = CPUSet()
        for pod, taken in held.items():
            if pod != op.name:
                others = others | taken
        if (cpus & reserved) or (cpus & others):
            found.append((op.name, cpus.format()))
        held[op.name] = cpus
    return found


def classify(
    mismatches: Sequence[Mismatch], ops: Sequence[Op], kubelet: Outcome, topology: Topology, reserved: CPUSet
) -> tuple[list[Mismatch], list[tuple[KnownDivergence, Mismatch]]]:
    """``(unexplained, explained)``: the final ``memory_manager_state`` is explained by
    :data:`KUBELET_KEEPS_REFUSED_POD_MEMORY` when :func:`kept_refused_memory` says so; a mismatch is
    explained by :data:`KUBELET_HYBRID_FULL_CORE` when the
    machine's cores differ in thread count (``NumCPUs % NumCores != 0``, the kubelet's ``CPUsPerCore()``
    inexact) and it is at or after the kubelet's first decision that took an unavailable CPU
    (:func:`unavailable_takes`), or it is a final checkpoint then. Anything before stays unexplained."""
    unexplained: list[Mismatch] = []
    explained: list[tuple[KnownDivergence, Mismatch]] = []
    for m in mismatches:
        if m.what == "final memory_manager_state" and kept_refused_memory(kubelet, m.kubelet, m.numaplane):
            explained.append((KUBELET_KEEPS_REFUSED_POD_MEMORY, m))
        else:
            unexplained.append(m)
    if not topology.num_cores or topology.num_cpus % topology.num_cores == 0:
        return unexplained, explained
    bad = unavailable_takes(ops, kubelet, reserved)
    if not bad:
        return unexplained, explained
    order = [op.name for op in ops if isinstance(op, AddPod)]
    first = order.index(bad[0][0])
    rest: list[Mismatch] = []
    for m in unexplained:
        at = order.index(m.what) if m.what in order else (len(order) if m.what.startswith("final") else -1)
        if at >= first:
            explained.append((KUBELET_HYBRID_FULL_CORE, m))
        else:
            rest.append(m)
    return rest, explained


def first_mismatch_prefix(ops: Sequence[Op], mismatch: Mismatch) -> list[Op]:
    """The operations up to and including the add of the first mismatching pod (a decision depends only
    on what came before it)."""
    for i, op in enumerate(ops):
        if isinstance(op, AddPod) and op.name == mismatch.what:
            return list(ops[: i + 1])
    return list(ops)


def minimise(ops: Sequence[Op], still_fails: Callable[[Sequence[Op]], Mismatch | None], *, budget: int = 8) -> list[Op]:
    """Drop operations (earliest first) while ``still_fails`` reports a mismatch, at most ``budget`` tries.

    A deletion is dropped with its pod's add (a deletion of a pod never added is not a sequence)."""
    current = list(ops)
    tries = 0
    i = 0
    while i < len(current) - 1 and tries < budget:
        op = current[i]
        if isinstance(op, DeletePod):
            i += 1
            continue
        candidate = [
            o for j, o in enumerate(current) if j != i and not (isinstance(o, DeletePod) and o.name == op.name)
        ]
        tries += 1
        found = still_fails(candidate)
        if found is not None:
            current = first_mismatch_prefix(candidate, found)
        else:
            i += 1
    return current


def describe(ops: Sequence[Op]) -> str:
    parts = []
    for op in ops:
        if isinstance(op, DeletePod):
            parts.append(f"delete {op.name}")
        else:
            cs = ", ".join(
                f"{'init ' if c.init else ''}{c.name} cpu={c.cpu} mem={c.memory_mi}Mi"
                + (f" hp2Mi={c.hugepages_mi}Mi" if c.hugepages_mi else "")
                for c in op.containers
            )
            parts.append(f"add {op.name}({cs})")
    return "; ".join(parts)


def kubelet_topology(log: str) -> dict[int, tuple[int, int, int, int]] | None:
    """CPU → (core, socket, NUMA node, uncore cache) from the kubelet's log line ``"Detected CPU
    topology"`` (the CPU manager logs its ``topology.Discover`` result at start; None: no such line)."""
    import json

    found = None
    for line in log.splitlines():
        if '"Detected CPU topology"' in line and "topology=" in line:
            found = line
    if found is None:
        return None
    doc, _ = json.JSONDecoder().raw_decode(found[found.index("topology=") + len("topology=") :])
    return {
        int(cpu): (
            int(d.get("CoreID", 0)),
            int(d.get("SocketID", 0)),
            int(d.get("NUMANodeID", 0)),
            int(d.get("UncoreCacheID", 0)),
        )
        for cpu, d in doc.get("CPUDetails", {}).items()
    }


def topology_mismatch(topology: Topology, kubelet: Mapping[int, tuple[int, int, int, int]]) -> Mismatch | None:
    """The CPUs whose (core, socket, NUMA node, uncore cache) differ between the kubelet's view and
    numaplane's ``topology`` (at most 8 of them shown), or None."""
    ours = {c.cpu: (c.core, c.socket, c.numa, c.uncore) for c in topology.cpus if c.online}
    differing = sorted(set(ours) ^ set(kubelet) | {c for c in ours.keys() & kubelet.keys() if ours[c] != kubelet[c]})
    if not differing:
        return None
    return Mismatch(
        f"detected CPU topology ({len(differing)} CPUs differ; core, socket, NUMA node, uncore cache)",
        {c: kubelet.get(c) for c in differing[:8]},
        {c: ours.get(c) for c in differing[:8]},
    )


@dataclass(frozen=True)
class Host:
    """The CPUs and NUMA nodes this host really has online (outside any overlay): where the kubelet's
    containers can run."""

    cpus: CPUSet
    nodes: frozenset[int]

    @classmethod
    def here(cls) -> Host:
        nodes = Path("/sys/devices/system/node/online")
        return cls(
            CPUSet.parse(Path("/sys/devices/system/cpu/online").read_text().strip()),
            frozenset(CPUSet.parse(nodes.read_text().strip())) if nodes.exists() else frozenset({0}),
        )


def snapshot_path(shared: Path, machine: str) -> Path:
    return shared / "topologies" / "real" / f"{machine}.tar.gz"


@dataclass
class ConfigResult:
    """One machine × configuration: decisions compared, mismatches (the first minimised), seconds."""

    machine: str
    config: str
    pods: int
    compared: int
    mismatches: list[Mismatch]
    seconds: float
    minimal: list[Op] = field(default_factory=list)
    #: mismatches of the same kubelet run against numaplane over the hwloc view (``check_hwloc``; -1: not run)
    hwloc_mismatches: int = -1
    #: the kubelet's rejection reasons in the sequence (``OutOfcpu``, ``TopologyAffinityError``, …)
    rejected: list[str] = field(default_factory=list)
    #: the configuration as played (reserved CPUs and memory moved onto the machine), the sequence, the
    #: kubelet's outcome and its Node as the API server held it: what the agent's path is compared with
    #: (:mod:`numaplane_harness.agentdiff`)
    diff_config: DiffConfig | None = None
    ops: list[Op] = field(default_factory=list)
    kubelet: Outcome | None = None
    node: dict[str, Any] | None = None
    #: mismatches a named kubelet divergence explains (:func:`classify`), out of ``mismatches``
    known: list[tuple[KnownDivergence, Mismatch]] = field(default_factory=list)
    #: the kubelet's reason for refusing to start with this configuration on this machine (then the one
    #: comparison is numaplane's refusal of it: :func:`refusal_mismatch`), or ""
    refused: str = ""
    #: the named kubelet bug that crashed the kubelet in this configuration (:func:`explain_crash`; then
    #: nothing of the sequence is compared) and the crash's first line and frame
    crash: tuple[KnownDivergence, str] | None = None

    @property
    def equal(self) -> int:
        """Comparisons equal (the ones a named divergence explains are not equal, nor unexplained)."""
        return self.compared - len(self.mismatches) - len(self.known)


_COMMAND_FAILED = re.compile(r'"command failed" err="((?:[^"\\]|\\.)*)"')


def _kubelet_refusal(log: str) -> str:
    """The kubelet's start-up error (``"command failed" err="…"``, its last one) from its log, or ""."""
    found = _COMMAND_FAILED.findall(log)
    return found[-1].replace('\\"', '"') if found else ""


def refusal_mismatch(log: str, topology: Topology, config: DiffConfig) -> Mismatch | None:
    """None when numaplane refuses ``config`` on ``topology`` as the kubelet did (its start-up error in
    ``log`` holds numaplane's ``PolicyConfigError`` message: e.g. ``align-by-socket`` where sockets
    outnumber NUMA nodes, kvm-skylake-4cpu-2offline), else the difference."""
    from numaplane.policy.errors import PolicyConfigError

    kubelet = _kubelet_refusal(log) or "the kubelet did not start"
    try:
        ResourceManager(topology, config.numaplane_config())
    except PolicyConfigError as exc:
        if str(exc) in kubelet:
            return None
        return Mismatch("configuration refused", kubelet, str(exc))
    return Mismatch("configuration refused", kubelet, "numaplane accepts it")


def _after_crash(kubelet: RealKubelet) -> None:
    """After the kubelet crashed: its pods deleted at once (no kubelet confirms a graceful deletion) and
    the process reaped, so the next configuration's :meth:`RealKubelet.restart` starts afresh."""
    cp = kubelet.control_plane
    listing = f"/api/v1/pods?fieldSelector=spec.nodeName={kubelet.node_name}"
    for pod in cp.request("GET", listing).get("items", []):
        meta = pod["metadata"]
        with contextlib.suppress(ApiStatus):  # already gone
            cp.request(
                "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", {"gracePeriodSeconds": 0}
            )
    kubelet.stop()


def run_machine(
    control_plane: Any,
    containerd: Any,
    snapshot: Path,
    workdir: Path,
    *,
    configs: Sequence[DiffConfig] | None = None,
    seed: int = 27,
    count: int = 12,
    minimise_budget: int = 0,
    reduced: bool = False,
    check_hwloc: bool = False,
    ops: Sequence[Op] | None = None,
) -> list[ConfigResult]:
    """Every configuration (default: :func:`default_matrix`, memory Static where the snapshot allows)
    on one machine; one kubelet, restarted per configuration; ``ops`` replaces the seeded sequence. ``check_hwloc``: also replay numaplane
    over ``discover(view="hwloc")`` against the same kubelet run (the view the managers must not use:
    proof that the differential sees a difference in cores)."""
    from numaplane.topology.sysfs import discover
    from numaplane_harness.kubelet import run_kubelet
    from numaplane_harness.machineoverlay import prepare_overlay, snapshot_has_node_memory

    overlay = prepare_overlay(snapshot, workdir)
    topology = discover(overlay.root, view="kubelet")
    hwloc_view = discover(overlay.root, view="hwloc") if check_hwloc else topology
    memory_static = snapshot_has_node_memory(overlay.root)
    chosen = list(configs) if configs is not None else default_matrix(memory_static=memory_static, reduced=reduced)
    chosen = [
        c if c.memory_static == memory_static else DiffConfig(**{**c.__dict__, "memory_static": memory_static})
        for c in chosen
    ]
    chosen = [onto_online(c, topology.all_cpus, [n.id for n in topology.numa_nodes]) for c in chosen]
    hugepages = any(h.total for n in topology.numa_nodes for h in n.hugepages)
    if ops is None:
        ops = generate_ops(seed, count, hugepages=hugepages and memory_static, max_cpus=topology.all_cpus.size())
    this_host = Host.here()
    results: list[ConfigResult] = []
    with run_kubelet(control_plane, containerd, chosen[0].kubelet_policy(), overlay=overlay) as kubelet:
        detected = kubelet_topology(kubelet.log_path.read_text(errors="replace"))
        if detected is None:
            raise RuntimeError(f'{overlay.name}: the kubelet logged no "Detected CPU topology"')
        seen = topology_mismatch(topology, detected)
        for i, config in enumerate(chosen):
            began = time.monotonic()
            if i:
                try:
                    kubelet.restart(config.kubelet_policy())
                except KubeletStartError as exc:  # the kubelet refuses the configuration on this machine
                    refused = refusal_mismatch(str(exc), topology, config)
                    results.append(
                        ConfigResult(
                            overlay.name,
                            config.name,
                            0,
                            1,
                            [refused] if refused else [],
                            time.monotonic() - began,
                            diff_config=config,
                            refused=_kubelet_refusal(str(exc)),
                        )
                    )
                    continue

            hwloc_mismatches = [-1]
            rejected: list[str] = []
            kept: list[Any] = []

            def both(
                sequence: Sequence[Op],
                config: DiffConfig = config,
                hwloc: bool = False,
                box: list[int] = hwloc_mismatches,
                reasons: list[str] | None = None,
                keep: list[Any] = kept,
            ) -> tuple[int, list[Mismatch]]:
                kubelet.delete_pods()
                real = play_kubelet(kubelet, sequence)
                node_doc = control_plane.request("GET", f"/api/v1/nodes/{kubelet.node_name}")
                if reasons is not None:
                    reasons.extend(d.reason for d in real.decisions if not d.admitted)
                    keep[:] = [real, node_doc]
                node = parse_node(node_doc)
                ours = play_numaplane(topology, config, sequence, lambda op: real.created[op.name], node, this_host)
                if hwloc:
                    other = play_numaplane(hwloc_view, config, sequence, lambda op: real.created[op.name], node)
                    box[0] = len(compare(real, other, memory=config.memory_static)[1])
                return compare(real, ours, memory=config.memory_static)

            try:
                compared, mismatches = both(ops, hwloc=check_hwloc, reasons=rejected)
            except KubeletCrash as crash:
                named = explain_crash(crash, topology, config)
                if named is None:
                    raise
                _after_crash(kubelet)
                results.append(
                    ConfigResult(
                        overlay.name,
                        config.name,
                        sum(isinstance(o, AddPod) for o in ops),
                        1 if i == 0 else 0,
                        [seen] if seen and i == 0 else [],
                        time.monotonic() - began,
                        diff_config=config,
                        ops=list(ops),
                        crash=(named, f"{crash.stack.splitlines()[0]} at {crash.frame} deciding {crash.pod}"),
                    )
                )
                continue
            mismatches, known = classify(mismatches, ops, kept[0], topology, CPUSet.parse(config.reserved_cpus))
            if i == 0:  # the machine as both sides see it: one comparison per machine
                compared += 1
                mismatches = ([seen] if seen else []) + mismatches
            minimal: list[Op] = []
            if mismatches and minimise_budget:
                first = [m for m in mismatches if not m.what.startswith(("final", "detected"))]
                if first:
                    prefix = first_mismatch_prefix(ops, first[0])

                    def fails(sequence: Sequence[Op]) -> Mismatch | None:
                        _, found = both(sequence)
                        pods = [m for m in found if not m.what.startswith("final")]
                        return pods[0] if pods else None

                    minimal = minimise(prefix, fails, budget=minimise_budget)
            kubelet.delete_pods()
            results.append(
                ConfigResult(
                    overlay.name,
                    config.name,
                    sum(isinstance(o, AddPod) for o in ops),
                    compared,
                    mismatches,
                    time.monotonic() - began,
                    minimal,
                    hwloc_mismatches[0],
                    rejected,
                    config,
                    list(ops),
                    kept[0],
                    {"status": {k: kept[1].get("status", {}).get(k, {}) for k in ("capacity", "allocatable")}},
                    known,
                )
            )
    return results

"""The agent's own path in the real-kubelet differential: ``numaplane agent`` deciding through NRI.

For one snapshot and one :class:`~numaplane_harness.kubeletdiff.DiffConfig` the same pod sequence
(:func:`~numaplane_harness.kubeletdiff.generate_ops`) is played on a real ``numaplane agent`` process,
started as users start it:

* ``--sysfs-root`` the snapshot's sysfs (:func:`~numaplane_harness.machineoverlay.prepare_overlay`:
  no mount namespace is needed, the agent reads the folder), ``--config`` the node configuration of
  the configuration under test (:meth:`DiffConfig.numaplane_config`), ``--watch-pods`` against a real
  kube-apiserver (whole-pod admission as the kubelet's: init containers' CPUs reused, scope ``pod``),
  its own state folder and PodResources socket;
* driven over a real NRI connection (ttrpc over a unix socket) by
  :class:`~numaplane_harness.nrifake.FakeRuntime` playing containerd's side: for each pod the
  ``RUN_POD_SANDBOX`` event, then ``CreateContainer`` of what the kubelet creates first (the first init
  container, else every app container); a deletion is ``STOP_POD_SANDBOX`` + ``REMOVE_POD_SANDBOX``.

Each decision is read from the agent's answers (the ``CreateContainer`` error's reason when it refuses),
its checkpoint (``agent_state.json``: the CPU and memory plugins' states, the kubelet's
``cpu_manager_state`` / ``memory_manager_state`` formats) and its PodResources ``List`` (CPUs and NUMA
memory/hugepages of every container created), and compared decision by decision with the kubelet's
(:func:`~numaplane_harness.kubeletdiff.compare`), live or recorded (:func:`record` / :func:`recorded`).

In agent mode the kubelet keeps its generic admission (``OutOfcpu``, …: its managers are ``none``), which
runs before the runtime sees the pod: a pod it rejects never reaches the agent. :func:`play_agent`
models that with :func:`~numaplane_harness.kubeletdiff.node_admission` over the kubelet's Node.

Units: as :mod:`numaplane_harness.kubeletdiff` (CPU whole or millicores, MiB; checkpoint sizes bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from numaplane.grpcapi.podresources.client import PodResourcesClient
from numaplane.nri.errors import StatusError
from numaplane.nri.proto import api_pb2
from numaplane.nrt.podresources import PodResources
from numaplane.placement.explain.predicates import BasicNode, parse_node
from numaplane.resources.pod import add_resources, parse_pod
from numaplane.resources.quantity import Quantity, parse_quantity
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology
from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus
from numaplane_harness.kubeletdiff import (
    AddPod,
    Decision,
    DeletePod,
    DiffConfig,
    Host,
    KnownDivergence,
    Mismatch,
    Op,
    Outcome,
    manifest,
    named_state,
    node_admission,
)
from numaplane_harness.nrifake import FakeRuntime

__all__ = [
    "AgentSide",
    "ApiServer",
    "decision_from_dict",
    "decision_to_dict",
    "inprocess_mismatches",
    "outcome_from_dict",
    "outcome_to_dict",
    "play_agent",
    "podresources_mismatches",
]

#: the agent's refusal in a CreateContainer error: ``numaplane: pod ns/name container c: Reason: message``
_REASON = re.compile(r"numaplane: (?:pod \S+ container \S*: )?([A-Z][A-Za-z]+): ")


class ApiServer(Protocol):
    """What the driver needs of the control plane (:class:`numaplane_harness.kubecluster.ControlPlane`)."""

    admin_kubeconfig: Path

    def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Any: ...

    def register_node(self, name: str, capacity: Mapping[str, str], **kw: Any) -> dict[str, Any]: ...

    def delete_node(self, name: str) -> None: ...


@dataclass
class AgentSide:
    """One agent run: the outcome, its PodResources answers per pod name and the agent's log tail."""

    outcome: Outcome
    podresources: dict[str, PodResources] = field(default_factory=dict)
    log: str = ""
    #: pods the modelled generic admission of the agent-mode kubelet rejected: they never reached the agent
    generic_rejected: set[str] = field(default_factory=set)
    #: the pods as the API server returned them, by operation name (the uids the agent saw)
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)


def _pod_docs(api: ApiServer, node: str, ops: Sequence[Op]) -> dict[str, dict[str, Any]]:
    """Every pod of ``ops`` created in the API, bound to ``node`` (names made unique by the node's)."""
    docs = {}
    for op in ops:
        if isinstance(op, AddPod):
            doc = manifest(op, node)
            doc["metadata"]["name"] = f"{node}-{op.name}"
            docs[op.name] = api.request("POST", "/api/v1/namespaces/default/pods", doc)
    return docs


def _sandbox(doc: Mapping[str, Any]) -> api_pb2.PodSandbox:
    meta = doc["metadata"]
    uid = str(meta["uid"])
    sandbox = api_pb2.PodSandbox(id=f"sb-{uid}", name=meta["name"], uid=uid, namespace=meta["namespace"])
    sandbox.linux.cgroup_parent = f"/kubepods/pod{uid}"  # every pod of the sequence is Guaranteed
    return sandbox


def _container(sandbox: api_pb2.PodSandbox, spec: Mapping[str, Any]) -> api_pb2.Container:
    """A container as the kubelet encodes its resources for the runtime (cgroupfs driver)."""
    limits = spec["resources"]["limits"]
    c = api_pb2.Container(
        id=f"ctr-{sandbox.uid}-{spec['name']}",
        pod_sandbox_id=sandbox.id,
        name=spec["name"],
        state=api_pb2.CONTAINER_CREATED,
    )
    milli = parse_quantity(str(limits["cpu"])).milli_value()
    c.linux.resources.cpu.shares.value = max(2, milli * 1024 // 1000)
    c.linux.resources.cpu.period.value = 100000
    c.linux.resources.cpu.quota.value = milli * 100000 // 1000
    c.linux.resources.memory.limit.value = parse_quantity(str(limits["memory"])).value()
    if "hugepages-2Mi" in limits:
        size = parse_quantity(str(limits["hugepages-2Mi"])).value()
        c.linux.resources.hugepage_limits.append(api_pb2.HugepageLimit(page_size="2MB", limit=size))
    return c


def _first_created(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """What the kubelet creates first: the first init container, else every app container."""
    spec = doc["spec"]
    inits = list(spec.get("initContainers") or [])
    return inits[:1] if inits else list(spec["containers"])


def _reason(message: str) -> str:
    found = _REASON.search(message)
    return found.group(1) if found else f"unparsed: {message[:120]}"


def _read_checkpoint(state_file: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(state_file.read_text())
    except (FileNotFoundError, ValueError):
        return None  # not written yet, or caught between write and rename (never: rename is atomic)
    return dict(doc.get("data", {}).get("manager", {}).get("plugins", {}))


def _kubelet_keys(state: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The parts of a plugin's state the kubelet's checkpoint has (the agent keeps more: reuse); an empty
    ``entries`` is left out, as the kubelet's checkpoints (``json:"entries,omitempty"``) and numaplane's
    ``to_checkpoint`` leave it (the agent's own state file keeps ``"entries": {}``)."""
    return {k: state[k] for k in keys if k in state and not (k == "entries" and not state[k])}


CPU_KEYS = ("policyName", "defaultCpuSet", "entries")
MEMORY_KEYS = ("policyName", "machineState", "entries")


class _Driver:
    def __init__(self, workdir: Path, api: ApiServer, config: DiffConfig, sysfs_root: Path, node: str) -> None:
        self.workdir, self.api, self.config, self.sysfs_root, self.node = workdir, api, config, sysfs_root, node
        self.state_file = workdir / "state" / "agent_state.json"
        self.podres = workdir / "podres.sock"
        self.nri = workdir / "nri.sock"
        self.log = workdir / "agent.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start_agent(self) -> None:
        (self.workdir / "config.json").write_text(json.dumps(self.config.numaplane_config()))
        args = [
            sys.executable, "-c", "import sys; from numaplane.cli import main; sys.exit(main())", "agent",
            "--nri-socket", str(self.nri),
            "--sysfs-root", str(self.sysfs_root),
            "--config", str(self.workdir / "config.json"),
            "--state-dir", str(self.workdir / "state"),
            "--node-name", self.node,
            "--podresources-socket", str(self.podres),
            "--watch-pods", "--kubeconfig", str(self.api.admin_kubeconfig),
            "--metrics-address", "", "--health-address", "",
            "--log-level", "warning",
        ]  # fmt: skip
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    async def checkpoint_with(self, uid: str | None, gone: Sequence[str] = (), timeout: float = 10) -> dict[str, Any]:
        """The checkpoint once it lists ``uid`` in the CPU or memory plugin's entries and none of ``gone``
        (the writer coalesces: at most one write per 50 ms, off the request path)."""
        deadline = time.monotonic() + timeout
        while True:
            plugins = _read_checkpoint(self.state_file)
            if plugins is not None:
                held = set(plugins.get("cpu", {}).get("entries", {})) | set(
                    plugins.get("memory", {}).get("entries", {})
                )
                if (uid is None or uid in held) and not held & set(gone):
                    return plugins
            if time.monotonic() > deadline:
                raise TimeoutError(f"the agent's checkpoint never showed pod {uid} (gone: {list(gone)})")
            await asyncio.sleep(0.05)

    async def settled(self, gone: Sequence[str], timeout: float = 10) -> dict[str, Any]:
        """The checkpoint once two reads 150 ms apart agree (the last change written: the writer
        coalesces changes within 50 ms)."""
        deadline = time.monotonic() + timeout
        last = await self.checkpoint_with(None, gone, timeout)
        while time.monotonic() < deadline:
            await asyncio.sleep(0.15)
            now = await self.checkpoint_with(None, gone, timeout)
            if now == last:
                return now
            last = now
        return last

    async def podresources(self) -> dict[str, PodResources]:
        async with PodResourcesClient(str(self.podres), timeout_seconds=5) as client:
            listed = await client.list()
        return {p.name: p for p in listed}


def play_agent(
    api: ApiServer,
    sysfs_root: Path,
    config: DiffConfig,
    ops: Sequence[Op],
    workdir: Path,
    node: Mapping[str, Any] | None = None,
    *,
    timeout: float = 30,
) -> AgentSide:
    """Play ``ops`` on a fresh ``numaplane agent`` over ``sysfs_root`` (see the module doc).

    ``node``: the kubelet's Node as the API server held it (its allocatable): the kubelet's generic
    admission, which in agent mode runs before the runtime sees a pod, is modelled over it; ``None``
    sends every pod to the agent. The pods are created in the API bound to a Node of the driver's
    own (registered with the same capacity, nothing runs it) and deleted at the end."""
    workdir.mkdir(parents=True, exist_ok=True)
    name = f"agentdiff-{uuid.uuid4().hex[:8]}"
    basic: BasicNode | None = parse_node(node) if node is not None else None
    capacity = dict((node or {}).get("status", {}).get("capacity", {})) or {"cpu": "1", "memory": "1Gi", "pods": "110"}
    api.register_node(name, capacity, allocatable=dict((node or {}).get("status", {}).get("allocatable", capacity)))
    driver = _Driver(workdir, api, config, sysfs_root, name)
    try:
        docs = _pod_docs(api, name, ops)
        driver.start_agent()
        return asyncio.run(_drive(driver, ops, docs, basic, timeout))
    finally:
        if driver.process is not None:
            terminate_process(driver.process, 10)
        for op in ops:
            if isinstance(op, AddPod):
                with contextlib.suppress(ApiStatus):  # cleanup: a pod already gone is fine
                    api.request(
                        "DELETE", f"/api/v1/namespaces/default/pods/{name}-{op.name}", {"gracePeriodSeconds": 0}
                    )
        api.delete_node(name)


async def _drive(
    driver: _Driver,
    ops: Sequence[Op],
    docs: Mapping[str, Mapping[str, Any]],
    node: BasicNode | None,
    timeout: float,
) -> AgentSide:
    began = time.monotonic()
    host = Host.here()
    runtime = FakeRuntime(runtime_name="containerd", runtime_version="1.7.24~ds1", request_timeout_seconds=timeout)
    await runtime.listen(str(driver.nri))
    try:
        try:
            session = await runtime.wait_session(1, timeout_seconds=timeout)
            await asyncio.wait_for(session.synchronized.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"the agent never registered over NRI; its log:\n{driver.log_tail()}") from None
        uids = {str(d["metadata"]["uid"]): n for n, d in docs.items()}
        decisions: list[Decision] = []
        answers: dict[str, PodResources] = {}
        admitted: dict[str, dict[str, Quantity]] = {}
        live: dict[str, api_pb2.PodSandbox] = {}
        gone: list[str] = []
        generic_rejected: set[str] = set()
        for op in ops:
            if isinstance(op, DeletePod):
                sandbox = live.pop(op.name, None)
                if sandbox is not None:
                    await runtime.state_change(api_pb2.STOP_POD_SANDBOX, sandbox)
                    await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, sandbox)
                    gone.append(sandbox.uid)
                admitted.pop(str(docs[op.name]["metadata"]["uid"]), None)
                continue
            doc = docs[op.name]
            uid = str(doc["metadata"]["uid"])
            reason = ""
            if node is not None:  # the kubelet's generic admission first: a pod it rejects never runs
                used: dict[str, Quantity] = {}
                for requests in admitted.values():
                    used = add_resources(used, requests)
                pod = parse_pod(doc)
                reason = node_admission(pod, node, used, len(admitted))
                if not reason:
                    admitted[uid] = pod.effective_requests()
            if reason:
                decisions.append(Decision(op.name, False, reason, {}, {}))
                generic_rejected.add(op.name)
                continue
            sandbox = _sandbox(doc)
            await runtime.state_change(api_pb2.RUN_POD_SANDBOX, sandbox)
            live[op.name] = sandbox
            try:
                for spec in _first_created(doc):
                    await runtime.create_container(sandbox, _container(sandbox, spec))
            except StatusError as exc:
                reason = _reason(str(exc))
            if reason:
                # the kubelet's pod failed admission: it never runs (its sandbox goes)
                admitted.pop(uid, None)
                await runtime.state_change(api_pb2.STOP_POD_SANDBOX, sandbox)
                await runtime.state_change(api_pb2.REMOVE_POD_SANDBOX, sandbox)
                live.pop(op.name)
                decisions.append(Decision(op.name, False, reason, {}, {}))
                continue
            plugins = await driver.checkpoint_with(uid if _held(op, driver.config) else None, gone)
            listed = await driver.podresources()
            if doc["metadata"]["name"] in listed:
                answers[op.name] = listed[doc["metadata"]["name"]]
            decision = Decision(
                op.name,
                True,
                "",
                dict(plugins.get("cpu", {}).get("entries", {}).get(uid, {})),
                dict(plugins.get("memory", {}).get("entries", {}).get(uid, {})),
            )
            decisions.append(decision)
            inits = list(doc["spec"].get("initContainers") or [])
            if inits and _runs_here(decision, inits[0]["name"], plugins, host):
                # the kubelet really runs it here (``true``): it completes and the app containers are created
                first = _container(sandbox, inits[0])
                first.state = api_pb2.CONTAINER_STOPPED
                await runtime.call(
                    "StopContainer",
                    api_pb2.StopContainerRequest(pod=sandbox, container=first),
                    api_pb2.StopContainerResponse,
                )
                for spec in doc["spec"]["containers"]:
                    await runtime.create_container(sandbox, _container(sandbox, spec))
        plugins = await driver.settled(gone)
        cpu = _kubelet_keys(plugins.get("cpu", {}), CPU_KEYS)
        memory = _kubelet_keys(plugins.get("memory", {}), MEMORY_KEYS) if driver.config.memory_static else {}
        outcome = Outcome(decisions, named_state(cpu, uids), named_state(memory, uids), time.monotonic() - began)
        return AgentSide(outcome, answers, driver.log_tail(), generic_rejected, {n: dict(d) for n, d in docs.items()})
    finally:
        await runtime.close()


def _runs_here(decision: Decision, name: str, plugins: Mapping[str, Any], host: Host) -> bool:
    """Whether container ``name`` can really run on this host: its CPUs (exclusive, else the shared
    pool) and its memory's NUMA nodes all exist here (elsewhere runc refuses its cpuset)."""
    cpus = CPUSet.parse(decision.cpus.get(name) or str(plugins.get("cpu", {}).get("defaultCpuSet", "")))
    nodes = {n for b in decision.memory.get(name, []) for n in b.get("numaAffinity", [])}
    return cpus.size() > 0 and cpus <= host.cpus and nodes <= host.nodes


def _held(op: AddPod, config: DiffConfig) -> bool:
    """Whether a checkpoint entry records the pod: the memory manager Static holds every Guaranteed pod's
    memory, the CPU manager a pod with a whole-CPU container (every pod of the sequence is Guaranteed)."""
    return config.memory_static or any("m" not in c.cpu for c in op.containers)


def podresources_mismatches(side: AgentSide, memory: bool) -> list[str]:
    """Where the agent's PodResources answer disagrees with its own decisions (exclusive CPUs of each
    container listed; memory and hugepages blocks: type, size, NUMA nodes)."""
    problems = []
    by_pod = {d.pod: d for d in side.outcome.decisions}
    for pod, answer in side.podresources.items():
        decision = by_pod[pod]
        for c in answer.containers:
            cpus = decision.cpus.get(c.name)
            if cpus is not None and CPUSet(c.cpu_ids) != CPUSet.parse(cpus):
                problems.append(f"{pod}/{c.name}: PodResources cpus {CPUSet(c.cpu_ids).format()} != checkpoint {cpus}")
            if memory:
                listed = sorted((m.memory_type, m.size_bytes, tuple(m.numa_nodes)) for m in c.memory)
                held = sorted(
                    (str(b["type"]), int(b["size"]), tuple(b["numaAffinity"]))
                    for b in decision.memory.get(c.name, [])
                    if int(b["size"])
                )
                if listed != held:
                    problems.append(f"{pod}/{c.name}: PodResources memory {listed} != checkpoint {held}")
    return problems


def decision_to_dict(d: Decision) -> dict[str, Any]:
    return {"pod": d.pod, "admitted": d.admitted, "reason": d.reason, "cpus": dict(d.cpus), "memory": dict(d.memory)}


def decision_from_dict(doc: Mapping[str, Any]) -> Decision:
    return Decision(str(doc["pod"]), bool(doc["admitted"]), str(doc["reason"]), dict(doc["cpus"]), dict(doc["memory"]))


def outcome_to_dict(o: Outcome) -> dict[str, Any]:
    return {
        "decisions": [decision_to_dict(d) for d in o.decisions],
        "cpu_state": o.cpu_state,
        "memory_state": o.memory_state,
    }


def outcome_from_dict(doc: Mapping[str, Any]) -> Outcome:
    return Outcome([decision_from_dict(d) for d in doc["decisions"]], dict(doc["cpu_state"]), dict(doc["memory_state"]))


def ops_to_json(ops: Sequence[Op]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for op in ops:
        if isinstance(op, DeletePod):
            out.append({"delete": op.name})
        else:
            out.append({"add": op.name, "containers": [c.__dict__ for c in op.containers]})
    return out


def ops_from_json(doc: Sequence[Mapping[str, Any]]) -> list[Op]:
    from numaplane_harness.kubeletdiff import ContainerSpec

    ops: list[Op] = []
    for entry in doc:
        if "delete" in entry:
            ops.append(DeletePod(str(entry["delete"])))
        else:
            ops.append(AddPod(str(entry["add"]), tuple(ContainerSpec(**c) for c in entry["containers"])))
    return ops


@dataclass(frozen=True)
class Case:
    """One recorded machine × configuration: what the kubelet decided for ``ops`` on its ``node``."""

    machine: str
    config: DiffConfig
    ops: list[Op]
    kubelet: Outcome
    node: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "config": {**self.config.__dict__, "cpu_options": dict(self.config.cpu_options)},
            "ops": ops_to_json(self.ops),
            "kubelet": outcome_to_dict(self.kubelet),
            "node": self.node,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Case:
        return cls(
            str(doc["machine"]),
            DiffConfig(**doc["config"]),
            ops_from_json(doc["ops"]),
            outcome_from_dict(doc["kubelet"]),
            dict(doc["node"]),
        )


@dataclass
class AgentResult:
    """One machine × configuration on the agent's path: decisions compared with the kubelet's."""

    machine: str
    config: str
    pods: int
    compared: int
    mismatches: list[Mismatch]
    #: where the agent's PodResources answer disagrees with its checkpoint (must be none)
    podresources: list[str]
    seconds: float
    log: str = ""
    #: mismatches a named divergence explains (out of ``mismatches``)
    known: list[tuple[KnownDivergence, Mismatch]] = field(default_factory=list)
    #: where the agent differs from numaplane's in-process manager on the same sequence in agent mode's
    #: order (:func:`~numaplane_harness.kubeletdiff.play_numaplane` ``agent_mode``): must be none, named
    #: kubelet divergences or not (on the hybrid machine this is what still sees a numaplane difference
    #: after the kubelet's first invalid decision)
    inprocess: list[Mismatch] = field(default_factory=list)
    #: comparisons of the agent with the in-process manager (its decisions and final checkpoints)
    inprocess_compared: int = 0
    #: the shortest sequence found that still shows the first ``inprocess`` difference (empty: none)
    minimal: list[Op] = field(default_factory=list)

    @property
    def equal(self) -> int:
        return self.compared - len(self.mismatches) - len(self.known)


#: Both reject, for different reasons. The real kubelet runs its resource managers' admit handler
#: before its generic admission (``OutOfcpu``, …: :func:`~numaplane_harness.kubeletdiff.node_admission`),
#: so a pod that both would refuse is refused by the managers (``TopologyAffinityError``,
#: ``SMTAlignmentError``). In agent mode the kubelet's managers are ``none`` and admit everything: its
#: generic admission refuses the pod first and the runtime, and so the agent, never sees it.
AGENT_MODE_ADMISSION_ORDER = KnownDivergence(
    "agent-mode-admission-order",
    "a pod both refuse: the kubelet's managers refuse it first (TopologyAffinityError/SMTAlignmentError); "
    "in agent mode its generic admission refuses it first (OutOf*) and the agent never sees it",
)


def inprocess_mismatches(topology: Topology, case: Case, side: AgentSide, host: Host) -> tuple[int, list[Mismatch]]:
    """``(comparisons, differences)`` of the agent's run ``side`` against numaplane's in-process manager
    on the same pods (same uids) in agent mode's order; both are numaplane, so no difference is named."""
    from numaplane_harness.kubeletdiff import compare, play_numaplane

    node = parse_node(case.node) if case.node else None
    own = play_numaplane(topology, case.config, case.ops, lambda op: side.docs[op.name], node, host, agent_mode=True)
    return compare(own, side.outcome, memory=case.config.memory_static)


def run_cases(
    api: ApiServer, snapshot: Path, cases: Sequence[Case], workdir: Path, *, minimise_budget: int = 0
) -> list[AgentResult]:
    """Every case of one machine (``snapshot``) on a fresh agent each, compared with the kubelet's outcome
    and with numaplane's in-process manager (:func:`inprocess_mismatches`); the first in-process
    difference shrunk with :func:`~numaplane_harness.kubeletdiff.minimise` (each try a fresh agent, at
    most ``minimise_budget``). A difference from the kubelet that the in-process manager shares is the
    kubelet path's to shrink (``bench/kubelet_differential.py --minimise``); one it does not share is an
    in-process difference, shrunk here without the kubelet."""
    from numaplane.topology.sysfs import discover
    from numaplane_harness.kubeletdiff import classify, compare, first_mismatch_prefix, minimise
    from numaplane_harness.machineoverlay import prepare_overlay

    overlay = prepare_overlay(snapshot, workdir / "overlay")
    topology = discover(overlay.root, view="kubelet")
    host = Host.here()
    results = []
    tries = 0
    for i, case in enumerate(cases):
        began = time.monotonic()
        side = play_agent(api, overlay.root, case.config, case.ops, workdir / f"agent-{i}", case.node)
        own_compared, own = inprocess_mismatches(topology, case, side, host)
        minimal: list[Op] = []
        first = [m for m in own if not m.what.startswith("final")]
        if first and minimise_budget:

            def fails(sequence: Sequence[Op], case: Case = case) -> Mismatch | None:
                nonlocal tries
                tries += 1
                shorter = Case(case.machine, case.config, list(sequence), case.kubelet, case.node)
                again = play_agent(api, overlay.root, case.config, sequence, workdir / f"shrink-{tries}", case.node)
                pods = [
                    m for m in inprocess_mismatches(topology, shorter, again, host)[1] if not m.what.startswith("final")
                ]
                return pods[0] if pods else None

            minimal = minimise(first_mismatch_prefix(case.ops, first[0]), fails, budget=minimise_budget)
        compared, found = compare(case.kubelet, side.outcome, memory=case.config.memory_static)
        found, known = classify(found, case.ops, case.kubelet, topology, CPUSet.parse(case.config.reserved_cpus))
        mismatches = []
        for m in found:
            if m.what in side.generic_rejected and not m.kubelet[0] and not m.kubelet[1].startswith("OutOf"):
                known.append((AGENT_MODE_ADMISSION_ORDER, m))
            else:
                mismatches.append(m)
        results.append(
            AgentResult(
                case.machine,
                case.config.name,
                sum(isinstance(o, AddPod) for o in case.ops),
                compared,
                mismatches,
                podresources_mismatches(side, case.config.memory_static),
                time.monotonic() - began,
                side.log,
                known,
                own,
                own_compared,
                minimal,
            )
        )
    return results

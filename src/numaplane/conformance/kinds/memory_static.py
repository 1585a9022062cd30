"""Kind ``memory-static``: the static Memory Manager policy (construction, Start, Allocate,
RemoveContainer, hints, pod requests), one policy and state per case, ``ops`` in order.

:func:`run_production` builds the resource manager's built-in memory plugin instead — from a machine
(``Topology``: the case's NUMA memory and hugepages) and a ``NodeResourceConfig`` (``memoryManager``:
Static, ``reservedMemory``) as the agent does — installs the case's state, and answers hints,
allocate and remove through the plugin. Cases expecting a construction error, or without machine
information, are not run there (the configuration cannot express them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from numaplane.conformance.outcome import EXPECT_NEW, NOT_A_NODE_CONFIG, CaseContext, NotApplicable, Outcome
from numaplane.policy.builtin import MemoryPlugin
from numaplane.policy.config import parse_config
from numaplane.policy.errors import PolicyConfigError, PolicyError
from numaplane.policy.hints import TopologyHint
from numaplane.policy.memory import MemoryPolicy
from numaplane.policy.memory_state import MemoryState, machine_memory_from_dict
from numaplane.resources.pod import Container, Pod, parse_pod
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import CPUInfo, HugePages, NUMANode, Topology


def _norm_state(doc: dict[str, Any]) -> tuple[Any, Any]:
    """SCHEMA §4.5 comparison: cells as sets, blocks as multisets, affinities ascending."""
    machine = {
        str(n): (s["numberOfAssignments"], tuple(sorted(s["cells"] or [])), _tables(s["memoryMap"]))
        for n, s in (doc.get("machineState", doc.get("machine_state")) or {}).items()
    }
    entries = {
        uid: {
            name: Counter((tuple(sorted(b["numaAffinity"])), b["type"], b["size"]) for b in blocks)
            for name, blocks in cs.items()
        }
        for uid, cs in (doc.get("entries") or {}).items()
    }
    return machine, entries


def _tables(doc: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    keys = ("total", "systemReserved", "allocatable", "reserved", "free")
    return {r: tuple(t[k] for k in keys) for r, t in (doc or {}).items()}


class _ThroughPlugin:
    """The policy calls of :func:`_run_op`, hints / allocate / remove answered by the memory plugin."""

    def __init__(self, plugin: MemoryPlugin, policy: MemoryPolicy) -> None:
        self.plugin = plugin
        self.policy = policy
        self.state = policy.state

    def start(self) -> None:
        self.policy.start()

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        self.plugin.allocate(pod, container, hint)

    def remove(self, pod_uid: str, container: str) -> None:
        self.plugin.release(pod_uid, container)

    def hints(self, pod: Pod, container: Container) -> Any:
        return self.plugin.hints(pod, container)

    def pod_requests(self, pod: Pod) -> Any:
        return self.policy.pod_requests(pod)


def _machine_topology(doc: dict[str, Any]) -> Topology:
    """A machine with the case's NUMA memory and hugepages (one CPU per node: the memory plugin reads
    only the memory side)."""
    nodes = []
    cpus = []
    for i, n in enumerate(doc.get("numa_nodes") or ()):
        pages = tuple(HugePages(int(h["page_size_kib"]) * 1024, int(h["num_pages"])) for h in n.get("hugepages") or ())
        nodes.append(NUMANode(int(n["id"]), CPUSet([i]), int(n["memory"]), hugepages=pages))
        cpus.append(CPUInfo(cpu=i, core=i, socket=0, numa=int(n["id"]), uncore=0))
    return Topology(cpus=tuple(cpus), numa_nodes=tuple(nodes), name="memory-static case")


def run_production(case: dict[str, Any], ctx: CaseContext) -> Outcome | NotApplicable:
    expect_new = case.get("expect_new")
    if expect_new is not None and expect_new != {"ok": True}:
        return NotApplicable(EXPECT_NEW)
    if not case.get("machine"):
        return NotApplicable("no machine in the case: the agent's memory plugin is built from a machine")
    reserved = [
        {"numaNode": int(n), "limits": {str(r): int(v) for r, v in limits.items()}}
        for n, limits in sorted(case["reserved"].items(), key=lambda kv: int(kv[0]))
    ]
    try:
        config = parse_config({"memoryManager": {"policy": "Static", "reservedMemory": reserved}})
        plugin = MemoryPlugin(_machine_topology(case["machine"]), config)
    except (PolicyConfigError, PolicyError):
        return NotApplicable(NOT_A_NODE_CONFIG)
    assert plugin.policy is not None
    plugin.policy.state = MemoryState.from_dict(case["state"])
    through = _ThroughPlugin(plugin, plugin.policy)
    pods = {uid: parse_pod(doc) for uid, doc in (case.get("pods") or {}).items()}
    for i, op in enumerate(case.get("ops") or []):
        got, expected = _run_op(through, pods, op)
        if expected is not None and got != expected:
            return Outcome.fail(expected, got, f"ops[{i}].expect")
        if "expect_state" in op:
            got_state, want_state = _norm_state(plugin.policy.state.to_dict()), _norm_state(op["expect_state"])
            if got_state != want_state:
                return Outcome.fail(op["expect_state"], plugin.policy.state.to_dict(), f"ops[{i}].expect_state")
    return Outcome.ok()


def _run_op(policy: MemoryPolicy | _ThroughPlugin, pods: dict[str, Pod], op: dict[str, Any]) -> tuple[Any, Any]:
    """Return ``(got, expected)`` for the op's ``expect``."""
    kind, expect = op["op"], op.get("expect")
    if kind == "start":
        try:
            policy.start()
        except PolicyError as exc:
            return {"error": str(exc)}, expect
        assert expect is not None
        if "state" in expect:
            return _norm_state(policy.state.to_dict()), _norm_state(expect["state"])
        return {"ok": True}, expect
    pod = pods.get(op.get("pod", ""))
    if kind == "allocate":
        assert pod is not None
        container = pod.container(op["container"])
        assert container is not None
        try:
            policy.allocate(pod, container, TopologyHint.from_dict(op["hint"]))
        except PolicyError as exc:
            return {"error": str(exc)}, expect
        return {"ok": True}, expect
    if kind == "remove":
        policy.remove(op["pod"], op["container"])
        return None, None
    if kind == "hints":
        assert pod is not None
        container = pod.container(op["container"])
        assert container is not None
        hints = policy.hints(pod, container)
        got = None if hints is None else {r: [h.to_dict() for h in hs] for r, hs in hints.items()}
        return {"hints": got}, expect
    if kind == "pod_requests":
        assert pod is not None
        return {"requests": policy.pod_requests(pod)}, expect
    return {"unknown op": kind}, expect


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    reserved = {int(n): {str(r): int(v) for r, v in limits.items()} for n, limits in case["reserved"].items()}
    state = MemoryState.from_dict(case["state"])
    try:
        policy = MemoryPolicy(machine_memory_from_dict(case.get("machine")), reserved, state)
    except PolicyConfigError as exc:
        got = {"error": str(exc)}
        return Outcome.ok() if got == case.get("expect_new") else Outcome.fail(case.get("expect_new"), got, "new")
    if case.get("expect_new") is not None and case["expect_new"] != {"ok": True}:
        return Outcome.fail(case["expect_new"], {"ok": True}, "new")
    pods = {uid: parse_pod(doc) for uid, doc in (case.get("pods") or {}).items()}
    for i, op in enumerate(case.get("ops") or []):
        got, expected = _run_op(policy, pods, op)
        if expected is not None and got != expected:
            return Outcome.fail(expected, got, f"ops[{i}].expect")
        if "expect_state" in op:
            got_state, want_state = _norm_state(policy.state.to_dict()), _norm_state(op["expect_state"])
            if got_state != want_state:
                return Outcome.fail(op["expect_state"], policy.state.to_dict(), f"ops[{i}].expect_state")
    return Outcome.ok()

"""Conformance kind ``cpu-static`` (SCHEMA.md §4.2): static policy construction, Start, Allocate, RemoveContainer.

:func:`run_production` replays the ops through the resource manager's built-in CPU plugin — what the
agent's admission calls (allocate with the merged hint, release on removal) — built from a
``NodeResourceConfig`` document (``cpuManager``: static, the reservation, the options), with the
case's state installed. It applies to every case the configuration can express: cases expecting a
construction error (worded by the kubelet, not by the config validator) are not run there.
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import EXPECT_NEW, NOT_A_NODE_CONFIG, CaseContext, NotApplicable, Outcome
from numaplane.policy.builtin import CPUPlugin
from numaplane.policy.config import parse_config
from numaplane.policy.cpu import ReservedCPUs, StaticPolicy
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.errors import AdmissionError, PolicyConfigError, PolicyError
from numaplane.policy.hints import TopologyHint
from numaplane.resources.pod import Pod, parse_pod
from numaplane.topology.cpuset import CPUSet


def _state(doc: dict[str, Any]) -> CPUState:
    return CPUState(
        default=CPUSet.parse(str(doc.get("default", ""))),
        assignments={
            pod: {name: CPUSet.parse(cpus) for name, cpus in containers.items()}
            for pod, containers in (doc.get("assignments") or {}).items()
        },
    )


def _reserved(doc: dict[str, Any]) -> ReservedCPUs:
    cpus = doc.get("cpus")
    return ReservedCPUs(int(doc.get("count", 0)), None if cpus is None else CPUSet.parse(str(cpus)))


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    topology = ctx.topology(str(case["topology"]))
    try:
        policy = StaticPolicy(topology, _reserved(case.get("reserved") or {}), case.get("options") or {})
    except PolicyError as exc:
        expected = (case.get("expect_new") or {}).get("error")
        return Outcome.ok() if expected == str(exc) else Outcome.fail(expected, {"error": str(exc)}, "expect_new")
    if "expect_new" in case:
        return Outcome.fail(case["expect_new"], "constructed", "expect_new")
    state = _state(case.get("state") or {})
    pods = {uid: parse_pod(doc) for uid, doc in (case.get("pods") or {}).items()}
    for i, op in enumerate(case.get("ops") or []):
        outcome = _run_op(policy, state, pods, op, f"ops[{i}]")
        if not outcome.passed:
            return outcome
    return Outcome.ok()


class _ThroughPlugin:
    """The policy calls of :func:`_run_op`, answered through the CPU plugin (its state is ``state``)."""

    def __init__(self, plugin: CPUPlugin, policy: StaticPolicy) -> None:
        self.plugin = plugin
        self.policy = policy

    def start(self, state: CPUState) -> None:
        self.policy.start(state)

    def allocate(self, state: CPUState, pod: Pod, container: str, hint: TopologyHint) -> CPUSet | None:
        (ctr,) = [c for c in pod.all_containers() if c.name == container]
        return self.plugin.allocate(pod, ctr, hint).cpus

    def remove_container(self, state: CPUState, pod_uid: str, container: str) -> None:
        self.plugin.release(pod_uid, container)

    def pod_guaranteed_cpus(self, pod: Pod) -> int:
        return self.policy.pod_guaranteed_cpus(pod)


def run_production(case: dict[str, Any], ctx: CaseContext) -> Outcome | NotApplicable:
    if "expect_new" in case:
        return NotApplicable(EXPECT_NEW)
    reserved = case.get("reserved") or {}
    cpu: dict[str, Any] = {"policy": "static", "reservedCPUCount": int(reserved.get("count", 0))}
    if "cpus" in reserved:
        cpu["reservedCPUs"] = str(reserved["cpus"])
    if case.get("options"):
        cpu["options"] = dict(case["options"])
    try:
        plugin = CPUPlugin(ctx.topology(str(case["topology"])), parse_config({"cpuManager": cpu}))
    except (PolicyConfigError, PolicyError):
        return NotApplicable(NOT_A_NODE_CONFIG)
    assert plugin.policy is not None
    plugin.state = _state(case.get("state") or {})
    through = _ThroughPlugin(plugin, plugin.policy)
    pods = {uid: parse_pod(doc) for uid, doc in (case.get("pods") or {}).items()}
    for i, op in enumerate(case.get("ops") or []):
        outcome = _run_op(through, plugin.state, pods, op, f"ops[{i}]")
        if not outcome.passed:
            return outcome
    return Outcome.ok()


def _run_op(
    policy: StaticPolicy | _ThroughPlugin, state: CPUState, pods: dict[str, Pod], op: dict[str, Any], where: str
) -> Outcome:
    kind = op["op"]
    expect = op.get("expect") or {}
    if kind == "start":
        try:
            policy.start(state)
        except PolicyError as exc:
            got: Any = {"error": str(exc)}
        else:
            got = {"default": state.default.format()}
        if "default" in expect and "default" in got:
            ok = CPUSet.parse(expect["default"]) == CPUSet.parse(got["default"])
        else:
            ok = expect == got
        return Outcome.ok() if ok else Outcome.fail(expect, got, f"{where}.expect")
    if kind == "allocate":
        outcome = _allocate(policy, state, pods[op["pod"]], op, where)
    elif kind == "remove":
        policy.remove_container(state, str(op["pod"]), str(op["container"]))
        if state.get(str(op["pod"]), str(op["container"])) is not None:
            return Outcome.fail("no assignment", "assignment kept", where)
        outcome = Outcome.ok()
    elif kind == "pod_guaranteed_cpus":
        n = policy.pod_guaranteed_cpus(pods[op["pod"]])
        outcome = Outcome.ok() if n == expect.get("cpus") else Outcome.fail(expect, {"cpus": n}, f"{where}.expect")
    else:
        return Outcome.fail("a known op", kind, f"{where}.op")
    if outcome.passed and "expect_default" in op and CPUSet.parse(op["expect_default"]) != state.default:
        return Outcome.fail(op["expect_default"], state.default.format(), f"{where}.expect_default")
    return outcome


def _allocate(
    policy: StaticPolicy | _ThroughPlugin, state: CPUState, pod: Pod, op: dict[str, Any], where: str
) -> Outcome:
    expect = op.get("expect") or {}
    container = str(op["container"])
    before = state.get(pod.uid, container)
    hint = TopologyHint.from_dict(op.get("hint"))
    try:
        cpus = policy.allocate(state, pod, container, hint)
    except AdmissionError as exc:
        got: dict[str, Any] = {"error": str(exc)}
        if exc.reason == "SMTAlignmentError":
            got["error_type"] = exc.reason
        if state.get(pod.uid, container) != before:
            return Outcome.fail("no new assignment after an error", state.get(pod.uid, container), where)
        return Outcome.ok() if got == expect else Outcome.fail(expect, got, f"{where}.expect")
    assigned = state.get(pod.uid, container)
    if "shared" in expect:
        ok = cpus is None and assigned is None
        return Outcome.ok() if ok else Outcome.fail(expect, {"cpus": str(assigned)}, f"{where}.expect")
    if "cpus" in expect and assigned is not None and assigned == cpus == CPUSet.parse(expect["cpus"]):
        return Outcome.ok()
    return Outcome.fail(expect, {"cpus": None if assigned is None else assigned.format()}, f"{where}.expect")

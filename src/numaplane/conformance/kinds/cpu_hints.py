"""Conformance kind ``cpu-hints`` (SCHEMA.md §4.3): static policy topology hints, container and pod scope."""

from __future__ import annotations

from collections import Counter
from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.policy.cpu import ReservedCPUs, StaticPolicy
from numaplane.policy.cpu_state import CPUState
from numaplane.policy.hints import TopologyHint
from numaplane.resources.pod import parse_pod
from numaplane.topology.cpuset import CPUSet


def _key(hint: TopologyHint) -> tuple[tuple[int, ...] | None, bool]:
    return (None if hint.numa is None else hint.numa.ids(), hint.preferred)


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    topology = ctx.topology(str(case["topology"]))
    reserved = CPUSet.parse(str(case.get("reserved", "")))
    policy = StaticPolicy(topology, ReservedCPUs(reserved.size(), reserved), case.get("options") or {})
    state = CPUState(
        default=CPUSet.parse(str(case["available"])),
        assignments={
            pod: {name: CPUSet.parse(cpus) for name, cpus in containers.items()}
            for pod, containers in (case.get("assignments") or {}).items()
        },
    )
    pod = parse_pod(case["pod"])
    if case["scope"] == "pod":
        hints = policy.pod_hints(state, pod)
    else:
        hints = policy.hints(state, pod, str(case["container"]))
    got = None if hints is None else [h.to_dict() for h in hints.get("cpu", [])]
    expected = case["expect"]["hints"]
    if expected is None or got is None:
        return Outcome.ok() if expected == got else Outcome.fail(expected, got)
    want = Counter(_key(TopologyHint.from_dict(h)) for h in expected)
    have = Counter(_key(TopologyHint.from_dict(h)) for h in got)
    return Outcome.ok() if want == have else Outcome.fail(expected, got)

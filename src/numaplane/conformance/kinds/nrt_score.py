"""Conformance kind ``nrt-score``: the NodeResourceTopologyMatch Score (SCHEMA.md §4.7).

Every node is scored with :func:`numaplane.placement.score.score` on fresh data (Passthrough cache);
``expect.scores`` is compared exactly. :func:`run_production` scores all the case's nodes at once with
the scheduler state's vectorised pipeline (every node, feasible or not).
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.conformance.production import scheduler_state
from numaplane.placement.score import ScoringStrategy, score
from numaplane.resources.pod import parse_pod


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    strategy = ScoringStrategy.from_dict(case["strategy"])
    pod = parse_pod(case["pod"])
    got = {name: score(pod, entry.get("nrt"), entry.get("node"), strategy) for name, entry in case["nodes"].items()}
    expect = case["expect"]["scores"]
    return Outcome.ok() if got == expect else Outcome.fail(expect, got, "expect.scores")


def run_production(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    strategy = ScoringStrategy.from_dict(case["strategy"])
    pod = parse_pod(case["pod"])
    state = scheduler_state({name: (e.get("nrt"), e.get("node")) for name, e in case["nodes"].items()}, strategy)
    ev = state.numa.evaluate(pod)
    got = {name: ev.result(name)[1] for name in case["nodes"]}
    expect = case["expect"]["scores"]
    return Outcome.ok() if got == expect else Outcome.fail(expect, got, "expect.scores")

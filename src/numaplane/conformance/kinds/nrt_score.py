"""Conformance kind ``nrt-score``: the NodeResourceTopologyMatch Score (SCHEMA.md §4.7).

The one production path: the scheduler state (passthrough cache, fresh data) scores all the case's
nodes at once with its vectorised NUMA arrays (every node, feasible or not); ``expect.scores`` is
compared exactly. (The per-node reference function is checked against the same cases in ``tests/``.)
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.conformance.production import scheduler_state
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import parse_pod


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    strategy = ScoringStrategy.from_dict(case["strategy"])
    pod = parse_pod(case["pod"])
    state = scheduler_state({name: (e.get("nrt"), e.get("node")) for name, e in case["nodes"].items()}, strategy)
    verdicts = state.cycle.verdicts(pod)
    got = {name: int(verdicts.scores[verdicts.index[name]]) for name in case["nodes"]}
    expect = case["expect"]["scores"]
    return Outcome.ok() if got == expect else Outcome.fail(expect, got, "expect.scores")

"""Kind ``topology-helpers``: the hint merger's ``maxOfMinAffinityCounts`` and ``compare``."""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.policy.hint_merge import HintMerger, max_of_min_affinity_counts
from numaplane.policy.hints import TopologyHint


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    helper = case.get("helper")
    expect = case["expect"]
    if helper == "max_of_min_affinity_counts":
        lists = [[TopologyHint.from_dict(h) for h in hints] for hints in case["hint_lists"]]
        got: Any = max_of_min_affinity_counts(lists)
    elif helper == "compare_narrowest":
        # best-effort policy, default options, empty NUMA info: narrowest comparison, no default mask
        merger = HintMerger(0)
        current = None if case["current"] is None else TopologyHint.from_dict(case["current"])
        candidate = TopologyHint.from_dict(case["candidate"])
        winner = merger.compare(current, candidate, int(case["best_non_preferred_affinity_count"]))
        got = "candidate" if winner is candidate else "current"
    else:
        return Outcome.fail("a known helper", helper, "helper")
    return Outcome.ok() if got == expect else Outcome.fail(expect, got)

"""Conformance kind ``nrt-filter``: the NodeResourceTopologyMatch Filter (SCHEMA.md §4.6).

The one production path: the scheduler state (passthrough cache, fresh data) takes the decision with
its vectorised NUMA arrays, as the extender and the standalone scheduler do; a rejection's reason and
code are the ones production reports. ``reason`` is compared by prefix and ``code`` exactly. (The
per-node reference function is checked against the same cases in ``tests/``.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.conformance.production import scheduler_state
from numaplane.placement.model.result import Fit, Reject
from numaplane.resources.pod import parse_pod

_NODE = "node0"


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    pod = parse_pod(case["pod"])
    state = scheduler_state({_NODE: (case.get("nrt"), case["node"])})
    ev = state.evaluate(pod, [_NODE], mark=False)
    if _NODE in ev.scores:
        return compare(case["expect"], Fit())
    verdict = ev.reject(_NODE)
    if isinstance(verdict, Fit):  # the decision is the pipeline's: its explanation must agree
        return Outcome.fail(case["expect"], "pipeline rejects, its explanation fits", "explanation")
    return compare(case["expect"], replace(verdict, reason=ev.reason(_NODE)))  # the reason production reports


def compare(expect: dict[str, Any], verdict: Fit | Reject) -> Outcome:
    """The outcome of ``verdict`` against a case's ``expect`` (module docstring)."""
    if isinstance(verdict, Fit):
        got: dict[str, Any] = {"fit": True}
        return Outcome.ok() if expect == got else Outcome.fail(expect, got)
    got = {"fit": False, "code": verdict.code, "reason": verdict.reason, "explain": verdict.explain()}
    if (
        expect.get("fit") is False
        and verdict.code == expect.get("code")
        and verdict.reason.startswith(expect["reason"])
    ):
        return Outcome.ok()
    return Outcome.fail(expect, got)

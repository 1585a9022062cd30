"""Conformance kind ``nrt-filter``: the NodeResourceTopologyMatch Filter (SCHEMA.md §4.6).

The case's NRT is handed to :func:`numaplane.placement.filter.filter` as fresh data (Passthrough cache).
``reason`` is compared by prefix and ``code`` exactly. :func:`run_production` takes the decision with
the scheduler state's vectorised pipeline instead (the explanation of a rejection is the per-node one,
as in production).
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.conformance.production import scheduler_state
from numaplane.placement.filter import filter as nrt_filter
from numaplane.placement.result import Fit, Reject
from numaplane.resources.pod import parse_pod

_NODE = "node0"


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    verdict = nrt_filter(parse_pod(case["pod"]), case.get("nrt"), case["node"])
    return _compare(case["expect"], verdict)


def run_production(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    pod = parse_pod(case["pod"])
    state = scheduler_state({_NODE: (case.get("nrt"), case["node"])})
    ev = state.evaluate(pod, [_NODE], mark=False)
    verdict: Fit | Reject = Fit() if _NODE in ev.scores else ev.reject(_NODE)
    if isinstance(verdict, Fit) and _NODE not in ev.scores:
        return Outcome.fail(case["expect"], "pipeline rejects, per-node filter fits", "production")
    return _compare(case["expect"], verdict)


def _compare(expect: dict[str, Any], verdict: Fit | Reject) -> Outcome:
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

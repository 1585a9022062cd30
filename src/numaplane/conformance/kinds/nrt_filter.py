"""Conformance kind ``nrt-filter``: the NodeResourceTopologyMatch Filter (SCHEMA.md §4.6).

The case's NRT is handed to :func:`numaplane.placement.filter.filter` as fresh data (Passthrough cache).
``reason`` is compared by prefix and ``code`` exactly.
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.placement.filter import filter as nrt_filter
from numaplane.placement.result import Fit
from numaplane.resources.pod import parse_pod


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    expect = case["expect"]
    verdict = nrt_filter(parse_pod(case["pod"]), case.get("nrt"), case["node"])
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

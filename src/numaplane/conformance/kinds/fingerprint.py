"""Conformance kind ``fingerprint`` (SCHEMA.md §4.9): compute and check the pod-set fingerprint."""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.nrt.fingerprint import check_fingerprint, compute_fingerprint


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    pods = [(str(p["namespace"]), str(p["name"])) for p in case["pods"]]
    op = case["op"]
    if op == "compute":
        got = compute_fingerprint(pods)
        return Outcome.ok() if got == case["expect"] else Outcome.fail(case["expect"], got)
    if op == "check":
        outcome = check_fingerprint(str(case["signature"]), pods)
        expected = case["expect"]["check"]
        return Outcome.ok() if outcome == expected else Outcome.fail(expected, outcome, "expect.check")
    return Outcome.fail("op compute or check", op, "op")

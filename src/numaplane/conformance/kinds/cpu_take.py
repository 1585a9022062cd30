"""Conformance kind ``cpu-take`` (SCHEMA.md §4.1): ``takeByTopologyNUMAPacked`` / ``...Distributed``."""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.policy.cpu_assignment import index_for, take_distributed, take_packed
from numaplane.policy.errors import UnexpectedAdmissionError
from numaplane.topology.cpuset import CPUSet


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    idx = index_for(ctx.topology(str(case["topology"])))
    available = CPUSet.parse(str(case["available"])).mask
    request = int(case["request"])
    opts = case.get("options") or {}
    spread = opts.get("strategy", "packed") == "spread"
    expect = case["expect"]
    try:
        if opts.get("distribute_across_numa"):
            got = take_distributed(idx, available, request, int(opts.get("cpu_group_size", 1)), spread=spread)
        else:
            got = take_packed(idx, available, request, spread=spread, uncore=bool(opts.get("align_by_uncore_cache")))
    except UnexpectedAdmissionError as exc:
        if "error" in expect and str(exc) == expect["error"]:
            return Outcome.ok()
        return Outcome.fail(expect, {"error": str(exc)})
    if "cpus" in expect and CPUSet.parse(expect["cpus"]).mask == got:
        return Outcome.ok()
    return Outcome.fail(expect, {"cpus": CPUSet.from_mask(got).format()})

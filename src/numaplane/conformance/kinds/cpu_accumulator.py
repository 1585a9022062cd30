"""Conformance kind ``cpu-accumulator`` (SCHEMA.md §4.10): the accumulator's free lists and CPU order."""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.policy.cpu_assignment import Accumulator, index_for
from numaplane.topology.cpuset import CPUSet


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    idx = index_for(ctx.topology(str(case["topology"])))
    acc = Accumulator(idx, CPUSet.parse(str(case["available"])).mask, 0)
    queries = {
        "free_sockets": acc.free_sockets,
        "free_numa_nodes": acc.free_numas,
        "free_cores": acc.free_cores,
        "free_cpus": acc.cpu_order,
    }
    query = queries.get(str(case["query"]))
    if query is None:
        return Outcome.fail(sorted(queries), case["query"], "query")
    got = query()
    expect = list(case["expect"])
    same = sorted(got) == sorted(expect) if case.get("compare") == "set" else got == expect
    return Outcome.ok() if same else Outcome.fail(expect, got)

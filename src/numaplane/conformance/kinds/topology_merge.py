"""Kind ``topology-merge``: Topology Manager construction, ``Merge`` and the admission verdict."""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.hints import TopologyHint
from numaplane.policy.topology_manager import ProviderHints, TopologyManager


def parse_providers(doc: list[Any]) -> list[ProviderHints]:
    """SCHEMA §4.4 providers: ``null`` = nil map, ``{}`` = empty map, ``{"r": null | [] | [hints]}``."""
    out: list[ProviderHints] = []
    for provider in doc:
        if provider is None:
            out.append(None)
            continue
        out.append(
            {
                str(resource): None if hints is None else [TopologyHint.from_dict(h) for h in hints]
                for resource, hints in provider.items()
            }
        )
    return out


def parse_distances(doc: dict[str, Any] | None) -> dict[int, dict[int, int]]:
    return {int(a): {int(b): int(d) for b, d in row.items()} for a, row in (doc or {}).items()}


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    expect = case["expect"]
    try:
        manager = TopologyManager(
            case["policy"],
            case["scope"],
            {str(k): str(v) for k, v in (case.get("options") or {}).items()},
            case["numa_nodes"],
            parse_distances(case.get("distances")),
        )
    except PolicyConfigError as exc:
        if "error_contains" in expect and expect["error_contains"] in str(exc):
            return Outcome.ok()
        return Outcome.fail(expect, {"error": str(exc)}, "construct")
    if "error_contains" in expect:
        return Outcome.fail(expect, "constructed without error", "construct")
    hint, admit = manager.merge(parse_providers(case["providers"]))
    got: dict[str, Any] = {"admit": admit}
    if "hint" in expect:
        got["hint"] = hint.to_dict()
    return Outcome.ok() if got == expect else Outcome.fail(expect, got)

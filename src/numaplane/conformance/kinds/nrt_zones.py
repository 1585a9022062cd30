"""Conformance kind ``nrt-zones`` (SCHEMA.md §4.8): the exporter's per-NUMA-zone resources.

Zones and resources are compared as sets keyed by name, quantities by value; zone attributes are not
part of the expectation. :func:`run_production` runs one exporter scan over the case's responses.
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.conformance.production import scan_zones
from numaplane.nrt.zones import zones_from_dicts
from numaplane.resources.quantity import parse_quantity


def _normal(zones: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for zone in zones:
        out[zone["name"]] = {
            "type": zone.get("type"),
            "costs": {c["name"]: c["value"] for c in zone.get("costs", [])},
            "resources": {
                r["name"]: tuple(parse_quantity(r[k]).amount for k in ("capacity", "allocatable", "available"))
                for r in zone.get("resources", [])
            },
        }
    return out


def run(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    zones = zones_from_dicts(
        str(case["node_name"]), case["machine"], case["allocatable"], case["list"], case.get("config")
    )
    return _compare(case, [z.to_dict() for z in zones])


def run_production(case: dict[str, Any], ctx: CaseContext) -> Outcome:
    zones = scan_zones(str(case["node_name"]), case["machine"], case["allocatable"], case["list"], case.get("config"))
    return _compare(case, [z.to_dict() for z in zones])


def _compare(case: dict[str, Any], got: list[dict[str, Any]]) -> Outcome:
    expected = case["expect"]["zones"]
    if _normal(got) == _normal(expected):
        return Outcome.ok()
    return Outcome.fail(expected, got, "expect.zones")

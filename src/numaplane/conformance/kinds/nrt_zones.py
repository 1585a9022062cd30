"""Conformance kind ``nrt-zones`` (SCHEMA.md §4.8): the exporter's per-NUMA-zone resources.

The one production path: one exporter scan over the case's PodResources and sysfs responses.
Zones and resources are compared as sets keyed by name, quantities by value; zone attributes are not
part of the expectation. (The plain :func:`~numaplane.nrt.zones.zones_from_dicts` is checked against
the same cases in ``tests/``.)
"""

from __future__ import annotations

from typing import Any

from numaplane.conformance.outcome import CaseContext, Outcome
from numaplane.conformance.production import scan_zones
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
    zones = scan_zones(str(case["node_name"]), case["machine"], case["allocatable"], case["list"], case.get("config"))
    return compare(case, [z.to_dict() for z in zones])


def compare(case: dict[str, Any], got: list[dict[str, Any]]) -> Outcome:
    """The outcome of the zones ``got`` (``Zone.to_dict`` documents) against the case's expectation."""
    expected = case["expect"]["zones"]
    if _normal(got) == _normal(expected):
        return Outcome.ok()
    return Outcome.fail(expected, got, "expect.zones")

"""The what-if report: one JSON/YAML-ready document and a rich table view of it.

Document shape (``numaplane simulate --from ... -o json``)::

    {"apiVersion": "numaplane.io/v1", "kind": "WhatIfReport",
     "snapshot": {nodes, nodesModelledFromNRT, boundPods, pendingPods, podsOnUnknownNodes, ...},
     "baseline": {"readmitted": N, "notReadmitted": [{pod, node, reason}],
                  "matchesNRT": bool, "nrtMismatches": {node: [text]}, "modelNotes": {node: [text]}},
     "headroomBefore": {resource: total available over every NUMA zone},
     "schedulers": [{"scheduler", "nowFailingAtNode": [{pod, node, reason}],
                     "pendingNowPlaced": [{pod, node}], "pendingStillPending": [pod],
                     "addedWorkload": {pods, placed, rejected, pending, rejectedAtNode: {reason: attempts}},
                     "addedPods": [{pod, outcome: placed|rejected|pending, node?, rejections: [{node, reason}]}],
                     "pendingPods": [the same for the snapshot's pending pods],
                     "rejectedAtNode": {reason: attempts, pending and added pods together},
                     "headroomAfter": {resource: total},
                     "zonesChanged": {node: {zone: {resource: [before, after]}}}}]}

Units: CPUs and devices are counts, memory and hugepages bytes.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from numaplane.sim.whatif import WhatIfResult, Zones

__all__ = ["render_whatif", "whatif_document"]


def _totals(per_node: dict[str, Zones]) -> dict[str, int]:
    out: dict[str, int] = {}
    for zones in per_node.values():
        for rows in zones.values():
            for res, amount in rows.items():
                out[res] = out.get(res, 0) + amount
    return dict(sorted(out.items()))


def _changed(before: dict[str, Zones], after: dict[str, Zones]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node, zones in sorted(after.items()):
        old = before.get(node, {})
        for zone, rows in sorted(zones.items()):
            for res, amount in sorted(rows.items()):
                was = old.get(zone, {}).get(res)
                if was != amount:
                    out.setdefault(node, {}).setdefault(zone, {})[res] = [was, amount]
    return out


def whatif_document(result: WhatIfResult, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report as plain data (see the module docstring)."""
    cluster = result.cluster
    before = {name: o.zones for name, o in result.baseline.items() if o.zones}
    not_readmitted = [
        {"pod": key, "node": node, "reason": reason}
        for node, outcome in result.baseline.items()
        for key, reason in outcome.refused
    ]
    bound = sum(len(p) for p in cluster.bound.values())
    doc: dict[str, Any] = {
        "apiVersion": "numaplane.io/v1",
        "kind": "WhatIfReport",
        "snapshot": {
            **(meta or {}),
            "nodes": len(cluster.nodes),
            "nodesModelledFromNRT": sum(1 for n in cluster.nodes if n.source == "nrt"),
            "boundPods": bound,
            "pendingPods": len(cluster.pending),
            "podsOnUnknownNodes": [p.key for p in cluster.unknown_node],
            "nodesSkipped": dict(cluster.skipped),
            "podsOnSkippedNodes": [p.key for p in cluster.on_skipped],
        },
        "baseline": {
            "readmitted": bound - len(not_readmitted),
            "notReadmitted": not_readmitted,
            "nodesComparedWithNRT": cluster.nodes_compared_with_nrt,
            # null when no node was compared: nothing matched or differed
            "matchesNRT": None if not cluster.nodes_compared_with_nrt else not result.nrt_mismatches,
            "nrtMismatches": result.nrt_mismatches,
            "modelNotes": cluster.model_notes,
        },
        "headroomBefore": _totals(before),
        "schedulers": [],
    }
    for outcome in result.outcomes:
        doc["schedulers"].append(
            {
                "scheduler": outcome.scheduler,
                "nowFailingAtNode": outcome.now_failing,
                "pendingNowPlaced": outcome.pending_placed,
                "pendingStillPending": outcome.pending_still,
                "addedWorkload": outcome.workload,
                "addedPods": outcome.added,
                "pendingPods": outcome.pending,
                "rejectedAtNode": dict(sorted(outcome.result.rejections.items())),
                "headroomAfter": _totals(outcome.zones),
                "zonesChanged": _changed(before, outcome.zones),
            }
        )
    return doc


def _amount(resource: str, value: int | None) -> str:
    if value is None:
        return "-"
    if resource == "memory" or resource.startswith("hugepages-"):
        return f"{value / (1 << 30):.1f} GiB"
    return str(value)


def render_whatif(doc: dict[str, Any], out: Console, *, limit: int = 20) -> None:
    """Tables: the snapshot and baseline, headroom before/after, then each scheduler's changes."""
    snap, base = doc["snapshot"], doc["baseline"]
    out.print(
        f"snapshot: {snap['nodes']} nodes ({snap['nodesModelledFromNRT']} from NRT), "
        f"{snap['boundPods']} bound pods, {snap['pendingPods']} pending"
    )
    compared = base["nodesComparedWithNRT"]
    if not compared:
        verdict = "per-zone availability not compared: no node is modelled from a usable NRT object"
    elif base["matchesNRT"]:
        verdict = f"per-zone availability matches the NRT objects on all {compared} node(s) compared"
    else:
        verdict = (
            f"per-zone availability DIFFERS from the NRT objects on {len(base['nrtMismatches'])} of {compared} node(s)"
        )
    out.print(f"baseline: {base['readmitted']} pods re-admitted, {len(base['notReadmitted'])} not; {verdict}")
    for node, reason in list(snap["nodesSkipped"].items())[:limit]:
        out.print(f"  node {node} skipped (cannot be modelled): {reason}")
    if snap["podsOnSkippedNodes"]:
        out.print(f"  {len(snap['podsOnSkippedNodes'])} pods are bound to skipped nodes (not simulated)")
    for item in base["notReadmitted"][:limit]:
        out.print(f"  not re-admitted: {item['pod']} on {item['node']}: {item['reason']}")
    for node, lines in list(base["nrtMismatches"].items())[:limit]:
        out.print(f"  {node}: " + "; ".join(lines[:3]) + (" ..." if len(lines) > 3 else ""))
    for node, lines in list(base["modelNotes"].items())[:limit]:
        out.print(f"  model of {node}: " + "; ".join(lines[:3]))
    if snap["podsOnUnknownNodes"]:
        out.print(f"  {len(snap['podsOnUnknownNodes'])} pods are bound to nodes the snapshot lacks (not simulated)")
    headroom = Table(title="Per-zone headroom (sum over NUMA zones)")
    headroom.add_column("resource")
    headroom.add_column("before", justify="right")
    for s in doc["schedulers"]:
        headroom.add_column(f"after: {s['scheduler']}", justify="right")
    resources = sorted(set(doc["headroomBefore"]).union(*(s["headroomAfter"] for s in doc["schedulers"])))
    for res in resources:
        row = [res, _amount(res, doc["headroomBefore"].get(res))]
        row += [_amount(res, s["headroomAfter"].get(res)) for s in doc["schedulers"]]
        headroom.add_row(*row)
    out.print(headroom)
    summary = Table(title="What changes")
    columns = (
        "scheduler",
        "now failing at node",
        "pending now placed",
        "still pending",
        "added placed",
        "added rejected",
        "added pending",
        "rejected at node",
    )
    for column in columns:
        summary.add_column(column, justify="left" if column in ("scheduler", "rejected at node") else "right")
    for s in doc["schedulers"]:
        added = s["addedWorkload"]
        summary.add_row(
            s["scheduler"],
            str(len(s["nowFailingAtNode"])),
            str(len(s["pendingNowPlaced"])),
            str(len(s["pendingStillPending"])),
            f"{added['placed']}/{added['pods']}",
            f"{added['rejected']}/{added['pods']}",
            f"{added['pending']}/{added['pods']}",
            _reasons(s["rejectedAtNode"]),
        )
    out.print(summary)
    out.print(
        "added rejected: the node refused it on every attempt; added pending: no node fits; "
        "rejected at node: attempts, pending and added pods"
    )
    for s in doc["schedulers"]:
        name = s["scheduler"]
        for item in s["nowFailingAtNode"][:limit]:
            out.print(f"  {name}: would now fail: {item['pod']} on {item['node']}: {item['reason']}")
        for item in s["pendingNowPlaced"][:limit]:
            out.print(f"  {name}: pending pod {item['pod']} would fit on {item['node']}")
        still = [item for item in s["pendingPods"] if item["outcome"] != "placed"]
        for item in still[:limit]:
            out.print(f"  {name}: pending pod {item['pod']} not placed: {_where(item)}")
        for item in s["addedPods"][:limit]:
            out.print(f"  {name}: added pod {item['pod']}: {_where(item)}")
        if len(s["addedPods"]) > limit:
            out.print(f"  {name}: ... {len(s['addedPods']) - limit} more added pods (-o json lists every one)")


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} ×{n}" for reason, n in counts.items()) or "-"


def _where(item: dict[str, Any]) -> str:
    """Where one added pod went, with the node rejections on its way."""
    counts: dict[str, int] = {}
    for rejection in item["rejections"]:
        key = f"{rejection['reason']} on {rejection['node']}"
        counts[key] = counts.get(key, 0) + 1
    rejected = _reasons(counts)
    if item["outcome"] == "placed":
        return f"placed on {item['node']}" + (f" (after rejections: {rejected})" if counts else "")
    if item["outcome"] == "rejected":
        return f"rejected at node: {rejected}"
    return "pending: no node fits"

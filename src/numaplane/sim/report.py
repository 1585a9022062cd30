"""Simulation output: a rich comparison table, a JSON document and an HTML report with PNG plots.

The HTML report (``--report DIR``) is one self-contained ``index.html`` next to its PNG files:
admission failures over time per scheduler, pending pods over time, a CPU utilisation heat map per
NUMA zone for every scheduler, and a strategy comparison. Plots use matplotlib's Agg backend with
fixed metadata, so the same run writes the same files.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from numaplane.sim.spec import RunResult

__all__ = ["legend", "render_table", "summary_document", "verdict", "write_report"]

BASELINE = "default"

#: column -> what it counts, in plain words (printed under the table)
COLUMNS: dict[str, str] = {
    "placed": "pods a node admitted, of all pods in the workload",
    "rejected at node": "bindings the node refused at admission (the kubelet's error, e.g. TopologyAffinityError: "
    "the node could not put the pod's CPUs and memory on one NUMA zone); the pod is deleted and recreated",
    "failed": "pods lost for good: rejected again after 3 recreations",
    "pending": "pods still waiting for a node at the end: a NUMA-aware scheduler holds a pod that fits no zone "
    "instead of sending it to a node that would reject it",
    "NUMA-aligned": "share of exclusive-CPU pods whose resources sit on one NUMA node",
    "CPU util": "share of the cluster's CPUs requested by running pods, averaged over the run",
    "fragmentation": "share of free exclusive CPUs stranded in NUMA zones too small for a typical Guaranteed pod",
    "attempts": "scheduling cycles run (the scheduler's work, retries included)",
}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def summary_document(results: Sequence[RunResult], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON form of a simulation: inputs (``meta``), the verdict and one entry per scheduler."""
    return {
        "apiVersion": "numaplane.io/v1",
        "kind": "SimulationReport",
        "inputs": dict(meta),
        "verdict": verdict(results, policy=_policy_of(meta)),
        "schedulers": [r.to_dict() for r in results],
    }


def _policy_of(meta: Mapping[str, Any]) -> str | None:
    """The nodes' topology manager policy from a run's inputs (``"policy / scope"``), if given."""
    return str(meta.get("topologyManager", "")).split(" / ")[0] or None


def _reasons(r: RunResult) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(r.rejections.items(), key=lambda kv: -kv[1]))


def _cause(r: RunResult, policy: str | None) -> str:
    """Why a NUMA-aware scheduler still had rejections, from the run's own facts: how many were
    ``InvalidPreference``, how many were of pods the NUMA filter did not judge on that node
    (:attr:`RunResult.unfiltered`: neither the node's nor the pod's own policy is single-numa-node), and
    the rest, which the filter judged on a view of the node that was no longer true. ``policy``: the
    nodes' topology manager policy when the caller knows it (named in the sentence), else ``None``."""
    invalid = r.rejections.get("InvalidPreference", 0)
    unfiltered = min(r.unfiltered, r.rejected - invalid)
    judged = r.rejected - invalid - unfiltered
    parts = []
    if invalid:
        parts.append(
            f"{invalid} were InvalidPreference, the pods' numaplane.io/ annotations are invalid, no node admits them "
            "(`numaplane admit` prints the annotation's message)"
        )
    if unfiltered:
        where = f"the nodes' topology manager policy is {policy!r}" if policy else "the nodes' topology manager policy"
        parts.append(
            f"{unfiltered} were of pods the NUMA filter does not judge ({where}, not single-numa-node, and the pods "
            "ask no stricter numaplane.io/topology-policy: upstream's filter passes every node), so no NUMA-aware "
            "scheduler can foresee them"
        )
    if judged:
        parts.append(
            f"{judged} were of pods the NUMA filter judged on a view of the node that was no longer true "
            "(NRT refresh period; the over-reserve cache accounts the pods it sent since)"
        )
    return "; ".join(parts)


def verdict(results: Sequence[RunResult], policy: str | None = None) -> str:
    """What the comparison shows, in one plain-words paragraph (the first thing a user reads).

    ``policy`` is the nodes' topology manager policy when the caller knows it (the cause of a NUMA-aware
    scheduler's rejections depends on whether the NUMA filter applies)."""
    if not results:
        return "No scheduler ran."
    pods = results[0].pods
    base = next((r for r in results if r.scheduler == BASELINE), None)
    others = [r for r in results if r is not base] or list(results)
    best = min(others, key=lambda r: (r.rejected + r.failed, r.failed, r.pending, -r.placed))
    held = _held_invalid(others if base is not None else results, results)
    if all(r.rejected == 0 for r in results):
        placed = sorted({r.placed for r in results})
        spread = f"{placed[0]}" if len(placed) == 1 else f"{placed[0]}–{placed[-1]}"
        if held:
            return f"No pod was rejected at a node under any scheduler, and {spread} of {pods} pods were placed. {held}"
        return (
            f"No pod was rejected at a node under any scheduler, and {spread} of {pods} pods were placed: on this "
            "cluster and workload NUMA-aware scheduling makes no difference to admission. Try a tighter cluster "
            "(fewer --nodes), more pods, or a workload of large Guaranteed pods."
        )
    parts = []
    if base is not None and base.rejected:
        parts.append(
            "The default scheduler (blind to NUMA zones) sent pods to nodes that "
            + (
                "refuse them"
                if set(base.rejections) == {"InvalidPreference"}
                else "could not align them"
                if set(base.rejections) == {"TopologyAffinityError"}
                else "refused them"
            )
            + ": the nodes "
            f"rejected {base.rejected} bindings ({_reasons(base)}) and {base.failed} of {pods} pods were lost for "
            f"good after 3 recreations."
        )
    elif base is not None:
        parts.append(f"The default scheduler had no pod rejected at a node ({base.placed} of {pods} placed).")
    if best is base:  # only the default scheduler ran: nothing to compare it with
        parts.append("Add a NUMA-aware scheduler (--schedulers default,numa:LeastAllocated:overreserve) to compare.")
        return " ".join(parts)
    clean = [r.scheduler for r in others if r.rejected == 0]
    if best.rejected == 0:
        parts.append(
            f"{best.scheduler} placed {best.placed} of {pods} with no rejection at all"
            + (f", as did {len(clean) - 1} other NUMA-aware scheduler(s)." if len(clean) > 1 else ".")
        )
    else:
        parts.append(
            f"The best NUMA-aware scheduler, {best.scheduler}, still had {best.rejected} rejections "
            f"({_reasons(best)}) and {best.failed} pods lost: {_cause(best, policy)}."
        )
    troubled = [r for r in others if r is not best and (r.rejected or r.failed)]
    if troubled:
        parts.append(
            "NUMA-aware scheduler(s) with rejections or lost pods: "
            + ", ".join(f"{r.scheduler} ({r.rejected} rejected{_breakdown(r)}, {r.failed} lost)" for r in troubled)
            + "."
        )
    if base is not None:
        diff = best.placed - base.placed
        fit_none = best.pending - best.pending_invalid
        waiting = f"{fit_none} wait pending for a node that fits them" + (
            f" (and {best.pending_invalid} whose preferences no node admits, below)" if best.pending_invalid else ""
        )
        refused_only = set(base.rejections) == {"InvalidPreference"}
        gain = (
            "no pod is sent to a node that refuses it"
            if refused_only
            else "pods that start where they can be aligned instead of failing at a node, not density"
        )
        if abs(diff) * 100 <= pods:
            parts.append(
                f"Placed counts are within 1% ({best.placed} vs {base.placed}): the gain is {gain}; {waiting} "
                f"(vs {base.pending} pending with default)."
            )
        else:
            parts.append(
                f"{best.scheduler} placed {abs(diff)} {'more' if diff > 0 else 'fewer'} pods than default "
                f"({best.placed} vs {base.placed}); {waiting} (vs {base.pending} pending with default)."
            )
    if held:
        parts.append(held)
    invalid = next((r.messages["InvalidPreference"] for r in results if "InvalidPreference" in r.messages), None)
    if invalid is not None and not held:
        parts.append(f"Invalid pod preference (the node's message): {invalid}.")
    return " ".join(parts)


def _breakdown(r: RunResult) -> str:
    """The causes of ``r``'s rejections in a few words (``""`` when all share the one reason given)."""
    invalid = r.rejections.get("InvalidPreference", 0)
    unfiltered = min(r.unfiltered, r.rejected - invalid)
    judged = r.rejected - invalid - unfiltered
    words = [
        f"{n} {what}"
        for n, what in (
            (judged, "judged on a stale view"),
            (unfiltered, "not judged by the NUMA filter"),
            (invalid, "InvalidPreference"),
        )
        if n
    ]
    return ": " + ", ".join(words) if words else ""


def _held_invalid(aware: Sequence[RunResult], results: Sequence[RunResult]) -> str:
    """The sentence on pods the NUMA-aware schedulers hold pending because no node admits their
    preferences, with the node's message (``""`` when there are none)."""
    held = max((r.pending_invalid for r in aware), default=0)
    if not held:
        return ""
    message = next((r.messages["InvalidPreference"] for r in results if "InvalidPreference" in r.messages), "")
    return (
        f"{held} pod(s) wait pending under the NUMA-aware scheduler(s) because every node refuses their "
        f"numaplane.io/ preferences (the filter rejects them on every node); the node's message: {message}."
    )


def _constant(values: Sequence[str]) -> bool:
    return len(set(values)) <= 1


def legend(results: Sequence[RunResult], shown: Sequence[str], dropped: Mapping[str, str]) -> list[str]:
    """One line per shown column, then one per dropped column saying why it is not shown."""
    lines = [f"{name}: {COLUMNS[name]}" for name in shown if name in COLUMNS]
    lines += [f"not shown: {name} is {value} for every scheduler" for name, value in dropped.items()]
    return lines


def render_table(
    results: Sequence[RunResult], console: Console, title: str = "numaplane simulation", policy: str | None = None
) -> None:
    """Print the verdict, the comparison table (one row per scheduler, columns that differ) and a legend.

    ``policy``: the nodes' topology manager policy, for the verdict's cause (:func:`verdict`)."""
    from rich.markup import escape
    from rich.padding import Padding

    console.print(Padding(f"[bold]Verdict.[/] {escape(verdict(results, policy))}", (0, 0, 1, 0)))
    best_rejected = min((r.rejected for r in results), default=0)
    cells: dict[str, list[str]] = {
        "placed": [f"{r.placed}/{r.pods}" for r in results],
        "rejected at node": [
            (f"[green]{r.rejected}[/]" if r.rejected == best_rejected else f"[red]{r.rejected}[/]")
            + (f" ({escape(_reasons(r))})" if r.rejections else "")
            for r in results
        ],
        "failed": [str(r.failed) for r in results],
        "pending": [str(r.pending) for r in results],
        "NUMA-aligned": [_pct(r.aligned_share) for r in results],
        "CPU util": [_pct(r.cpu_utilisation) for r in results],
        "fragmentation": [_pct(r.fragmentation) for r in results],
        "attempts": [str(r.attempts) for r in results],
    }
    dropped = {
        name: values[0]
        for name, values in cells.items()
        if name in ("NUMA-aligned", "failed") and len(results) > 1 and _constant(values)
    }
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("scheduler", no_wrap=True)
    shown = [name for name in cells if name not in dropped]
    for name in shown:
        table.add_column(name, justify="left" if name == "rejected at node" else "right")
    for i, r in enumerate(results):
        table.add_row(escape(r.scheduler), *(cells[name][i] for name in shown))
    console.print(table)
    for line in legend(results, shown, dropped):
        console.print(f"[dim]{escape(line)}[/]")


def _plots(results: Sequence[RunResult], out: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "font.size": 10, "svg.hashsalt": "numaplane"})
    meta = {"Software": None}
    files: list[tuple[str, str]] = []

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in results:
        ax.plot(r.times, r.rejections_over_time, label=r.scheduler, linewidth=1.8)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("pods rejected at the node (cumulative)")
    ax.set_title("Admission failures over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "admission_failures.png", metadata=meta)
    plt.close(fig)
    files.append(("admission_failures.png", "Pods rejected by the node's resource manager, cumulative, per scheduler"))

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in results:
        ax.plot(r.times, r.pending_over_time, label=r.scheduler, linewidth=1.5)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("pending pods")
    ax.set_title("Pods waiting for a node")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "pending.png", metadata=meta)
    plt.close(fig)
    files.append(("pending.png", "Pods in the scheduling queue over time"))

    names = [r.scheduler for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    x = range(len(results))
    width = 0.2
    series: list[tuple[str, list[int], str]] = [
        ("placed", [r.placed for r in results], "#4c9a2a"),
        ("rejected at node", [r.rejected for r in results], "#c0392b"),
        ("pending at end", [r.pending for r in results], "#e67e22"),
        ("failed", [r.failed for r in results], "#7f8c8d"),
    ]
    for k, (label, values, color) in enumerate(series):
        axes[0].bar([i + (k - 1.5) * width for i in x], values, width, label=label, color=color)
    axes[0].set_xticks(list(x))
    axes[0].set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    axes[0].set_ylabel("pods")
    axes[0].set_title("Outcome per scheduler")
    axes[0].set_ylim(0, 1.25 * max([1] + [max(v) for _, v, _ in series if v]))
    axes[0].legend(fontsize=8, ncol=2, loc="upper center")
    axes[0].grid(axis="y", alpha=0.3)
    metrics: list[tuple[str, list[float], str]] = [
        ("NUMA-aligned", [r.aligned_share for r in results], "#2980b9"),
        ("CPU utilisation", [r.cpu_utilisation for r in results], "#8e44ad"),
        ("fragmentation", [r.fragmentation for r in results], "#d35400"),
    ]
    for k, (label, shares, color) in enumerate(metrics):
        axes[1].bar([i + (k - 1) * 0.25 for i in x], [100 * v for v in shares], 0.25, label=label, color=color)
    axes[1].set_xticks(list(x))
    axes[1].set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    axes[1].set_ylabel("%")
    axes[1].set_ylim(0, 125)
    axes[1].set_title("Quality per scheduler")
    axes[1].legend(fontsize=8, ncol=3, loc="upper center")
    axes[1].grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "strategies.png", metadata=meta)
    plt.close(fig)
    files.append(("strategies.png", "Strategy comparison: outcomes and quality"))

    shown = [r for r in results if r.zone_utilisation]
    if shown:
        cols = min(3, len(shown))
        rows = (len(shown) + cols - 1) // cols
        node_count = max(len(r.zone_utilisation) for r in shown)
        height = max(3.0, min(0.16 * node_count + 1.2, 9.0))
        fig, axes_grid = plt.subplots(rows, cols, figsize=(4.2 * cols, height * rows), squeeze=False)
        image = None
        for idx, r in enumerate(shown):
            ax = axes_grid[idx // cols][idx % cols]
            width_z = max(len(v) for v in r.zone_utilisation.values())
            grid = [v + [float("nan")] * (width_z - len(v)) for v in r.zone_utilisation.values()]
            image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(r.scheduler, fontsize=9)
            ax.set_xlabel("NUMA zone")
            ax.set_xticks(range(width_z))
            labels = list(r.zone_utilisation)
            step = max(1, len(labels) // 24)
            ax.set_yticks(range(0, len(labels), step))
            if idx % cols == 0:
                ax.set_yticklabels(labels[::step], fontsize=6)
            else:
                ax.set_yticklabels([])
        for idx in range(len(shown), rows * cols):
            axes_grid[idx // cols][idx % cols].axis("off")
        if image is not None:
            fig.colorbar(image, ax=axes_grid, shrink=0.8, label="exclusive CPUs in use (time average)")
        fig.suptitle("CPU utilisation per NUMA zone (time average)")
        fig.savefig(out / "zone_heatmap.png", metadata=meta, bbox_inches="tight")
        plt.close(fig)
        files.append(("zone_heatmap.png", "Exclusive CPU use per node and NUMA zone, averaged over the run"))
    return files


def write_report(results: Sequence[RunResult], meta: Mapping[str, Any], out: Path) -> Path:
    """Write ``index.html`` and its PNG plots into ``out``; return the HTML path."""
    out.mkdir(parents=True, exist_ok=True)
    plots = _plots(results, out)
    rows = []
    for r in results:
        reasons = ", ".join(f"{html.escape(k)} {v}" for k, v in sorted(r.rejections.items())) or "–"
        rows.append(
            "<tr>"
            f"<td>{html.escape(r.scheduler)}</td><td>{r.placed}/{r.pods}</td><td>{r.rejected}</td><td>{reasons}</td>"
            f"<td>{r.failed}</td><td>{r.pending}</td><td>{_pct(r.aligned_share)}</td>"
            f"<td>{_pct(r.cpu_utilisation)}</td><td>{_pct(r.fragmentation)}</td><td>{r.attempts}</td>"
            f"<td>{r.wall_seconds:.2f}</td></tr>"
        )
    inputs = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in meta.items())
    figures = "".join(
        f'<figure><img src="{name}" alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption></figure>'
        for name, caption in plots
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>numaplane simulation report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; font-size: 0.92rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.35rem 0.6rem; text-align: right; }}
td:first-child, th {{ text-align: left; }}
thead th {{ background: #f3f3f3; }}
figure {{ margin: 2rem 0; }} img {{ max-width: 100%; border: 1px solid #eee; }}
figcaption {{ color: #555; font-size: 0.9rem; }}
.note {{ color: #555; font-size: 0.9rem; max-width: 60rem; }}
</style></head><body>
<h1>numaplane simulation report</h1>
<p><strong>Verdict.</strong> {html.escape(verdict(results, policy=_policy_of(meta)))}</p>
<p class="note">Every scheduler ran the same workload on identical fresh clusters. "Rejected at node" counts
admissions refused by the node's resource manager (kubelet-exact CPU, memory, device and topology managers),
e.g. <code>TopologyAffinityError</code>; a rejected pod is recreated by its controller up to the configured
number of times ("failed" counts pods that never got in). "Fragmentation" is the time-averaged share of free
exclusive CPUs sitting in NUMA zones too small for a typical Guaranteed pod.</p>
<h2>Results</h2>
<table><thead><tr><th>scheduler</th><th>placed</th><th>rejected at node</th><th>by reason</th><th>failed</th>
<th>pending</th><th>NUMA-aligned</th><th>CPU util</th><th>fragmentation</th><th>attempts</th><th>wall s</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
<h2>Inputs</h2><table>{inputs}</table>
<h2>Plots</h2>{figures}
</body></html>
"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path

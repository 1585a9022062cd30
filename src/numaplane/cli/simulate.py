"""``numaplane simulate``: a whole cluster in one process, schedulers side by side."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
import yaml

from numaplane.cli._output import console, emit_document
from numaplane.documents import load_yaml
from numaplane.placement.sampling import num_feasible_nodes_to_find
from numaplane.sim.cluster import (
    DEFAULT_CLUSTER,
    build_templates,
    builtin_topologies,
    describe,
    parse_cluster_spec,
    scale_cluster,
)
from numaplane.sim.engine import DEFAULT_SCHEDULERS, RunResult, SchedulerSpec, SimConfig, run_scheduler
from numaplane.sim.errors import SimulationError, WorkloadError
from numaplane.sim.report import render_table, summary_document, write_report
from numaplane.sim.workload import PodArrival, WorkloadMix, generate_workload, parse_workload

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


def _load_workload(path: str) -> list[PodArrival]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(path, None, "", f"cannot read: {exc.strerror or exc}") from exc
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        raise WorkloadError(path, None, "", f"not valid YAML/JSON: {exc}") from exc
    return parse_workload(doc, path)


@click.command(name="simulate")
@click.option("--nodes", type=click.IntRange(min=1), help="Scale the cluster to this many nodes (keeps the mix).")
@click.option(
    "--topology",
    "topologies",
    multiple=True,
    metavar="NAME|FILE|SYSFS[=COUNT]",
    help="Node kind and count (repeatable): a built-in name (see --list-topologies), a topology JSON/YAML "
    "file, or a sysfs folder / .tar.gz snapshot. Default: a 36-node mix of real multi-NUMA servers.",
)
@click.option("--workload", type=click.Path(dir_okay=False), help="A workload trace (YAML/JSON; see README).")
@click.option("--pods", type=click.IntRange(min=1), default=1000, show_default=True, help="Generated pods.")
@click.option("--arrival-rate", type=click.FloatRange(min=0.001), default=3.0, show_default=True, help="Pods/s.")
@click.option("--mean-duration", type=click.FloatRange(min=0), default=900.0, show_default=True, help="Seconds.")
@click.option("--policy", type=click.Choice(POLICIES), default="single-numa-node", show_default=True)
@click.option("--scope", type=click.Choice(["container", "pod"]), default="container", show_default=True)
@click.option(
    "--schedulers",
    default=",".join(s.name for s in DEFAULT_SCHEDULERS),
    show_default=True,
    help="Comma-separated: built-in names, 'default', or numa:<Strategy>[:passthrough|overreserve|discard-reserved].",
)
@click.option("--duration", type=click.FloatRange(min=1), help="Simulated seconds (default: last arrival + 60 s).")
@click.option(
    "--refresh-period",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between NRT publications of a node (periodic exporter).",
)
@click.option(
    "--resync-period",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Over-reserve cache resync period, seconds.",
)
@click.option(
    "--percentage-of-nodes-to-score",
    type=click.IntRange(0, 100),
    default=0,
    show_default=True,
    help="kube-scheduler's percentageOfNodesToScore: a cycle stops searching once it found this share "
    "of the nodes feasible (at least 100 nodes); 0 = kube-scheduler's adaptive default (50% - 1% per "
    "125 nodes, at least 5%), 100 = filter and score every node.",
)
@click.option(
    "--hugepages-1g",
    type=click.IntRange(min=0),
    default=8,
    show_default=True,
    help="1 GiB hugepages added per NUMA node.",
)
@click.option("--reserved-cpus", type=click.IntRange(min=0), default=2, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True, help="Workload seed (runs are deterministic).")
@click.option("--output", "-o", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@click.option("--report", "report_dir", type=click.Path(file_okay=False), help="Write an HTML report with plots here.")
@click.option("--list-topologies", is_flag=True, help="List the built-in topologies and exit.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def command(**opts: Any) -> None:
    """Simulate a cluster: the same workload under several schedulers, compared.

    Nodes run numaplane's resource manager (kubelet-exact CPU, memory, device and topology
    managers) with the chosen topology manager policy; NUMA-aware schedulers read NRT objects
    published periodically from the nodes' real state, through the real scheduler caches. With no
    flags: 36 real multi-NUMA machines, 1,000 generated pods, six schedulers.

    \b
    Examples:
      numaplane simulate
      numaplane simulate --nodes 100 --pods 5000 --report out/
      numaplane simulate --topology intel-xeon-4s4n-144t=10 --workload examples/workloads/db.yaml
      numaplane simulate --schedulers default,numa:LeastNUMANodes:overreserve -o json
    """
    if opts["list_topologies"]:
        for name in builtin_topologies():
            click.echo(name)
        return
    try:
        _run(opts)
    except (SimulationError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _run(opts: dict[str, Any]) -> None:
    spec = parse_cluster_spec(opts["topologies"]) if opts["topologies"] else list(DEFAULT_CLUSTER)
    if opts["nodes"]:
        spec = scale_cluster(spec, opts["nodes"])
    templates = build_templates(
        spec,
        policy=opts["policy"],
        scope=opts["scope"],
        hugepages_1g_per_numa=opts["hugepages_1g"],
        reserved_cpus=opts["reserved_cpus"],
    )
    if opts["workload"]:
        arrivals = _load_workload(opts["workload"])
    else:
        devices = tuple(sorted({r for t in templates for r, devs in t.config.devices.items() if devs}))
        mix = WorkloadMix(
            pods=opts["pods"],
            arrival_rate_per_s=opts["arrival_rate"],
            mean_duration_s=opts["mean_duration"],
            device_resources=devices,
        )
        arrivals = generate_workload(opts["seed"], mix)
    schedulers = [SchedulerSpec.parse(s.strip()) for s in opts["schedulers"].split(",") if s.strip()]
    if not schedulers:
        raise click.ClickException("--schedulers names no scheduler")
    config = SimConfig(
        duration_s=opts["duration"],
        refresh_period_s=opts["refresh_period"],
        resync_period_s=opts["resync_period"],
        percentage_of_nodes_to_score=opts["percentage_of_nodes_to_score"],
    )
    meta = {
        "nodes": len(templates),
        "machines": ", ".join(f"{name} ×{n}" for name, n in describe(templates).items()),
        "cpus": sum(t.topology.num_cpus for t in templates),
        "pods": len(arrivals),
        "workload": opts["workload"]
        or f"generated (seed {opts['seed']}, {opts['arrival_rate']}/s, mean duration {opts['mean_duration']} s)",
        "topology manager": f"{opts['policy']} / {opts['scope']}",
        "NRT refresh period s": opts["refresh_period"],
        "over-reserve resync period s": opts["resync_period"],
        "nodes searched per cycle": _searched(opts["percentage_of_nodes_to_score"], len(templates)),
    }
    results = _simulate(schedulers, templates, arrivals, config, show_progress=not opts["quiet"])
    out = console()
    if opts["output"] == "table":
        render_table(
            results,
            out,
            title=f"numaplane simulation — {meta['nodes']} nodes, {meta['pods']} pods, {meta['topology manager']}",
        )
    else:
        emit_document(summary_document(results, meta), opts["output"])
    if opts["report_dir"]:
        path = write_report(results, meta, Path(opts["report_dir"]))
        console(stderr=True).print(f"report written to {path}")


def _searched(percentage: int, nodes: int) -> str:
    """How many feasible nodes a scheduling cycle looks for, for the report's header."""
    wanted = num_feasible_nodes_to_find(percentage, nodes)
    setting = "adaptive" if percentage == 0 else f"{percentage}%"
    return "every node" if wanted >= nodes else f"until {wanted} feasible found (percentageOfNodesToScore {setting})"


def _simulate(
    schedulers: list[SchedulerSpec],
    templates: list[Any],
    arrivals: list[PodArrival],
    config: SimConfig,
    *,
    show_progress: bool,
) -> list[RunResult]:
    err = console(stderr=True)
    results: list[RunResult] = []
    if not show_progress or not sys.stderr.isatty():
        for spec in schedulers:
            started = time.perf_counter()
            results.append(run_scheduler(spec, templates, arrivals, config))
            if show_progress:
                err.print(f"{spec.name}: done in {time.perf_counter() - started:.1f} s")
        return results
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description:<40}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        for spec in schedulers:
            task = progress.add_task(spec.name, total=1.0)

            def report(fraction: float, task_id: Any = task) -> None:
                progress.update(task_id, completed=fraction)

            results.append(run_scheduler(spec, templates, arrivals, config, report))
    return results

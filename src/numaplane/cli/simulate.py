"""``numaplane simulate``: a whole cluster in one process, schedulers side by side."""

from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import click
from click.core import ParameterSource

from numaplane.cli._duration import Duration
from numaplane.cli._output import InputError, console, emit_document, format_bytes
from numaplane.cli._validate import validate_option, warn_line
from numaplane.documents import DocumentError, read_document
from numaplane.limits import MAX_SIMULATED_NODES
from numaplane.placement.arrays.sampling import num_feasible_nodes_to_find
from numaplane.resources.podschema import Validation
from numaplane.sim.cluster import (
    DEFAULT_CLUSTER,
    PluginFactory,
    assumed_memory,
    build_templates,
    builtin_topologies,
    describe,
    load_topology,
    parse_cluster_spec,
    scale_cluster,
)
from numaplane.sim.engine import run_scheduler
from numaplane.sim.errors import SimulationError, WorkloadError
from numaplane.sim.report import render_table, summary_document, write_report
from numaplane.sim.spec import DEFAULT_SCHEDULERS, RunResult, SchedulerSpec, SimConfig
from numaplane.sim.workload import PodArrival, WorkloadMix, generate_workload, parse_workload

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
# the generated workload's defaults are for the default 36-node cluster; with --nodes they scale with it
DEFAULT_NODES = sum(count for _, count in DEFAULT_CLUSTER)
DEFAULT_PODS = 1000
DEFAULT_ARRIVAL_RATE = 3.0


def _from_options(f: Any) -> Any:
    """The ``--from`` what-if options (numaplane.cli.simulate_from)."""
    from numaplane.cli.simulate_from import FROM_OPTIONS

    for option in reversed(FROM_OPTIONS):
        f = option(f)
    return f


def _load_workload(path: str, validation: Validation = "strict") -> list[PodArrival]:
    try:
        doc = read_document(path)
    except DocumentError as exc:
        raise WorkloadError(path, None, "", exc.reason) from exc
    return parse_workload(doc, path, validation=validation, warn=warn_line)


@click.command(name="simulate")
@click.option(
    "--nodes",
    type=click.IntRange(1, MAX_SIMULATED_NODES),
    help="Scale the cluster to this many nodes (keeps the mix).",
)
@click.option(
    "--topology",
    "topologies",
    multiple=True,
    metavar="NAME|FILE|SYSFS[=COUNT]",
    help="Node kind and count (repeatable): a built-in name (see --list-topologies), a topology JSON/YAML "
    f"file, or a sysfs folder / .tar.gz snapshot; at most {MAX_SIMULATED_NODES:,} nodes in all. "
    "Default: a 36-node mix of real multi-NUMA servers.",
)
@click.option("--workload", type=click.Path(dir_okay=False), help="A workload trace (YAML/JSON; see README).")
@click.option(
    "--pods",
    type=click.IntRange(min=1),
    help=f"Generated pods (default: {DEFAULT_PODS} per {DEFAULT_NODES} nodes, i.e. scaled with the cluster).",
)
@click.option(
    "--arrival-rate",
    type=click.FloatRange(min=0.001),
    help=f"Generated pods per second (default: {DEFAULT_ARRIVAL_RATE} per {DEFAULT_NODES} nodes, scaled).",
)
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
    type=Duration(minimum=0.1),
    default="5s",
    show_default=True,
    help="Over-reserve cache resync period (5s, 1m30s, 250ms or seconds), as the scheduler's.",
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
@click.option(
    "--list-topologies",
    is_flag=True,
    help="List the built-in machines (CPUs, NUMA nodes, memory) and exit; honours -o.",
)
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="FILE.py[:FACTORY]",
    help="A vendor resource plugin on every node: FACTORY(topology, config) in FILE.py (default name "
    "plugin_factory) returns a ResourcePlugin; its resources join the generated workload (repeatable). "
    "E.g. examples/plugins/accelerator_plugin.py",
)
@click.option(
    "--dra-devices-per-numa",
    type=click.IntRange(1, 64),
    default=None,
    help="DRA comparison: N devices of DeviceClass accel on every NUMA node; a share of the pods claims one "
    "(--dra-claim-share); compares 'kubelet managers + DRA', extender mode and 'numaplane + DRA' (docs/dra.md).",
)
@click.option(
    "--dra-claim-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="With --dra-devices-per-numa: the share of Guaranteed whole-CPU pods that claim one device.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@validate_option
@_from_options
def command(**opts: Any) -> None:
    """Simulate a cluster: the same workload under several schedulers, compared.

    Nodes run numaplane's resource manager (kubelet-exact CPU, memory, device and topology
    managers) with the chosen topology manager policy; NUMA-aware schedulers read NRT objects
    published periodically from the nodes' real state, through the real scheduler caches. With no
    flags: 36 real multi-NUMA machines, 1,000 generated pods, six schedulers. The output starts with
    a verdict in plain words; a legend under the table explains every column. Ctrl-C stops the run
    and prints the schedulers that finished (exit status 130).

    \b
    Examples:
      numaplane simulate
      numaplane simulate --nodes 100 --report out/
      numaplane simulate --topology intel-xeon-4s4n-144t=10 --workload examples/workloads/telco-mix.yaml
      numaplane simulate --schedulers default,numa:LeastNUMANodes:overreserve -o json
      numaplane simulate --list-topologies -o json
      numaplane simulate --nodes 8 --pods 300 --dra-devices-per-numa 2
      numaplane simulate --from cluster.yaml --set-policy single-numa-node@pool=numa
    """
    ctx = click.get_current_context()
    given = _given_options(ctx)
    if opts["from_snapshot"]:
        from numaplane.cli.simulate_from import run_from

        _check_from_options(given)
        run_from(opts, schedulers_given="schedulers" in given)
        return
    what_if = [flag for name, flag in given.items() if name in _WHAT_IF_ONLY]
    if what_if:
        raise click.UsageError(f"{what_if[0]} needs --from SNAPSHOT (what-if options change a captured cluster)")
    if opts["list_topologies"]:
        _list_topologies(opts["output"])
        return
    try:
        _run(opts)
    except SimulationError as exc:
        raise InputError(str(exc)) from exc
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc


#: options that only a what-if (``--from``) uses
_WHAT_IF_ONLY = ("scenario", "set_policy", "add_workload")
#: options a what-if (``--from``) uses besides those
_WHAT_IF_ALSO = ("from_snapshot", "schedulers", "output", "quiet", "validation")
#: why an option of the generated simulation does not apply to a what-if (default: it does not apply)
_NOT_WITH_FROM = {
    "nodes": "the snapshot gives the nodes",
    "topologies": "the snapshot gives the nodes",
    "hugepages_1g": "the snapshot gives the nodes",
    "reserved_cpus": "the snapshot gives the nodes",
    "workload": "add pods with --add-workload or the scenario's workload",
    "pods": "add pods with --add-workload or the scenario's workload",
    "arrival_rate": "add pods with --add-workload or the scenario's workload",
    "mean_duration": "add pods with --add-workload or the scenario's workload",
    "seed": "add pods with --add-workload or the scenario's workload",
    "policy": "change policies with --set-policy or the scenario's policies",
    "scope": "change policies with --set-policy or the scenario's policies",
    "report_dir": "the what-if writes no HTML report; use -o json or -o yaml",
    "list_topologies": "it lists the built-in machines only",
    "dra_devices_per_numa": "the DRA comparison runs on generated clusters only",
    "dra_claim_share": "the DRA comparison runs on generated clusters only",
}


def _given_options(ctx: click.Context) -> dict[str, str]:
    """The options given on the command line or by the environment: parameter name → flag (``--nodes``)."""
    out: dict[str, str] = {}
    for param in ctx.command.params:
        if param.name is None or not isinstance(param, click.Option):
            continue
        source = ctx.get_parameter_source(param.name)
        if source is not None and source not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            out[param.name] = max(param.opts, key=len)
    return out


def _check_from_options(given: dict[str, str]) -> None:
    """A what-if (``--from``) refuses the options of the generated simulation: a usage error, never ignored."""
    for name, flag in given.items():
        if name not in _WHAT_IF_ONLY and name not in _WHAT_IF_ALSO:
            why = _NOT_WITH_FROM.get(name, "the what-if does not use it")
            raise click.UsageError(f"{flag} does not apply with --from ({why})")


def _list_topologies(output: str) -> None:
    rows: list[dict[str, Any]] = []
    for name in builtin_topologies():
        topology = load_topology(name)
        memory = [n.memory_total_bytes for n in topology.numa_nodes]
        rows.append(
            {
                "name": name,
                "cpus": topology.num_cpus,
                "numaNodes": len(topology.numa_nodes),
                "memoryBytes": sum(memory),
                "memoryAssumed": assumed_memory(name),
            }
        )
    if output != "table":
        emit_document({"apiVersion": "numaplane.io/v1", "kind": "BuiltinTopologyList", "items": rows}, output)
        return
    from rich.table import Table

    table = Table(title="built-in machines (simulate --topology NAME, admit --topology NAME)", title_justify="left")
    table.add_column("name")
    for col in ("CPUs", "NUMA nodes", "memory"):
        table.add_column(col, justify="right")
    for row in rows:
        memory_text = format_bytes(row["memoryBytes"]) + (" (assumed: 4Gi per CPU)" if row["memoryAssumed"] else "")
        table.add_row(row["name"], str(row["cpus"]), str(row["numaNodes"]), memory_text)
    console().print(table)


def _check_report_dir(path: Path) -> None:
    """Fail before the run, not after it, when the report folder cannot be written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".numaplane-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"--report {path}: cannot write there: {exc.strerror or exc}") from exc


def _run_dra(opts: dict[str, Any], templates: Any, arrivals: list[PodArrival]) -> None:
    """``--dra-devices-per-numa``: the aligned/unaligned comparison of :mod:`numaplane.sim.dra`."""
    from numaplane.sim.dra import compare_dra, with_claims

    claimed = with_claims(arrivals, opts["dra_claim_share"], opts["seed"])
    results = compare_dra(templates, claimed, opts["dra_devices_per_numa"])
    doc = {
        "apiVersion": "numaplane.io/v1",
        "kind": "DRASimulation",
        "nodes": len(templates),
        "devicesPerNUMANode": opts["dra_devices_per_numa"],
        "claimShare": opts["dra_claim_share"],
        "topologyManager": f"{opts['policy']} / {opts['scope']}",
        "runs": [r.to_dict() for r in results],
    }
    if opts["output"] != "table":
        emit_document(doc, opts["output"])
        return
    from rich.table import Table

    table = Table(
        title=f"DRA: {len(templates)} nodes, {opts['dra_devices_per_numa']} devices per NUMA node, "
        f"{opts['policy']} / {opts['scope']}",
        title_justify="left",
    )
    for col in ("run", "pods with a claim that ran", "misaligned", "aligned", "refused by admission", "never ran"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for r in results:
        d = r.to_dict()
        table.add_row(
            r.mode, str(d["claimPodsRun"]), str(d["misaligned"]), str(d["aligned"]),
            str(d["admissionRejections"]), str(d["neverRan"]),
        )  # fmt: skip
    out = console()
    out.print(table)
    out.print(
        "misaligned: a claimed device on a NUMA node outside the container's exclusive CPUs. kubelet managers + DRA: "
        "kube-scheduler's allocator takes the first free device and the kubelet admits without it; kube-scheduler "
        "DRA + numaplane agent (extender mode): the same device, the agent aligns the CPUs with it or refuses; "
        "numaplane + DRA: the device comes from the zone of the CPUs and the agent aligns the CPUs with it."
    )


def _run(opts: dict[str, Any]) -> None:
    if opts["report_dir"]:
        _check_report_dir(Path(opts["report_dir"]))
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
    factories = tuple(_load_plugin(spec) for spec in opts.get("plugins") or ())
    vendor: set[str] = set()
    if factories:
        templates = [replace(t, plugins=factories) for t in templates]
        for make in factories:
            vendor |= set(make(templates[0].topology, templates[0].config).resources)
    if opts["workload"]:
        arrivals = _load_workload(opts["workload"], opts["validation"])
    else:
        devices = tuple(sorted({r for t in templates for r, devs in t.config.devices.items() if devs} | vendor))
        scale = len(templates) / DEFAULT_NODES
        opts["pods"] = opts["pods"] or max(1, round(DEFAULT_PODS * scale))
        opts["arrival_rate"] = opts["arrival_rate"] or round(DEFAULT_ARRIVAL_RATE * scale, 3)
        mix = WorkloadMix(
            pods=opts["pods"],
            arrival_rate_per_s=opts["arrival_rate"],
            mean_duration_s=opts["mean_duration"],
            device_resources=devices,
        )
        arrivals = generate_workload(opts["seed"], mix)
    if opts.get("dra_devices_per_numa"):
        _run_dra(opts, templates, arrivals)
        return
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
        "topologyManager": f"{opts['policy']} / {opts['scope']}",
        "nrtRefreshPeriodSeconds": opts["refresh_period"],
        "overReserveResyncPeriodSeconds": opts["resync_period"],
        "nodesSearchedPerCycle": _searched(opts["percentage_of_nodes_to_score"], len(templates)),
    }
    results, interrupted = _simulate(schedulers, templates, arrivals, config, show_progress=not opts["quiet"])
    if interrupted:
        meta["interrupted"] = f"Ctrl-C: {len(results)} of {len(schedulers)} schedulers finished"
    out = console()
    if opts["output"] == "table":
        title = f"numaplane simulation — {meta['nodes']} nodes, {meta['pods']} pods, {meta['topologyManager']}"
        if results:
            render_table(results, out, title=title, policy=opts["policy"])
    else:
        emit_document(summary_document(results, meta), opts["output"])
    if opts["report_dir"] and results:
        path = write_report(results, meta, Path(opts["report_dir"]))
        console(stderr=True).print(f"report written to {path}")
    if interrupted:
        console(stderr=True).print(f"interrupted: {meta['interrupted']}; the table shows those that did")
        raise SystemExit(130)


def _load_plugin(spec: str) -> PluginFactory:
    """``FILE.py[:FACTORY]`` → the factory (a ClickException naming the problem otherwise)."""
    path_text, _, name = spec.partition(":")
    path = Path(path_text)
    if not path.is_file():
        raise click.ClickException(f"--plugin {spec}: {path} is not a file")
    module_spec = importlib.util.spec_from_file_location(f"numaplane_sim_plugin_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise click.ClickException(f"--plugin {spec}: cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # a plugin file's own error, reported with its name
        raise click.ClickException(f"--plugin {spec}: {path} failed to load: {exc}") from exc
    factory = getattr(module, name or "plugin_factory", None)
    if not callable(factory):
        raise click.ClickException(f"--plugin {spec}: {path} has no callable {name or 'plugin_factory'}")
    return cast(PluginFactory, factory)


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
) -> tuple[list[RunResult], bool]:
    """The results of every scheduler, and whether Ctrl-C stopped the run (then: those that finished)."""
    results: list[RunResult] = []
    try:
        _run_all(schedulers, templates, arrivals, config, results, show_progress=show_progress)
    except KeyboardInterrupt:
        return results, True
    return results, False


def _run_all(
    schedulers: list[SchedulerSpec],
    templates: list[Any],
    arrivals: list[PodArrival],
    config: SimConfig,
    results: list[RunResult],
    *,
    show_progress: bool,
) -> None:
    err = console(stderr=True)
    if not show_progress or not sys.stderr.isatty():
        for spec in schedulers:
            started = time.perf_counter()
            results.append(run_scheduler(spec, templates, arrivals, config))
            if show_progress:
                err.print(f"{spec.name}: done in {time.perf_counter() - started:.1f} s")
        return
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

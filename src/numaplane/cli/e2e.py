"""``numaplane e2e``: validate an installed numaplane stack on any cluster (see numaplane.e2e)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import click

from numaplane.cli._connect import api_server_option, connect
from numaplane.e2e.errors import SetupError
from numaplane.e2e.report import CheckResult, Report, Status, to_json, to_junit, to_table
from numaplane.e2e.runner import RunOptions, run_suite
from numaplane.e2e.serial import SerialOptions
from numaplane.kube.client import LightkubePort
from numaplane.operator.render_common import DEFAULT_NAMESPACE, DEFAULT_NODE_NAMESPACE


@click.command(name="e2e")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig (default: $KUBECONFIG or ~/.kube/config)."
)
@click.option("--context", help="Kubeconfig context (default: the current one).")
@api_server_option
@click.option("--namespace", "-n", default=DEFAULT_NAMESPACE, show_default=True, help="Where numaplane is installed.")
@click.option(
    "--node-namespace",
    default=DEFAULT_NODE_NAMESPACE,
    show_default=True,
    help="Where the node components (exporter and agent DaemonSets) run.",
)
@click.option(
    "--node-selector",
    "-l",
    metavar="SELECTOR",
    help="Label selector of the nodes to check (default: every node a node group selects).",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json", "junit"]),
    default="table",
    show_default=True,
    help="Report format on stdout.",
)
@click.option("--junit-file", type=click.Path(dir_okay=False), help="Also write JUnit XML to this file.")
@click.option("--serial", is_flag=True, help="Also run the disruptive checks (canary pods, policy change, restart).")
@click.option(
    "--canary-image",
    default="registry.k8s.io/pause:3.10",
    show_default=True,
    help="Image of the --serial canary pods (any image whose entrypoint keeps running).",
)
@click.option("--canary-cpus", type=click.IntRange(min=1), default=2, show_default=True, help="Canary CPUs.")
@click.option(
    "--timeout",
    "timeout_seconds",
    type=click.FloatRange(min=1),
    default=120,
    show_default=True,
    help="Seconds each --serial step may take.",
)
def command(**opts: Any) -> None:
    """Check that the numaplane stack on a cluster works; exit 1 when a check fails.

    Read-only by default (GET and LIST only): the CRDs are installed and served, the operator and its
    custom resources are Available, every node group's DaemonSets are ready, every selected node has
    a NodeResourceTopology consistent with its Node (CPU capacity, attributes) whose exporter is
    ready and, under the single-numa-node policy, whose zones report memory (memory manager None:
    every Guaranteed pod asking memory would be refused), the NUMA-aware scheduler is ready, and in
    agent mode the agent is ready and has not refused to take over (its TakeOver condition's reason
    is reported), has applied its policy and the kubelet's CPU and memory managers are off.

    --serial adds disruptive checks on one node per node group, in a namespace of their own that is
    deleted afterwards: once the node's NRT agrees with its pods, a Guaranteed canary pod must land
    NUMA-aligned, and in agent mode the agent is restarted (nothing may be lost) and the policy is
    changed live and restored.

    \b
    Examples:
      numaplane e2e
      numaplane e2e --kubeconfig ~/.kube/prod -o junit > e2e.xml
      numaplane e2e --serial --canary-image registry.example.com/pause:3.10
    """
    port, cluster = connect(opts["api_server"], opts["kubeconfig"], opts["context"])
    run = RunOptions(
        namespace=opts["namespace"],
        node_namespace=opts["node_namespace"],
        node_selector=opts["node_selector"],
        serial=opts["serial"],
        serial_options=SerialOptions(
            canary_image=opts["canary_image"], canary_cpus=opts["canary_cpus"], timeout_seconds=opts["timeout_seconds"]
        ),
        cluster=cluster,
    )
    started = time.monotonic()
    try:
        report = asyncio.run(_run(port, run))
    except SetupError as exc:
        # The machine-readable reports still say what happened: one failed check, cluster-reachable.
        failed = CheckResult("cluster-reachable", Status.FAIL, str(exc), time.monotonic() - started)
        _write(Report((failed,), failed.duration_seconds, cluster=cluster), opts, documents_only=True)
        raise click.ClickException(str(exc)) from exc
    _write(report, opts)
    if report.failed:
        sys.exit(1)


def _write(report: Report, opts: dict[str, Any], *, documents_only: bool = False) -> None:
    """The report to --junit-file and on stdout (``documents_only``: not as a table)."""
    if opts["junit_file"]:
        try:
            Path(opts["junit_file"]).write_text(to_junit(report))
        except OSError as exc:
            raise click.ClickException(f"cannot write {opts['junit_file']}: {exc.strerror or exc}") from exc
    if documents_only and opts["output"] == "table":
        return
    render = {"table": to_table, "json": to_json, "junit": to_junit}[opts["output"]]
    sys.stdout.write(render(report))


async def _run(port: LightkubePort, opts: RunOptions) -> Report:
    try:
        return await run_suite(port, opts)
    finally:
        await port.close()

"""``numaplane snapshot``: capture a cluster (read-only) for ``numaplane simulate --from``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import click

from numaplane import __version__
from numaplane.cli._connect import api_server_option, connect
from numaplane.cli._output import console
from numaplane.kube.client import LightkubePort
from numaplane.kube.clock import format_time
from numaplane.kube.errors import KubeError
from numaplane.sim.capture import Progress, capture
from numaplane.sim.snapshot import SnapshotWriter


@click.command(name="snapshot")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig (default: $KUBECONFIG or ~/.kube/config)."
)
@click.option("--context", help="Kubeconfig context (default: the current one).")
@api_server_option
@click.option(
    "--output",
    "-o",
    "output",
    default="cluster.yaml",
    show_default=True,
    metavar="FILE",
    help="Where to write the snapshot ('-' for stdout).",
)
@click.option("--page-size", type=click.IntRange(min=1), default=500, show_default=True, help="Objects per LIST page.")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def command(**opts: Any) -> None:
    """Capture Nodes, NodeResourceTopologies and bound / pending pods into one snapshot file.

    Read-only (paginated LIST requests only). Pod specs are reduced to what placement needs: no
    env, images, commands, volumes or secrets. Each node's resource-manager policy is taken from
    its NRT attributes. Memory stays bounded whatever the cluster's size. The format is documented
    in numaplane.sim.snapshot; `numaplane simulate --from FILE` reads it.

    \b
    Examples:
      numaplane snapshot -o cluster.yaml
      numaplane snapshot --kubeconfig ~/.kube/prod --context east -o east.yaml
      numaplane simulate --from cluster.yaml --set-policy single-numa-node
    """
    port, source = connect(opts["api_server"], opts["kubeconfig"], opts["context"])
    meta = {
        "capturedAt": format_time(datetime.now(UTC)),
        "source": source,
        "tool": f"numaplane {__version__}",
    }
    started = time.perf_counter()
    try:
        with _target(opts["output"]) as out:
            summary = asyncio.run(_capture(port, out, meta, opts["page_size"], quiet=opts["quiet"]))
    except KubeError as exc:
        raise click.ClickException(f"capture failed: {exc}") from exc
    except OSError as exc:
        raise click.ClickException(f"cannot write {opts['output']}: {exc.strerror or exc}") from exc
    if not opts["quiet"]:
        console(stderr=True).print(
            f"snapshot: {summary['nodes']} nodes, {summary['nodeResourceTopologies']} NRTs, "
            f"{summary['boundPods']} bound and {summary['pendingPods']} pending pods "
            f"in {time.perf_counter() - started:.1f} s" + ("" if opts["output"] == "-" else f" → {opts['output']}")
        )


@contextlib.contextmanager
def _target(path: str) -> Iterator[TextIO]:
    """stdout, or ``path`` written through a temporary file (no half-written snapshot on failure)."""
    if path == "-":
        yield sys.stdout
        return
    final = Path(path)
    tmp = final.with_name(final.name + ".partial")
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            yield out
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


async def _capture(
    port: LightkubePort, out: TextIO, meta: dict[str, Any], page_size: int, *, quiet: bool
) -> dict[str, int]:
    writer = SnapshotWriter(out, meta)
    try:
        if quiet or not sys.stderr.isatty():
            return await capture(port, writer, page_size=page_size)
        from rich.progress import Progress as Bar
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        with Bar(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console(stderr=True)
        ) as bar:
            task = bar.add_task("listing", total=None)

            def report(section: str, count: int) -> None:
                bar.update(task, description=f"{section}: {count:,}")

            progress: Progress = report
            return await capture(port, writer, page_size=page_size, progress=progress)
    finally:
        await port.close()

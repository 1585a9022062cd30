"""``numaplane topology``: show a machine's CPU, NUMA, memory and device topology.

Input (one of): this machine's sysfs (default, ``/``); ``--sysfs DIR`` (a sysfs root or a snapshot
folder holding one) or ``--sysfs SNAPSHOT.tar.gz`` (unpacked into a temporary folder); ``--from FILE``
(a topology JSON or YAML document, e.g. the output of ``--output json``).

Output: ``--output table|json|yaml|svg|png`` to stdout, or to ``--out FILE`` (whose suffix picks the
format when ``--output`` is not given). Every failure is a one-line error, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import click
from rich.console import Console

from numaplane.cli._output import InputError
from numaplane.topology.errors import TopologyError
from numaplane.topology.load import load_sysfs, load_topology_file
from numaplane.topology.model import Topology
from numaplane.topology.render import FORMATS, OutputFormat, render, table_renderables
from numaplane.topology.sysfs import View, discover

SUFFIX_FORMATS: dict[str, OutputFormat] = {
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".svg": "svg",
    ".png": "png",
    ".txt": "table",
}


@click.command(name="topology")
@click.option(
    "--sysfs",
    "sysfs",
    type=click.Path(exists=True, path_type=Path),
    help="Read this sysfs root / snapshot folder, or a .tar.gz snapshot, instead of this machine.",
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read a topology JSON or YAML document (e.g. saved with --output json).",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format (default: from the --out suffix, else table).",
)
@click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of stdout.",
)
def command(sysfs: Path | None, from_file: Path | None, output: str | None, out_file: Path | None) -> None:
    """Show a machine's CPUs, cores, sockets, NUMA nodes, memory, hugepages and PCI devices.

    \b
    Examples:
      numaplane topology
      numaplane topology --sysfs snapshot.tar.gz -o svg --out machine.svg
      numaplane topology -o json > machine.json && numaplane topology --from machine.json
    """
    if sysfs is not None and from_file is not None:
        raise click.UsageError("--sysfs and --from are mutually exclusive")
    fmt = _format(output, out_file)
    # Pictures and the table show the machine as hwloc/lscpu do; json/yaml are topology documents the
    # managers load again (--from, --topology), so they carry the kubelet's view of cores and caches.
    topology = _load(sysfs, from_file, view="kubelet" if fmt in ("json", "yaml") else "hwloc")
    if fmt == "table" and out_file is None:
        console = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 120)
        for renderable in table_renderables(topology):
            console.print(renderable)
        return
    try:
        data = render(topology, fmt)
    except TopologyError as exc:
        raise click.ClickException(str(exc)) from None
    if out_file is not None:
        try:
            out_file.write_bytes(data)
        except OSError as exc:
            raise click.ClickException(f"cannot write {out_file}: {exc.strerror or exc}") from None
        return
    if fmt == "png" and sys.stdout.isatty():
        raise click.ClickException("refusing to write PNG to a terminal; use --out FILE")
    click.echo(data, nl=False)


def _format(output: str | None, out_file: Path | None) -> OutputFormat:
    if output is not None:
        return cast(OutputFormat, output)
    if out_file is not None:
        return SUFFIX_FORMATS.get(out_file.suffix.lower(), "table")
    return "table"


def _load(sysfs: Path | None, from_file: Path | None, *, view: View = "kubelet") -> Topology:
    try:
        if from_file is not None:
            return load_topology_file(from_file)
        if sysfs is None:
            if not sys.platform.startswith("linux"):
                raise click.ClickException("reading this machine needs Linux sysfs; use --sysfs or --from")
            return discover("/", view=view)
        return load_sysfs(sysfs, view=view)
    except TopologyError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{exc.filename or sysfs or from_file}: {exc.strerror or exc}") from None

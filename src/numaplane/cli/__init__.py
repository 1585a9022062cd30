"""``numaplane <command>``: the command line. Thin: parses, calls one component, prints.

Each command lives in its own module of this package and is imported only when it runs, so
``numaplane --help`` stays fast and a command's heavy dependencies (matplotlib, grpc, aiohttp) load
only for the command that needs them.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import click

from numaplane import __version__

# command name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "simulate": ("numaplane.cli.simulate", "command", "Simulate a whole cluster and compare schedulers."),
    "snapshot": (
        "numaplane.cli.snapshot",
        "command",
        "Capture a cluster (read-only) for simulate --from.",
    ),
    "topology": (
        "numaplane.cli.topology",
        "command",
        "Show a machine's CPU, NUMA, memory and device topology.",
    ),
    "conformance": (
        "numaplane.cli.conformance",
        "command",
        "Run kubelet / scheduler-plugins conformance cases.",
    ),
    "admit": ("numaplane.cli.admit", "command", "Admit pods on a node with the resource manager (dry run)."),
    "exporter": ("numaplane.cli.exporter", "command", "Publish NodeResourceTopology objects for this node."),
    "scheduler": ("numaplane.cli.scheduler", "group", "NUMA-aware scheduler: extender or standalone."),
    "explain": ("numaplane.cli.explain", "command", "Explain per node whether a pod fits its NUMA zones."),
    "agent": ("numaplane.cli.agent", "command", "Run the node agent (NRI plugin + resource manager)."),
    "operator": ("numaplane.cli.operator", "command", "Run the operator's controllers."),
    "render": ("numaplane.cli.render", "command", "Render every deployment manifest as YAML."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None or not _available(cmd_name):
            return None
        module = importlib.import_module(spec[0])
        cmd: Any = getattr(module, spec[1])
        if not isinstance(cmd, click.Command):
            raise TypeError(f"{spec[0]}.{spec[1]} is not a click command")
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _available(name: str) -> bool:
    return importlib.util.find_spec(COMMANDS[name][0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="numaplane")
def main() -> None:
    """numaplane: NUMA-aware resource management for Kubernetes.

    Start with `numaplane simulate` (a whole cluster in one process) or `numaplane topology`
    (this machine's NUMA layout).
    """

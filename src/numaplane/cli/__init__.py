"""``numaplane <command>``: the command line. Thin: parses, calls one component, prints.

Errors (every command): one line on stderr, ``Error: <what> (<input>)``; exit status 2 for unusable
arguments or input (usage errors, unreadable or invalid files), 1 for failures, 130 on Ctrl-C; never a
traceback unless ``numaplane --debug`` (or ``NUMAPLANE_DEBUG=1``) is given.

Each command lives in its own module of this package and is imported only when it runs, so
``numaplane --help`` stays fast and a command's heavy dependencies (matplotlib, grpc, aiohttp) load
only for the command that needs them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any

import click
import yaml

from numaplane import __version__


def _structlog_without_rich() -> None:
    """Import structlog without letting it import rich.

    structlog imports rich, when it is installed, only to offer rich tracebacks to its console
    renderer; our renderers never use them (``observability.logs`` formats exceptions as plain text
    first). rich is ~70 modules and ~3 MB in every daemon, so structlog is imported here with rich
    hidden (it then takes its plain-traceback path), and rich stays importable for the commands that
    draw with it (``simulate``, ``topology``)."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # "not installed" for this import only
    try:
        import structlog.dev
        import structlog.tracebacks  # noqa: F401
    except ImportError:  # pragma: no cover - structlog is a dependency
        pass
    finally:
        del sys.modules["rich"]


_structlog_without_rich()

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
    "e2e": ("numaplane.cli.e2e", "command", "Validate an installed numaplane stack on a cluster."),
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

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; in standalone mode turn every error into one line and an exit status."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        debug = os.environ.get("NUMAPLANE_DEBUG", "") not in ("", "0") or "--debug" in argv[: _first_command(argv)]
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `numaplane` alone: the help, as click prints it
                exc.show()
                sys.exit(exc.exit_code)
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _fail(exc.format_message() + where, 2)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except click.Abort as exc:
            cause = exc.__cause__
            if isinstance(cause, EOFError):  # click turns EOFError (e.g. a truncated archive) into Abort
                if debug:
                    raise cause from None
                _fail(f"unexpected end of input: {cause or 'truncated data'}", 2)
            _fail("interrupted", 130)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except SystemExit:
            raise
        except Exception as exc:
            if debug:
                raise
            _fail(*_describe(exc))
        sys.exit(rv if isinstance(rv, int) else 0)


def _first_command(argv: list[str]) -> int:
    """Index of the first argument naming a command (the group's own options come before it)."""
    return next((i for i, a in enumerate(argv) if a in COMMANDS), len(argv))


def _fail(message: str, code: int) -> None:
    """Print ``Error: message`` on one line (continuation lines of a listed problem set are kept) and exit."""
    click.echo(f"Error: {message.strip()}", err=True)
    sys.exit(code)


def _describe(exc: BaseException) -> tuple[str, int]:
    """One line and an exit status for an exception no command turned into a message itself."""
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc)
        where = exc.filename if exc.filename is not None else ""
        return (f"{where}: {what}" if where else what), 2 if where else 1
    if isinstance(exc, UnicodeDecodeError):
        return f"input is not UTF-8 text: {exc.reason}", 2
    if isinstance(exc, yaml.YAMLError):
        return f"not valid YAML/JSON: {' '.join(str(exc).split())}", 2
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{text} ({type(exc).__name__}; run 'numaplane --debug ...' for a traceback)", 1


def _available(name: str) -> bool:
    return importlib.util.find_spec(COMMANDS[name][0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="numaplane")
@click.option("--debug", is_flag=True, help="Show a traceback on unexpected errors (also NUMAPLANE_DEBUG=1).")
def main(debug: bool) -> None:
    """numaplane: NUMA-aware resource management for Kubernetes.

    Start with `numaplane simulate` (a whole cluster in one process) or `numaplane topology`
    (this machine's NUMA layout).
    """

"""Shared output helpers for commands: JSON / YAML emission and a rich console."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click
import yaml

if TYPE_CHECKING:  # rich loads only for the commands that draw (the daemons never do)
    from rich.console import Console

OUTPUT_CHOICES = ("table", "json", "yaml")


class InputError(click.ClickException):
    """An unusable input (a file that cannot be read or is invalid): one line, exit status 2."""

    exit_code = 2


def console(stderr: bool = False) -> Console:
    """A rich console honouring NO_COLOR; wide enough for tables when output is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def emit_document(doc: Any, fmt: str) -> None:
    """Print ``doc`` as JSON (indented, key order kept) or YAML to stdout."""
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    else:  # pragma: no cover - callers only pass json/yaml here
        raise ValueError(f"unknown document format {fmt!r}")


def format_bytes(size: int) -> str:
    """``size`` bytes in the largest binary unit that keeps it exact-ish: ``8Gi``, ``1.5Gi``, ``512Mi``, ``100``."""
    for unit, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if abs(size) >= factor:
            value = size / factor
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(size)

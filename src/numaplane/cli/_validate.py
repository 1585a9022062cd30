"""The ``--validate`` option of the commands that read pod manifests (``admit``, ``explain``, ``simulate``).

Strict by default, as ``kubectl --validate=strict``: a field the Pod schema of v1.36 does not
declare, or a value of the wrong type, is bad input (exit 2, one line naming the file and the path).
``warn`` prints each such problem on stderr and goes on; ``ignore`` does not check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from numaplane.resources.podschema import VALIDATION_MODES

__all__ = ["validate_option", "warn_line"]


def validate_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--validate strict|warn|ignore`` (default strict), passed as ``validation``."""
    return click.option(
        "--validate",
        "validation",
        type=click.Choice(VALIDATION_MODES),
        default="strict",
        show_default=True,
        help="Check pod manifests against the Pod schema of Kubernetes v1.36 (unknown fields, types), as "
        "kubectl --validate: strict refuses, warn prints each problem and goes on, ignore does not check.",
    )(func)


def warn_line(message: str) -> None:
    """One warning line on stderr."""
    click.echo(f"warning: {message}", err=True)

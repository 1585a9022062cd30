"""The one type of every period flag (``--resync-period`` of ``simulate`` and ``scheduler``): a Go
duration (``5s``, ``1m30s``, ``250ms``) or a plain number of seconds (``5``, ``0.5``), given as seconds."""

from __future__ import annotations

from typing import Any

import click

from numaplane.resources.duration import parse_seconds
from numaplane.resources.errors import DurationError

__all__ = ["Duration"]


class Duration(click.ParamType[float, Any]):
    """Seconds (a float) from a duration or a number of seconds; at least ``minimum`` seconds."""

    name = "duration"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            try:
                seconds = parse_seconds(str(value))
            except DurationError as exc:
                self.fail(f"{exc} (or a number of seconds)", param, ctx)
        if seconds < self.minimum:
            self.fail(f"{str(value)[:64]!r} is shorter than the minimum {self.minimum:g}s", param, ctx)
        return seconds

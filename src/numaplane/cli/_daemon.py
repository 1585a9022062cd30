"""Options every daemon command repeats, written once: its listeners, its logging and ``--dra``.

Each function returns a click decorator that adds the options in the order shown in ``--help``
(and so in the generated ``docs/`` reference); the parameter names passed to the command are
``metrics_address``, ``health_address``, ``log_format``, ``log_level`` and ``dra``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from numaplane.listeners import LISTENER_HELP, default_address
from numaplane.observability.logs import LOG_FORMATS, LOG_LEVELS

__all__ = ["dra_option", "listener_options", "log_options"]

F = TypeVar("F", bound=Callable[..., Any])


def _stack(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """One decorator applying ``options`` so that they show in list order."""

    def decorate(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def listener_options(component: str) -> Callable[[F], F]:
    """``--metrics-address`` and ``--health-address`` of ``component``, each defaulting to its own
    port (:func:`numaplane.listeners.default_address`)."""
    return _stack(
        [
            click.option(
                "--metrics-address",
                default=default_address(component, "metrics"),
                show_default=True,
                help=LISTENER_HELP.format(what="/metrics"),
            ),
            click.option(
                "--health-address",
                default=default_address(component, "health"),
                show_default=True,
                help=LISTENER_HELP.format(what="/healthz, /readyz"),
            ),
        ]
    )


def log_options(func: F) -> F:
    """``--log-format`` (json, console) and ``--log-level`` (:data:`~numaplane.observability.logs.LOG_LEVELS`)."""
    return _stack(
        [
            click.option("--log-format", type=click.Choice(LOG_FORMATS), default="json", show_default=True),
            click.option("--log-level", type=click.Choice(list(LOG_LEVELS)), default="info", show_default=True),
        ]
    )(func)


def dra_option(help: str) -> Callable[[F], F]:
    """``--dra/--no-dra`` (default off); ``help`` says what it does in this daemon."""
    return click.option("--dra/--no-dra", default=False, show_default=True, help=help)

"""The daemons' stop signals: SIGTERM and SIGINT both stop gracefully; Ctrl-C then exits 130.

SIGTERM is how Kubernetes stops a pod: a clean stop, exit status 0. SIGINT (Ctrl-C) is a person
interrupting: the daemon stops just as cleanly, then the command exits 130 (``Error: interrupted``), as
every other command does on Ctrl-C (README "Commands").
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable

import click

__all__ = ["Interrupted", "StopSignals"]


class Interrupted(click.ClickException):
    """Stopped by SIGINT: one line, exit status 130."""

    exit_code = 130

    def __init__(self) -> None:
        super().__init__("interrupted")


class StopSignals:
    """Call ``stop`` on SIGTERM or SIGINT in the running loop; :meth:`raise_if_interrupted` after the stop."""

    def __init__(self, stop: Callable[[], object]) -> None:
        self.received: int | None = None
        self._stop = stop
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):  # no signal handlers on some platforms
                loop.add_signal_handler(sig, self._on, sig)

    def _on(self, sig: int) -> None:
        if self.received is None:
            self.received = sig
        self._stop()

    def raise_if_interrupted(self) -> None:
        """:class:`Interrupted` (exit 130) when the stop came from SIGINT."""
        if self.received == signal.SIGINT:
            raise Interrupted()

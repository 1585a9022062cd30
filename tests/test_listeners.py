"""Every daemon's metrics and probe listeners default to loopback, on a port of its own (issue 25 item 8;
issue 26 finding 11: the exporter, the scheduler and the operator all defaulted to ``:8081``)."""

from __future__ import annotations

import click
import pytest

from numaplane.cli import main
from numaplane.listeners import DEFAULT_ADDRESSES
from numaplane.observability import parse_address

#: Each daemon's command path under ``numaplane``.
COMMANDS = {
    "operator": ("operator",),
    "scheduler": ("scheduler", "run"),
    "agent": ("agent",),
    "exporter": ("exporter",),
}


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    ctx = click.Context(main)
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(ctx, name)
        assert found is not None, name
        command = found
    return command


def _defaults(path: tuple[str, ...]) -> tuple[str, str]:
    params = {p.name: p.default for p in _command(path).params}
    return str(params["metrics_address"]), str(params["health_address"])


@pytest.mark.parametrize("daemon", sorted(COMMANDS))
def test_the_command_line_defaults_are_loopback(daemon: str) -> None:
    metrics, health = _defaults(COMMANDS[daemon])
    assert (metrics, health) == DEFAULT_ADDRESSES[daemon]
    for address in (metrics, health):
        assert parse_address(address)[0] == "127.0.0.1", (daemon, address)


def test_no_two_default_listeners_share_a_port() -> None:
    ports = [parse_address(a)[1] for daemon in COMMANDS for a in _defaults(COMMANDS[daemon])]
    assert len(ports) == len(set(ports)) == 8, ports


def test_the_help_says_loopback_and_how_to_listen_everywhere() -> None:
    text = _command(("exporter",)).get_help(click.Context(_command(("exporter",))))
    assert "127.0.0.1:2112" in text and "':PORT' listens on every interface" in text

"""Reaching the API server from a command: the one ``--api-server`` / ``--server`` option, and the port.

Every command that talks to a cluster takes the same option (:func:`api_server_option`): ``--api-server
URL`` and its synonym ``--server URL`` (kubectl's name), an API server URL without credentials
(``kubectl proxy``, tests), passed as ``api_server``. Read-only client commands (``e2e``, ``snapshot``)
connect with :func:`connect` (a kubeconfig context otherwise); daemons with :func:`daemon_port` (the
in-cluster service account otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # lightkube and httpx load only when a command connects (``numaplane --help`` stays fast)
    from numaplane.kube.client import LightkubePort

__all__ = ["api_server_option", "connect", "daemon_port"]


def api_server_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--api-server URL`` (or ``--server URL``), passed as ``api_server``."""
    return click.option(
        "--api-server",
        "--server",
        "api_server",
        metavar="URL",
        default=None,
        help="API server URL without credentials (kubectl proxy, tests); --server is the same option.",
    )(func)


def connect(server: str | None, kubeconfig: str | None, context: str | None) -> tuple[LightkubePort, str]:
    """``(port, description of the cluster for reports)``; an unusable kubeconfig is a one-line error."""
    from numaplane.kube.client import LightkubePort
    from numaplane.kube.errors import KubeError

    if server:
        return LightkubePort.from_server(server), server
    try:
        port = LightkubePort.from_kubeconfig(kubeconfig, context=context)
    except KubeError as exc:
        raise click.ClickException(str(exc)) from exc
    return port, f"kubeconfig {kubeconfig or '(default)'}, context {context or '(current)'}"


def daemon_port(api_server: str | None, kubeconfig: str | None, what: str = "no Kubernetes API") -> LightkubePort:
    """A daemon's API port: ``--api-server``, else ``--kubeconfig``, else in-cluster, else the default
    kubeconfig; none usable is a one-line error starting with ``what``."""
    from numaplane.kube.client import LightkubePort
    from numaplane.kube.errors import KubeError

    try:
        if api_server:
            return LightkubePort.from_server(api_server)
        if kubeconfig:
            return LightkubePort.from_kubeconfig(kubeconfig)
        try:
            return LightkubePort.in_cluster()
        except KubeError:
            return LightkubePort.from_kubeconfig(None)
    except KubeError as exc:
        raise click.ClickException(f"{what}: {exc}") from exc

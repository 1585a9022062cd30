"""The API server of a read-only client command (``e2e``, ``snapshot``): a bare URL, or a kubeconfig context."""

from __future__ import annotations

import click

from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import KubeError

__all__ = ["connect"]


def connect(server: str | None, kubeconfig: str | None, context: str | None) -> tuple[LightkubePort, str]:
    """``(port, description of the cluster for reports)``; an unusable kubeconfig is a one-line error."""
    if server:
        return LightkubePort.from_server(server), server
    try:
        port = LightkubePort.from_kubeconfig(kubeconfig, context=context)
    except KubeError as exc:
        raise click.ClickException(str(exc)) from exc
    return port, f"kubeconfig {kubeconfig or '(default)'}, context {context or '(current)'}"

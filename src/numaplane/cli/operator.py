"""``numaplane operator``: run the operator's controllers, with /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import click

from numaplane.cli._connect import api_server_option
from numaplane.cli._daemon import listener_options, log_options
from numaplane.cli._nodepaths import (
    checked_image,
    checked_namespace,
    install_settings,
    node_namespace_option,
    node_path_options,
)
from numaplane.cli._signals import StopSignals
from numaplane.observability.errors import ObservabilityError
from numaplane.supervisor import Supervisor, TaskFailed

if TYPE_CHECKING:
    from numaplane.operator.render_common import Settings


async def _serve(
    kubeconfig: str | None,
    api_server: str | None,
    settings: Settings,
    leader_elect: bool,
    metrics_address: str,
    health_address: str,
) -> None:
    from numaplane.kube.client import LightkubePort
    from numaplane.kube.errors import KubeError
    from numaplane.kube.leader import LeaderElectionConfig, LeaderElector
    from numaplane.observability.http import ProbeServer
    from numaplane.operator.controller import Operator
    from numaplane.operator.rbac import OPERATOR_LEASE

    try:
        if api_server:
            kube = LightkubePort.from_server(api_server)
        elif kubeconfig:
            kube = LightkubePort.from_kubeconfig(kubeconfig)
        else:
            kube = LightkubePort.in_cluster()
    except KubeError as exc:
        where = api_server or kubeconfig or "the in-cluster service account"
        raise click.ClickException(
            f"cannot reach the API server through {where}: {' '.join(str(exc).split())}"
            + ("" if api_server or kubeconfig else "; outside a cluster give --kubeconfig PATH or --api-server URL")
        ) from exc
    operator = Operator(kube, settings)
    state = {"dead": False, "leading": not leader_elect}

    def healthy() -> tuple[bool, dict[str, Any]]:
        return not state["dead"], {"controllers": "stopped" if state["dead"] else "running"}

    def ready() -> tuple[bool, dict[str, Any]]:
        # standby replicas are ready too: they serve probes and wait for the lease
        return operator.synced or not state["leading"], {"synced": operator.synced, "leading": state["leading"]}

    probes = ProbeServer(operator.metrics.registry, liveness=healthy, readiness=ready)
    try:
        await probes.start(metrics_address, health_address)
    except ObservabilityError as exc:
        await kube.close()
        raise click.UsageError(str(exc)) from exc
    tasks = Supervisor("operator")
    signals = StopSignals(tasks.stop)
    ended = {"work": False}

    async def lead() -> None:
        state["leading"] = True
        await operator.run()

    async def until_done(work: Coroutine[Any, Any, None]) -> None:
        await work  # returns when the lease is lost
        ended["work"] = True
        tasks.stop()

    try:
        async with tasks:
            if leader_elect:
                identity = os.environ.get("POD_NAME") or socket.gethostname()
                elector = LeaderElector(
                    kube, LeaderElectionConfig(OPERATOR_LEASE, settings.namespace, identity), on_started_leading=lead
                )
                tasks.spawn(until_done(elector.run()), "leader-election")
            else:
                tasks.spawn(until_done(operator.run()), "controllers")
            try:
                await tasks.wait()
            except TaskFailed as exc:
                state["dead"] = True
                raise click.ClickException(str(exc)) from exc
        if ended["work"]:
            state["dead"] = True
            raise click.ClickException("leadership lost; exiting so that a new leader takes over")
    finally:
        await probes.stop()
        await kube.close()
    signals.raise_if_interrupted()


@click.command("operator")
@click.option(
    "--namespace", envvar="POD_NAMESPACE", default="numaplane-system", show_default=True, callback=checked_namespace
)
@node_namespace_option
@click.option("--image", required=True, callback=checked_image, help="The numaplane image the operands run.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster config.")
@api_server_option
@node_path_options
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True)
@listener_options("operator")
@log_options
def command(
    namespace: str,
    node_namespace: str,
    image: str,
    kubeconfig: str | None,
    api_server: str | None,
    leader_elect: bool,
    metrics_address: str,
    health_address: str,
    log_format: str,
    log_level: str,
    **paths: str,
) -> None:
    """Run the NUMAResourcesOperator, NUMAResourcesScheduler and NodeResourcePolicy controllers.

    Serves /metrics on --metrics-address and /healthz, /readyz on --health-address; logs one JSON
    object per line on stderr (--log-format console for humans).

    \b
    Examples:
      numaplane operator --image ghcr.io/example/numaplane:0.1.0            # in a cluster
      numaplane operator --image numaplane:dev --kubeconfig ~/.kube/config --log-format console
    """
    from numaplane.observability.logs import configure_logging

    settings = install_settings(namespace, node_namespace, image, paths)
    configure_logging(log_format, log_level)
    asyncio.run(_serve(kubeconfig, api_server, settings, leader_elect, metrics_address, health_address))

"""``numaplane operator``: run the operator's controllers, with /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket

import click


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)


async def _serve(
    kubeconfig: str | None,
    server: str | None,
    namespace: str,
    image: str,
    leader_elect: bool,
    metrics_address: str,
    health_address: str,
) -> None:
    from aiohttp import web

    from numaplane.kube.client import LightkubePort
    from numaplane.kube.leader import LeaderElectionConfig, LeaderElector
    from numaplane.operator.controller import Operator
    from numaplane.operator.rbac import OPERATOR_LEASE
    from numaplane.operator.render_common import Settings
    from numaplane.operator.server import build_app

    if server:
        kube = LightkubePort.from_server(server)
    elif kubeconfig:
        kube = LightkubePort.from_kubeconfig(kubeconfig)
    else:
        kube = LightkubePort.in_cluster()
    operator = Operator(kube, Settings(namespace=namespace, image=image))
    state = {"dead": False}
    app = build_app(
        operator.metrics.registry,
        ready=lambda: operator.synced or not state["leading"],
        healthy=lambda: not state["dead"],
    )
    state["leading"] = not leader_elect
    runners = []
    addresses = {_split(metrics_address), _split(health_address)}
    for host, port in sorted(addresses):
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        runners.append(runner)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)

    async def lead() -> None:
        state["leading"] = True
        await operator.run()

    try:
        if leader_elect:
            identity = os.environ.get("POD_NAME") or socket.gethostname()
            elector = LeaderElector(
                kube, LeaderElectionConfig(OPERATOR_LEASE, namespace, identity), on_started_leading=lead
            )
            work = asyncio.create_task(elector.run())
        else:
            work = asyncio.create_task(operator.run())
        waiter = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            state["dead"] = True
            work.result()
            raise click.ClickException("leadership lost; exiting so that a new leader takes over")
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
    finally:
        for runner in runners:
            await runner.cleanup()
        await kube.close()


@click.command("operator")
@click.option("--namespace", envvar="POD_NAMESPACE", default="numaplane-system", show_default=True)
@click.option("--image", required=True, help="The numaplane image the operands run.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster config.")
@click.option("--server", default=None, help="API server URL without credentials (tests, kubectl proxy).")
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True)
@click.option("--metrics-address", default=":8080", show_default=True)
@click.option("--health-address", default=":8081", show_default=True)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def command(
    namespace: str,
    image: str,
    kubeconfig: str | None,
    server: str | None,
    leader_elect: bool,
    metrics_address: str,
    health_address: str,
    log_level: str,
) -> None:
    """Run the NUMAResourcesOperator, NUMAResourcesScheduler and NodeResourcePolicy controllers."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(kubeconfig, server, namespace, image, leader_elect, metrics_address, health_address))

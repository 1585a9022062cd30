"""``numaplane agent``: run the node agent (NRI plugin + resource manager) on this node."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import structlog

from numaplane.cli._connect import api_server_option, daemon_port
from numaplane.cli._daemon import listener_options, log_options
from numaplane.cli._signals import StopSignals

if TYPE_CHECKING:
    from numaplane.agent.daemon import AgentOptions
    from numaplane.kube.clock import Clock

__all__ = ["command"]

DEFAULT_KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"


@click.command(name="agent")
@click.option("--nri-socket", default="/var/run/nri/nri.sock", show_default=True, help="The runtime's NRI socket.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default="/var/lib/numaplane",
    show_default=True,
    help="Where the checkpoint (agent_state.json) lives.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="NodeResourceConfig YAML/JSON file; watched, valid changes apply live.",
)
@click.option(
    "--topology", "topology_file", type=click.Path(dir_okay=False), default=None, help="Topology JSON instead of sysfs."
)
@click.option(
    "--sysfs-root", type=click.Path(file_okay=False), default="/", show_default=True, help="Folder holding sys/."
)
@click.option("--node-name", envvar="NODE_NAME", default=None, help="Default: $NODE_NAME, else the hostname.")
@click.option(
    "--podresources-socket",
    default="/var/lib/numaplane/podresources/kubelet.sock",
    show_default=True,
    help="Serve the kubelet PodResources v1 API here ('' disables).",
)
@click.option(
    "--plugin-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory of out-of-process plugin sockets (registry: numaplane.sock); unset disables plugins.",
)
@click.option(
    "--notify-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Touch this file after every allocation change (the exporter's --notify-file, refresh mode events/both).",
)
@click.option(
    "--applied-policy-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the configuration in force here at start and after every applied change (the exporter's"
    " --applied-policy-file: it publishes that Topology Manager policy and scope).",
)
@click.option("--plugin-uid", type=int, default=None, help="Uid plugin processes must run as (default: ours).")
@click.option("--plugin-timeout", type=float, default=0.25, show_default=True, help="Per-call deadline, seconds.")
@click.option("--nri-plugin-name", default="numaplane", show_default=True)
@click.option("--nri-plugin-index", default="50", show_default=True, help="Two digits; plugins run in ascending order.")
@click.option("--config-poll-interval", type=float, default=1.0, show_default=True, help="Seconds.")
@click.option(
    "--watch-pods/--no-watch-pods",
    default=False,
    show_default=True,
    help="Read this node's Pods from the API (read-only): whole-pod admission as the kubelet's (init"
    " containers' CPUs reused, topology scope pod, pod-level resources), exact requests, extended resources.",
)
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster, else $KUBECONFIG."
)
@api_server_option
@click.option("--pod-name", envvar="POD_NAME", default="", help="This agent's pod (default: $POD_NAME).")
@click.option("--pod-namespace", envvar="POD_NAMESPACE", default="", help="Its namespace (default: $POD_NAMESPACE).")
@listener_options("agent")
@log_options
@click.option(
    "--kubelet-config",
    default=DEFAULT_KUBELET_CONFIG,
    show_default=True,
    help="The kubelet's KubeletConfiguration file, or an http(s) /configz URL (e.g. through kubectl proxy): "
    "the agent refuses to enforce while the kubelet's static CPU or Memory Manager is on. '' skips the check.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Only print what the kubelet runs and whether the agent may take over; exit 0 if it may, 1 if "
    "not, 2 if the kubelet configuration cannot be read.",
)
@click.pass_context
def command(ctx: click.Context, /, **kw: Any) -> None:
    """Run the node agent: decide every container's CPUs and memory nodes and apply them through NRI.

    The kubelet's CPU manager must be `none`: the agent is the only writer of cpusets. The kubelet must
    still reserve the CPUs the policy reserves (reservedSystemCPUs, or systemReserved/kubeReserved cpu),
    so that node allocatable CPU leaves them out; with --watch-pods the agent warns at start if it does
    not (pods it cannot pin would be admitted and loop in CreateContainerError). It keeps its
    state in --state-dir (atomic, checksummed; a bad file is moved aside and the state rebuilt from
    the runtime), serves the kubelet PodResources API on --podresources-socket for exporters, accepts
    out-of-process plugins in --plugin-dir, reloads --config when it changes, and touches --notify-file
    after every allocation change so that an exporter in events mode republishes at once. It writes
    the configuration in force to --applied-policy-file, which the exporter publishes as the node's
    Topology Manager policy and scope. With
    --watch-pods it also reports the policy revision it applied or rejected on its own pod
    (--pod-name/--pod-namespace, from the downward API).

    Example: numaplane agent --nri-socket /var/run/nri/nri.sock --config /etc/numaplane/node.yaml
    """
    from numaplane.agent.errors import AgentConfigError
    from numaplane.cli._output import InputError
    from numaplane.kube.clock import SystemClock
    from numaplane.observability.errors import AddressError, ObservabilityError
    from numaplane.observability.http import parse_address
    from numaplane.observability.logs import configure_logging

    if kw["check"]:
        _check_only(str(kw["kubelet_config"]))
        return
    if kw["config_file"] and not Path(str(kw["config_file"])).is_file():
        # checked before anything else (the state folder above all), whatever a checkpoint holds
        raise InputError(f"--config {kw['config_file']}: no such file")
    configure_logging(str(kw["log_format"]), str(kw["log_level"]))
    for flag in ("metrics_address", "health_address"):
        if kw[flag]:
            try:
                parse_address(str(kw[flag]))
            except AddressError as error:
                raise click.BadParameter(str(error), param_hint="--" + flag.replace("_", "-")) from error
    if not kw["watch_pods"] and (kw["pod_name"] or kw["pod_namespace"]):
        # Only --watch-pods gives the agent the API access that reporting on its own pod needs.
        given = [
            f"--{name.replace('_', '-')}"
            for name in ("pod_name", "pod_namespace")
            if kw[name] and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            raise click.UsageError(
                f"{' and '.join(given)} need --watch-pods (the policy revision is reported on the agent's pod"
                " through the API, which only --watch-pods opens)"
            )
        structlog.get_logger("numaplane.agent").warning(
            "POD_NAME/POD_NAMESPACE are set but --watch-pods is off: the policy revision is not reported on the"
            " agent's pod"
        )
    clock = SystemClock()  # the one time source the agent's timestamps read (passed down)
    _take_over_or_refuse(str(kw["kubelet_config"]), kw, clock)
    options = _options(kw)
    try:
        asyncio.run(_run(options, kw, clock))
    except AgentConfigError as error:
        raise click.ClickException(str(error)) from error
    except ObservabilityError as error:
        # e.g. the metrics or health port is taken: one line, exit 1, no traceback
        raise click.ClickException(str(error)) from error


def _check_only(where: str) -> None:
    """``--check``: print the take-over verdict as JSON; the exit code says it (see the option)."""
    import json

    from numaplane.agent.errors import AgentConfigError
    from numaplane.agent.takeover import check_source
    from numaplane.cli._output import InputError

    if not where:
        raise click.UsageError("--check needs --kubelet-config")
    try:
        verdict = check_source(where)
    except AgentConfigError as error:
        click.echo(json.dumps({"source": where, "mayTakeOver": None, "error": str(error)}, indent=2))
        raise InputError(str(error)) from None
    click.echo(json.dumps(verdict.to_dict(), indent=2))
    raise SystemExit(0 if verdict.may_take_over else 1)


def _take_over_or_refuse(where: str, kw: dict[str, Any], clock: Clock) -> None:
    """Before enforcing: refuse (exit 1 with the reasons, logged as ``takeover_refused``, and with
    --watch-pods written as a condition on the agent's pod) while the kubelet's static managers are
    on; a missing default file only warns (not every node has one)."""
    import structlog

    from numaplane.agent.errors import AgentConfigError
    from numaplane.agent.takeover import check_source
    from numaplane.cli._output import InputError

    log = structlog.get_logger("numaplane.agent")
    if not where:
        log.warning("takeover_unchecked", reason="--kubelet-config ''")
        return
    if where == DEFAULT_KUBELET_CONFIG and not Path(where).exists():
        log.warning("takeover_unchecked", reason=f"{where} not found; pass --kubelet-config")
        return
    try:
        verdict = check_source(where)
    except AgentConfigError as error:
        raise InputError(f"cannot verify the take-over: {error}") from error
    for warning in verdict.warnings:
        log.warning("takeover_warning", message=warning)
    if not verdict.may_take_over:
        log.error("takeover_refused", **verdict.to_dict())
        if kw.get("watch_pods") and kw.get("pod_name") and kw.get("pod_namespace"):
            asyncio.run(_report_refusal(kw, verdict, clock))
        raise click.ClickException(verdict.message())
    log.info("takeover", **verdict.to_dict())


async def _report_refusal(kw: dict[str, Any], verdict: Any, clock: Clock) -> None:
    """Best effort: the refusal as a condition and an Event on the agent's own pod (logged when not
    written), stamped with ``clock``'s time."""
    import structlog

    from numaplane.agent.takeover import report_verdict
    from numaplane.kube.errors import KubeError

    try:
        kube = _kube(kw)
    except click.ClickException as error:
        structlog.get_logger("numaplane.agent").warning("takeover_condition_not_written", error=error.message)
        return
    try:
        await report_verdict(
            kube,
            str(kw["pod_namespace"]),
            str(kw["pod_name"]),
            verdict,
            clock.now(),
            node_name=str(kw.get("node_name") or ""),
        )
    except KubeError as error:
        structlog.get_logger("numaplane.agent").warning("takeover_condition_not_written", error=str(error))
    finally:
        await kube.close()


def _kube(kw: dict[str, Any]) -> Any:
    """The Kubernetes API port for --watch-pods (click error when there is none)."""
    return daemon_port(kw["api_server"], kw["kubeconfig"], "no Kubernetes API for --watch-pods")


def _options(kw: dict[str, Any]) -> AgentOptions:
    """The agent's options from the parsed command line (``kw``: the click parameters)."""
    from numaplane.agent.daemon import AgentOptions

    return AgentOptions(
        nri_socket=str(kw["nri_socket"]),
        state_dir=Path(str(kw["state_dir"])),
        config_file=Path(str(kw["config_file"])) if kw["config_file"] else None,
        topology_file=Path(str(kw["topology_file"])) if kw["topology_file"] else None,
        sysfs_root=Path(str(kw["sysfs_root"])),
        node_name=str(kw["node_name"] or socket.gethostname()),
        podresources_socket=str(kw["podresources_socket"]) or None,
        plugin_dir=Path(str(kw["plugin_dir"])) if kw["plugin_dir"] else None,
        plugin_uid=kw["plugin_uid"],
        plugin_call_timeout_seconds=float(kw["plugin_timeout"]),
        metrics_address=str(kw["metrics_address"]) or None,
        health_address=str(kw["health_address"]) or None,
        nri_plugin_name=str(kw["nri_plugin_name"]),
        nri_plugin_index=str(kw["nri_plugin_index"]),
        config_poll_seconds=float(kw["config_poll_interval"]),
        notify_file=Path(str(kw["notify_file"])) if kw["notify_file"] else None,
        applied_policy_file=Path(str(kw["applied_policy_file"])) if kw["applied_policy_file"] else None,
        pod_name=str(kw["pod_name"] or ""),
        pod_namespace=str(kw["pod_namespace"] or ""),
    )


async def _run(options: Any, kw: dict[str, Any], clock: Clock) -> None:
    from numaplane.agent.daemon import Agent

    kube = _kube(kw) if kw["watch_pods"] else None
    agent = Agent(options, kube=kube, clock=clock)
    signals = StopSignals(agent.request_stop)
    try:
        await agent.run()
    finally:
        if kube is not None:
            await kube.close()
    signals.raise_if_interrupted()

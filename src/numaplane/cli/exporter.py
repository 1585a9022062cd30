"""``numaplane exporter``: publish this node's NodeResourceTopology (or print it once with ``--oneshot``)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from numaplane.cli._connect import api_server_option, daemon_port
from numaplane.cli._daemon import dra_option, listener_options, log_options
from numaplane.cli._output import InputError, emit_document
from numaplane.cli._signals import StopSignals

if TYPE_CHECKING:
    from numaplane.exporter.options import ExporterOptions

_REFRESH = ("periodic", "events", "both")


@click.command(name="exporter")
@click.option(
    "--node-name", envvar="NODE_NAME", default=None, help="Object name (default: $NODE_NAME, else the hostname)."
)
@click.option(
    "--podresources-socket",
    default="/var/lib/kubelet/pod-resources/kubelet.sock",
    show_default=True,
    help="PodResources socket (the kubelet's or numaplane agent's), a unix:// target, or fake://DIR: answers "
    "read from DIR/list.json and DIR/get_allocatable_resources.json (the PodResources List and "
    "GetAllocatableResources responses as proto3 JSON), to try the exporter without a kubelet.",
)
@click.option("--podresources-timeout", type=float, default=10.0, show_default=True, help="Per-call deadline, seconds.")
@click.option(
    "--sysfs-root", type=click.Path(file_okay=False), default="/", show_default=True, help="Folder holding sys/."
)
@click.option("--kubelet-config", type=click.Path(dir_okay=False), default=None, help="KubeletConfiguration YAML file.")
@click.option(
    "--topology-manager-policy",
    type=click.Choice(["none", "best-effort", "restricted", "single-numa-node"]),
    default=None,
    help="Overrides the kubelet config file.",
)
@click.option(
    "--topology-manager-scope", type=click.Choice(["container", "pod"]), default=None, help="Overrides the file."
)
@click.option(
    "--applied-policy-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Agent mode: the file numaplane agent writes the policy in force to (its --applied-policy-file); "
    "its Topology Manager policy and scope are published, and it is watched (a change republishes at once). "
    "Instead of --kubelet-config and the --topology-manager-* flags.",
)
@click.option("--reserved-cpus", default=None, help="Overrides reservedSystemCPUs (cpuset syntax).")
@click.option(
    "--refresh-mode",
    type=click.Choice(_REFRESH),
    default=None,
    help="Default: both with --notify-file or --kubelet-state-dir, else periodic.",
)
@click.option("--period", type=float, default=10.0, show_default=True, help="Periodic refresh, seconds.")
@click.option(
    "--heartbeat",
    type=float,
    default=30.0,
    show_default=True,
    help="Rewrite the NRT at least this often, seconds; schedulers treat it as stale after 3 heartbeats (0: off).",
)
@click.option("--notify-file", type=click.Path(dir_okay=False), default=None, help="Touch this file to refresh now.")
@click.option(
    "--kubelet-state-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Kubelet mode: the kubelet's root folder (/var/lib/kubelet). Its managers' checkpoints "
    "(cpu_manager_state, memory_manager_state, device-plugins/kubelet_internal_checkpoint) and "
    "--kubelet-config are watched: each change is a scan (refresh mode events or both).",
)
@click.option(
    "--kubelet-check-interval",
    type=float,
    default=5.0,
    show_default=True,
    help="With inotify, seconds between checks of the kubelet files that catch a lost event.",
)
@click.option("--notify-backend", type=click.Choice(["auto", "inotify", "poll"]), default="auto", show_default=True)
@click.option("--notify-poll-interval", type=float, default=0.05, show_default=True, help="Poll backend, seconds.")
@click.option(
    "--max-events-per-second",
    type=float,
    default=10.0,
    show_default=True,
    help="Scans per second at most (excess events are coalesced, not dropped); 0 = unlimited.",
)
@click.option("--exclude-pods", multiple=True, help="NAMESPACE_GLOB/NAME_GLOB or NAME_GLOB (repeatable).")
@click.option(
    "--exclude-terminal-pods/--include-terminal-pods",
    default=True,
    show_default=True,
    help="Drop Succeeded/Failed pods the kubelet still lists (needs the API server).",
)
@click.option("--watch-namespace", default=None, help="Only charge allocations of pods in this namespace.")
@click.option("--exclude-resource", multiple=True, help="Resource name to drop from every zone (repeatable).")
@dra_option(
    "Publish the node's DRA devices per zone (rows deviceclass.resource.kubernetes.io/<class>; needs the API server)."
)
@click.option(
    "--dra-numa-attribute",
    multiple=True,
    help="Driver-specific device NUMA attribute tried after resource.kubernetes.io/numaNode (repeatable).",
)
@click.option("--pods-fingerprint/--no-pods-fingerprint", default=True, show_default=True)
@click.option(
    "--pods-fingerprint-method",
    type=click.Choice(["all", "with-exclusive-resources"], case_sensitive=False),
    default="with-exclusive-resources",
    show_default=True,
)
@click.option("--owner-reference/--no-owner-reference", default=True, show_default=True, help="Owner: the Node.")
@click.option("--adopt", is_flag=True, help="Take over an existing object that has no managed-by label.")
@click.option("--no-publish", is_flag=True, help="Compute and serve metrics, never write.")
@click.option(
    "--lock-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="One exporter per node: hold an exclusive lock on this node-local file (created if missing). "
    "A second exporter with the same file waits (alive, not ready, logs the holder) instead of "
    "publishing the same object.",
)
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster, else $KUBECONFIG."
)
@api_server_option
@listener_options("exporter")
@log_options
@click.option("--oneshot", is_flag=True, help="Print the object that would be published and exit (no API server).")
@click.option("--output", "-o", type=click.Choice(["json", "yaml"]), default="json", show_default=True)
def command(**kw: Any) -> None:
    """Publish this node's NodeResourceTopology: per-NUMA-zone capacity, allocatable and available.

    Reads the kubelet's PodResources API (or numaplane agent's), sysfs and the kubelet config (or,
    on agent nodes, the policy the agent applied: --applied-policy-file);
    writes the object only when its content changed; serves /metrics, /healthz and /readyz; logs
    JSON lines to stderr.

    Without a kubelet (or numaplane agent) on this machine, point --podresources-socket at
    fake://DIR (see that option).

    \b
    Examples:
      numaplane exporter --oneshot --kubelet-config /var/lib/kubelet/config.yaml -o yaml
      numaplane exporter --oneshot --podresources-socket fake://answers/ \\
          --topology-manager-policy single-numa-node --topology-manager-scope container
    """
    from numaplane.exporter.errors import ExporterConfigError, ExporterError, KubeletConfigError
    from numaplane.observability.logs import configure_logging

    configure_logging(str(kw["log_format"]), str(kw["log_level"]))
    try:
        options = _options(kw)
    except (ExporterConfigError, ValueError) as error:
        raise click.UsageError(str(error)) from error
    if kw["oneshot"]:
        try:
            result = asyncio.run(_oneshot(options))
        except ExporterError as error:
            socket_path = options.podresources_socket
            if error.kind == "podresources_unavailable":
                missing = "://" not in socket_path and not Path(socket_path.removeprefix("unix:")).exists()
                raise click.ClickException(
                    f"cannot reach the PodResources API at {socket_path}"
                    + (" (no such socket)" if missing else f" ({' '.join(error.message.split())})")
                    + ": is a kubelet or numaplane agent running here? Give its socket with "
                    "--podresources-socket, or try the exporter without one: --podresources-socket fake://DIR "
                    "(see --help)"
                ) from error
            if isinstance(error, KubeletConfigError):  # --kubelet-config names an unusable file: bad input
                raise InputError(f"--kubelet-config: {' '.join(error.message.split())}") from error
            raise click.ClickException(f"{error.kind}: {' '.join(error.message.split())}") from error
        emit_document(result, str(kw["output"]))
        return
    try:
        asyncio.run(_daemon(options, kw))
    except ExporterConfigError as error:
        raise click.UsageError(str(error)) from error


def _options(kw: dict[str, Any]) -> ExporterOptions:
    from numaplane.exporter.options import ExporterOptions, NotifyBackend, RefreshMode
    from numaplane.nrt.fingerprint import parse_method
    from numaplane.topology.cpuset import CPUSet

    notify = Path(str(kw["notify_file"])) if kw["notify_file"] else None
    state_dir = Path(str(kw["kubelet_state_dir"])) if kw["kubelet_state_dir"] else None
    mode = kw["refresh_mode"] or ("both" if notify is not None or state_dir is not None else "periodic")
    reserved = CPUSet.parse(str(kw["reserved_cpus"])) if kw["reserved_cpus"] is not None else None
    excluded_resources = tuple(str(x) for x in kw["exclude_resource"])
    return ExporterOptions(
        node_name=str(kw["node_name"] or socket.gethostname()),
        podresources_socket=str(kw["podresources_socket"]),
        podresources_timeout_seconds=float(kw["podresources_timeout"]),
        sysfs_root=Path(str(kw["sysfs_root"])),
        kubelet_config_file=Path(str(kw["kubelet_config"])) if kw["kubelet_config"] else None,
        applied_policy_file=Path(str(kw["applied_policy_file"])) if kw["applied_policy_file"] else None,
        topology_manager_policy=_opt_str(kw["topology_manager_policy"]),
        topology_manager_scope=_opt_str(kw["topology_manager_scope"]),
        reserved_cpus=reserved,
        refresh_mode=RefreshMode(str(mode)),
        period_seconds=float(kw["period"]),
        heartbeat_seconds=float(kw["heartbeat"]),
        notify_file=notify,
        kubelet_state_dir=state_dir,
        kubelet_check_seconds=float(kw["kubelet_check_interval"]),
        notify_backend=NotifyBackend(str(kw["notify_backend"])),
        notify_poll_seconds=float(kw["notify_poll_interval"]),
        max_events_per_second=float(kw["max_events_per_second"]),
        pod_excludes=ExporterOptions.parse_excludes(str(x) for x in kw["exclude_pods"]),
        exclude_terminal_pods=bool(kw["exclude_terminal_pods"]),
        watch_namespace=_opt_str(kw["watch_namespace"]),
        resource_exclude={"*": excluded_resources} if excluded_resources else {},
        dra=bool(kw["dra"]),
        dra_numa_attributes=tuple(str(x) for x in kw["dra_numa_attribute"]),
        fingerprint=bool(kw["pods_fingerprint"]),
        fingerprint_method=parse_method(str(kw["pods_fingerprint_method"])),
        owner_reference=bool(kw["owner_reference"]),
        adopt=bool(kw["adopt"]),
        publish=not kw["no_publish"],
        metrics_address=_opt_str(kw["metrics_address"]) or None,
        health_address=_opt_str(kw["health_address"]) or None,
        lock_file=Path(str(kw["lock_file"])) if kw["lock_file"] else None,
    )


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


async def _oneshot(options: ExporterOptions) -> dict[str, Any]:
    from numaplane.exporter.daemon import Exporter

    result = await Exporter(options).oneshot()
    return result.nrt.to_dict()


async def _daemon(options: ExporterOptions, kw: dict[str, Any]) -> None:
    from numaplane.exporter.daemon import Exporter
    from numaplane.kube.port import KubePort

    kube: KubePort | None = None
    if options.publish or options.exclude_terminal_pods or options.dra:
        kube = daemon_port(kw["api_server"], kw["kubeconfig"])
    exporter = Exporter(options, kube=kube)
    signals = StopSignals(exporter.stop)
    try:
        await exporter.run()
    finally:
        if kube is not None:
            await kube.close()
    signals.raise_if_interrupted()


__all__ = ["command"]

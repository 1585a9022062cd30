"""``numaplane scheduler extender|run``: the NUMA-aware scheduler, as an extender or standalone.

Both subcommands read the same settings: ``--config FILE`` (YAML/JSON, the plugin args or a whole
KubeSchedulerConfiguration; see :mod:`numaplane.scheduler.config`), then flags override single values.
Every option can also be set through an environment variable ``NUMAPLANE_SCHEDULER_<RUN|EXTENDER>_<NAME>``
where NAME is the option's parameter name in upper case (e.g. ``NUMAPLANE_SCHEDULER_RUN_CACHE_MODE=passthrough``,
``NUMAPLANE_SCHEDULER_EXTENDER_ADDRESS=127.0.0.1:8888``). Logs are JSON lines on stderr. A configuration error is a
usage error (exit 2); losing the leader lease exits with 1, as kube-scheduler does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from numaplane.cli._connect import api_server_option, daemon_port
from numaplane.cli._daemon import dra_option, listener_options, log_options
from numaplane.cli._duration import Duration
from numaplane.cli._signals import StopSignals
from numaplane.placement.model.strategies import STRATEGY_TYPES

if TYPE_CHECKING:
    import ssl

    from numaplane.kube.port import KubePort
    from numaplane.scheduler.config import SchedulerConfig

F = TypeVar("F", bound=Callable[..., Any])

_STRATEGIES = STRATEGY_TYPES  # the one table of scoring strategies


def _common(func: F) -> F:
    options: list[Callable[[Any], Any]] = [
        click.option(
            "--config",
            "config_file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="Settings file (YAML/JSON): plugin args or a KubeSchedulerConfiguration.",
        ),
        click.option(
            "--scheduler-name",
            "scheduler_names",
            multiple=True,
            help="Our scheduler/profile name (repeatable). run: pods to schedule; extender: the kube-scheduler "
            "profiles that call us (pods of other names are foreign to the cache).",
        ),
        click.option(
            "--cache",
            "cache_mode",
            type=click.Choice(["passthrough", "overreserve", "discard-reserved"]),
            default=None,
            help="NRT cache mode (default: overreserve).",
        ),
        click.option(
            "--cache-resync-period",
            "--resync-period",
            "resync_period",
            type=Duration(),
            default=None,
            metavar="DURATION",
            help="Over-reserve resync period (5s, 1m30s, 250ms or seconds); 0 means the passthrough cache "
            "unless --cache says otherwise.",
        ),
        click.option("--scoring-strategy", type=click.Choice(_STRATEGIES), default=None, help="NUMA scoring strategy."),
        click.option(
            "--resource-weight",
            multiple=True,
            metavar="NAME=WEIGHT",
            help="Scoring weight of a resource (repeatable; default cpu=1, memory=1).",
        ),
        click.option(
            "--foreign-pods-detect", type=click.Choice(["None", "All", "OnlyExclusiveResources"]), default=None
        ),
        click.option(
            "--informer-mode",
            type=click.Choice(["shared", "dedicated"], case_sensitive=False),
            default=None,
            help="Which pods count for fingerprints: Running only (shared) or every bound non-Pending (dedicated).",
        ),
        click.option(
            "--kubelet-admission/--no-kubelet-admission",
            default=None,
            help="Also filter restricted / best-effort nodes the way the kubelet would admit.",
        ),
        click.option(
            "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster, else $KUBECONFIG."
        ),
        api_server_option,
        log_options,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _config(kw: dict[str, Any], default_names: tuple[str, ...]) -> SchedulerConfig:
    """The parsed options as a configuration (:func:`~numaplane.scheduler.settings.settings_from_options`)."""
    from numaplane.placement.model.errors import PlacementConfigError
    from numaplane.scheduler.errors import SchedulerConfigError
    from numaplane.scheduler.settings import settings_from_options

    try:
        return settings_from_options(
            default_names,
            config_file=kw["config_file"],
            scheduler_names=kw["scheduler_names"],
            scoring_strategy=kw["scoring_strategy"],
            resource_weight=kw["resource_weight"],
            cache_mode=kw["cache_mode"],
            resync_period=None if kw["resync_period"] is None else str(kw["resync_period"]),
            informer_mode=kw["informer_mode"],
            foreign_pods_detect=kw["foreign_pods_detect"],
            kubelet_admission=kw["kubelet_admission"],
        )
    except (SchedulerConfigError, PlacementConfigError) as exc:
        raise click.UsageError(str(exc)) from exc


def _check_addresses(*addresses: str | None) -> None:
    from numaplane.observability.errors import AddressError
    from numaplane.observability.http import parse_address

    for address in addresses:
        if address:
            try:
                parse_address(address)
            except AddressError as exc:
                raise click.UsageError(str(exc)) from exc


def _tls(kw: dict[str, Any]) -> ssl.SSLContext | None:
    from numaplane.observability.errors import TLSConfigError
    from numaplane.observability.tls import server_context

    cert, key, ca = kw["tls_cert_file"], kw["tls_private_key_file"], kw["client_ca_file"]
    if not cert and not key:
        if ca:
            raise click.UsageError("--client-ca-file needs --tls-cert-file and --tls-private-key-file")
        return None
    if not cert or not key:
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    try:
        return server_context(str(cert), str(key), str(ca) if ca else None)
    except TLSConfigError as exc:
        raise click.UsageError(str(exc)) from exc


def _client_subjects(kw: dict[str, Any]) -> tuple[str, ...] | None:
    """The allowed client subjects when client certificates are required (``None``: no mutual TLS)."""
    subjects = tuple(str(s) for s in kw["client_allowed_subjects"])
    source = click.get_current_context().get_parameter_source("client_allowed_subjects")
    if not kw["client_ca_file"]:
        if source is not click.core.ParameterSource.DEFAULT:
            raise click.UsageError("--client-allowed-subject needs --client-ca-file")
        return None
    if any(not s.strip() for s in subjects):
        raise click.UsageError("--client-allowed-subject: an empty subject")
    return subjects


def _kube(kw: dict[str, Any]) -> KubePort:
    return daemon_port(kw["api_server"], kw["kubeconfig"])


async def _serve(service: Any, kube: KubePort) -> int:
    signals = StopSignals(service.stop)
    try:
        code = int(await service.run())
    finally:
        await kube.close()
    signals.raise_if_interrupted()
    return code


@click.group(name="scheduler", context_settings={"auto_envvar_prefix": "NUMAPLANE_SCHEDULER"})
def group() -> None:
    """NUMA-aware scheduler: an extender for the stock kube-scheduler, or a standalone secondary scheduler."""


@group.command(name="extender")
@_common
@click.option(
    "--address",
    "--listen",
    "address",
    default="127.0.0.1:8888",
    show_default=True,
    help="HOST:PORT for the extender verbs (and /metrics, /healthz, /readyz unless given their own). "
    "Listening beyond localhost (e.g. :8888) exposes bind: serve TLS with --client-ca-file then.",
)
@click.option(
    "--tls-cert-file", type=click.Path(dir_okay=False), default=None, help="Serve HTTPS with this PEM certificate."
)
@click.option("--tls-private-key-file", type=click.Path(dir_okay=False), default=None, help="Its PEM private key.")
@click.option(
    "--client-ca-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Require client certificates signed by this PEM CA (kube-scheduler's extender tlsConfig certFile/keyFile).",
)
@click.option(
    "--client-allowed-subject",
    "client_allowed_subjects",
    multiple=True,
    default=("system:kube-scheduler",),
    show_default=True,
    help="With --client-ca-file: a client certificate's common name or subjectAltName that may call "
    "(repeat for more); any other client the CA signed gets HTTP 403.",
)
@click.option("--metrics-address", default=None, help="HOST:PORT for /metrics (default: on --address).")
@click.option("--health-address", default=None, help="HOST:PORT for /healthz, /readyz (default: on --address).")
@click.option("--url-prefix", default="", help="Path prefix of the verbs (the path part of the extender's urlPrefix).")
@dra_option(
    "Filter out nodes where no NUMA zone holds a pod's CPUs and memory with a free device of each of its claims."
)
def extender(**kw: Any) -> None:
    """Serve filter, prioritize and bind for kube-scheduler's `extenders:` configuration.

    Example: numaplane scheduler extender --address :8888 --scheduler-name default-scheduler
    """
    from numaplane.observability.logs import configure_logging
    from numaplane.scheduler.config import DEFAULT_EXTENDER_NAMES
    from numaplane.scheduler.service import ExtenderService

    config = dataclasses.replace(_config(kw, DEFAULT_EXTENDER_NAMES), dra=bool(kw["dra"]))
    _check_addresses(kw["address"], kw["metrics_address"], kw["health_address"])
    tls = _tls(kw)
    subjects = _client_subjects(kw)
    configure_logging(str(kw["log_format"]), str(kw["log_level"]))
    kube = _kube(kw)
    service = ExtenderService(
        kube,
        config,
        address=str(kw["address"]),
        prefix=str(kw["url_prefix"]),
        metrics_address=kw["metrics_address"] or None,
        health_address=kw["health_address"] or None,
        freeze_gc=True,
        tls=tls,
        client_subjects=subjects,
        start_decode_workers=True,
    )
    code = asyncio.run(_serve(service, kube))
    if code:
        raise SystemExit(code)


@group.command(name="run")
@_common
@listener_options("scheduler")
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True, help="Lease leader election.")
@dra_option(
    "Allocate pods' DRA ResourceClaims (exact counts of a DeviceClass, CEL selectors) in the zone of their CPUs."
)
@click.option(
    "--leader-elect-lease-name", "--leader-election-lease", "leader_elect_lease_name", default="numaplane-scheduler"
)
@click.option(
    "--leader-elect-namespace", "--leader-election-namespace", "leader_elect_namespace", default="kube-system"
)
@click.option("--leader-elect-identity", default=None, help="Default: <hostname>_<uuid>.")
@click.option("--leader-elect-lease-duration", type=float, default=15.0, show_default=True, help="Seconds.")
@click.option("--leader-elect-renew-deadline", type=float, default=10.0, show_default=True, help="Seconds.")
@click.option("--leader-elect-retry-period", type=float, default=2.0, show_default=True, help="Seconds.")
def run(**kw: Any) -> None:
    """Schedule pods whose spec.schedulerName is ours (default: numaplane-scheduler).

    Example: numaplane scheduler run --leader-elect --cache overreserve --resync-period 5
    """
    from numaplane.kube.leader import LeaderElectionConfig
    from numaplane.observability.logs import configure_logging
    from numaplane.scheduler.config import DEFAULT_SCHEDULER_NAME
    from numaplane.scheduler.service import SchedulerService, default_identity

    config = dataclasses.replace(_config(kw, (DEFAULT_SCHEDULER_NAME,)), dra=bool(kw["dra"]))
    _check_addresses(kw["metrics_address"], kw["health_address"])
    leader: LeaderElectionConfig | None = None
    if kw["leader_elect"]:
        try:
            leader = LeaderElectionConfig(
                lease_name=str(kw["leader_elect_lease_name"]),
                namespace=str(kw["leader_elect_namespace"]),
                identity=str(kw["leader_elect_identity"] or default_identity()),
                lease_duration_seconds=float(kw["leader_elect_lease_duration"]),
                renew_deadline_seconds=float(kw["leader_elect_renew_deadline"]),
                retry_period_seconds=float(kw["leader_elect_retry_period"]),
            )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
    configure_logging(str(kw["log_format"]), str(kw["log_level"]))
    kube = _kube(kw)
    service = SchedulerService(
        kube,
        config,
        leader_election=leader,
        metrics_address=str(kw["metrics_address"]) or None,
        health_address=str(kw["health_address"]) or None,
        freeze_gc=True,
    )
    code = asyncio.run(_serve(service, kube))
    if code:
        raise click.ClickException("leader election lost")


__all__ = ["group"]

"""The exporter's options as one frozen value, validated as a whole.

Units are in the names (seconds, per second). Defaults follow the upstream exporter (RTE) where
users depend on them and deviate where users complained (``../shared/reference/operator-rte-nrt.md``
§F): terminal pods are excluded by default, excess events are coalesced instead of dropped, the
refresh period is 10 s but a periodic refresh writes only when the object changed.

Pod excludes are ``NAMESPACE_GLOB/NAME_GLOB`` (``fnmatch`` syntax, case-sensitive); a pattern
without ``/`` matches the pod name in every namespace. Excluded pods count neither in the zones nor
in the fingerprint, as RTE's ``podExclude``.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.kubelet import TOPOLOGY_MANAGER_POLICIES, TOPOLOGY_MANAGER_SCOPES
from numaplane.grpcapi.podresources.client import DEFAULT_SOCKET
from numaplane.nrt.fingerprint import METHOD_WITH_EXCLUSIVE_RESOURCES, Method
from numaplane.observability.errors import AddressError
from numaplane.observability.http import parse_address as observability_parse_address
from numaplane.topology.cpuset import CPUSet

__all__ = ["ExporterOptions", "NotifyBackend", "PodExclude", "RefreshMode", "parse_address"]


class RefreshMode(enum.StrEnum):
    """When the exporter scans: on a timer, on notify-file events, or both."""

    PERIODIC = "periodic"
    EVENTS = "events"
    BOTH = "both"

    @property
    def periodic(self) -> bool:
        return self is not RefreshMode.EVENTS

    @property
    def events(self) -> bool:
        return self is not RefreshMode.PERIODIC


class NotifyBackend(enum.StrEnum):
    """How the notify file is watched: inotify (``asyncinotify``) when available, else mtime polling."""

    AUTO = "auto"
    INOTIFY = "inotify"
    POLL = "poll"


@dataclass(frozen=True, slots=True)
class PodExclude:
    """``NAMESPACE_GLOB/NAME_GLOB``; both are ``fnmatch`` patterns matched case-sensitively."""

    namespace: str
    name: str

    @staticmethod
    def parse(text: str) -> PodExclude:
        if not text or text.count("/") > 1:
            raise ExporterConfigError(f"pod exclude {text!r}: expected NAMESPACE_GLOB/NAME_GLOB or NAME_GLOB")
        namespace, _, name = text.rpartition("/")
        if not name:
            raise ExporterConfigError(f"pod exclude {text!r}: empty name pattern")
        return PodExclude(namespace or "*", name)

    def matches(self, namespace: str, name: str) -> bool:
        return fnmatch.fnmatchcase(namespace, self.namespace) and fnmatch.fnmatchcase(name, self.name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host means all interfaces) → ``(host, port)``."""
    try:
        return observability_parse_address(text)
    except AddressError as error:
        raise ExporterConfigError(str(error)) from None


@dataclass(frozen=True, slots=True)
class ExporterOptions:
    """Everything that configures one exporter (one node). See the CLI help for each field's meaning.

    ``kubelet_state_dir``: the kubelet's root folder (``/var/lib/kubelet``), whose manager
    checkpoints are watched in the events refresh modes (a change is a scan, at the latest
    ``kubelet_check_seconds`` after it when an inotify event was lost); the kubelet config file is
    watched too. ``podresources_socket``: a socket path, ``unix://`` target, or ``fake://<dir>`` (JSON files
    ``list.json`` and ``get_allocatable_resources.json``, as RTE's fake client). ``sysfs_root``:
    the folder holding ``sys/`` (``/`` on a node). ``max_events_per_second``: scans per second at
    most (token bucket of ``event_burst`` tokens; 0 = unlimited). ``retry_*_seconds``: back-off
    after a failed cycle, doubling from the initial to the maximum value.
    """

    node_name: str
    podresources_socket: str = DEFAULT_SOCKET
    podresources_timeout_seconds: float = 10.0
    sysfs_root: Path = Path("/")
    kubelet_config_file: Path | None = None
    #: Agent mode: the policy the agent enforces now (:mod:`numaplane.exporter.applied`), watched.
    applied_policy_file: Path | None = None
    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None
    reserved_cpus: CPUSet | None = None
    refresh_mode: RefreshMode = RefreshMode.PERIODIC
    period_seconds: float = 10.0
    notify_file: Path | None = None
    kubelet_state_dir: Path | None = None
    kubelet_check_seconds: float = 5.0
    notify_backend: NotifyBackend = NotifyBackend.AUTO
    notify_poll_seconds: float = 0.05
    max_events_per_second: float = 10.0
    event_burst: int = 1
    pod_excludes: tuple[PodExclude, ...] = ()
    exclude_terminal_pods: bool = True
    watch_namespace: str | None = None
    resource_exclude: Mapping[str, Sequence[str]] = field(default_factory=dict, hash=False)
    #: Publish the node's DRA devices per zone (rows ``deviceclass.resource.kubernetes.io/<class>``,
    #: :mod:`numaplane.exporter.dra`); needs the API server.
    dra: bool = False
    #: Driver-specific NUMA attributes tried after ``resource.kubernetes.io/numaNode`` (qualified names).
    dra_numa_attributes: tuple[str, ...] = ()
    fingerprint: bool = True
    fingerprint_method: Method = METHOD_WITH_EXCLUSIVE_RESOURCES
    owner_reference: bool = True
    adopt: bool = False
    publish: bool = True
    #: Rewrite the object at least this often, content unchanged or not (0: never; then no
    #: staleness bound is published; :mod:`numaplane.exporter.publisher`).
    heartbeat_seconds: float = 30.0
    retry_initial_seconds: float = 0.2
    retry_max_seconds: float = 10.0
    metrics_address: str | None = None
    health_address: str | None = None
    #: One exporter per node: an exclusive ``flock`` on this node-local file (:mod:`numaplane.exporter.nodelock`).
    lock_file: Path | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ExporterConfigError` naming the first inconsistent option."""
        if not self.node_name:
            raise ExporterConfigError("node name is empty (set --node-name or NODE_NAME)")
        if self.refresh_mode.events and self.notify_file is None and self.kubelet_state_dir is None:
            raise ExporterConfigError(
                f"refresh mode {self.refresh_mode.value!r} needs an event source: a notify file (agent mode) "
                "or the kubelet's state folder (kubelet mode)"
            )
        if self.kubelet_state_dir is not None and self.kubelet_config_file is None:
            raise ExporterConfigError(
                "the kubelet's state folder is watched in kubelet mode only: give --kubelet-config too "
                "(on agent nodes the agent's notify file is the event source)"
            )
        if not self.kubelet_check_seconds > 0:
            raise ExporterConfigError("kubelet state check interval must be > 0 s")
        if self.refresh_mode.periodic and not self.period_seconds > 0:
            raise ExporterConfigError(f"refresh mode {self.refresh_mode.value!r} needs a period > 0 s")
        if self.heartbeat_seconds < 0:
            raise ExporterConfigError("heartbeat must be >= 0 s (0 = no heartbeat, no staleness bound)")
        if self.max_events_per_second < 0:
            raise ExporterConfigError("max events per second must be >= 0 (0 = unlimited)")
        if self.event_burst < 1:
            raise ExporterConfigError("event burst must be >= 1")
        if not self.notify_poll_seconds > 0:
            raise ExporterConfigError("notify poll interval must be > 0 s")
        if not 0 < self.retry_initial_seconds <= self.retry_max_seconds:
            raise ExporterConfigError("retry back-off must satisfy 0 < initial <= maximum")
        if not self.podresources_timeout_seconds > 0:
            raise ExporterConfigError("podresources timeout must be > 0 s")
        for name in self.dra_numa_attributes:
            if "/" not in name or not name.split("/", 1)[1]:
                raise ExporterConfigError(
                    f"--dra-numa-attribute {name!r}: give a qualified name (<driver domain>/<attribute>)"
                )
        for address in (self.metrics_address, self.health_address):
            if address:
                parse_address(address)
        if self.topology_manager_policy is not None and self.topology_manager_policy not in TOPOLOGY_MANAGER_POLICIES:
            raise ExporterConfigError(
                f"topology manager policy {self.topology_manager_policy!r} is not one of "
                f"{', '.join(TOPOLOGY_MANAGER_POLICIES)}"
            )
        if self.topology_manager_scope is not None and self.topology_manager_scope not in TOPOLOGY_MANAGER_SCOPES:
            raise ExporterConfigError(
                f"topology manager scope {self.topology_manager_scope!r} is not one of "
                f"{', '.join(TOPOLOGY_MANAGER_SCOPES)}"
            )
        has_tm_flags = self.topology_manager_policy is not None and self.topology_manager_scope is not None
        if self.applied_policy_file is not None:
            if self.kubelet_config_file is not None:
                raise ExporterConfigError(
                    "--applied-policy-file (agent mode: the agent's policy) and --kubelet-config (kubelet mode) "
                    "exclude each other"
                )
            if self.topology_manager_policy is not None or self.topology_manager_scope is not None:
                raise ExporterConfigError(
                    "--applied-policy-file says the Topology Manager policy and scope the agent enforces: "
                    "drop --topology-manager-policy/--topology-manager-scope"
                )
        elif self.kubelet_config_file is None and not has_tm_flags:
            raise ExporterConfigError(
                "the Topology Manager configuration is unknown: give --kubelet-config, --applied-policy-file "
                "(agent mode) or both --topology-manager-policy and --topology-manager-scope"
            )

    def excluded(self, namespace: str, name: str) -> bool:
        """Whether the pod matches one of :attr:`pod_excludes`."""
        return any(rule.matches(namespace, name) for rule in self.pod_excludes)

    @staticmethod
    def parse_excludes(patterns: Iterable[str]) -> tuple[PodExclude, ...]:
        return tuple(PodExclude.parse(p) for p in patterns)

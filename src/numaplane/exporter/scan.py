"""One scan: read the inputs, filter the pods, compute the zones and the fingerprint, build the object.

Inputs come in two speeds:

* *fast* — the PodResources ``GetAllocatableResources`` and ``List`` answers, read on every scan.
  Any failure abandons the scan (the error propagates; nothing is published, so the last good
  object stays on the server);
* *slow* — the machine view (sysfs) and the kubelet settings (config file + flags; in agent mode the
  agent's applied policy file instead), read at the first scan and again when a scan is asked to
  ``refresh`` (periodic ticks, a changed kubelet config or applied policy file). A failed re-read is
  reported through ``on_error`` and the previous good value is kept; with no good value yet the
  scan fails. A PodResources answer that contradicts the machine marks the machine view stale,
  so the next scan re-reads sysfs (CPU hot-plug) before judging again.

Pod filtering, in order: pods matching an exclude glob, then terminal pods (``Succeeded`` /
``Failed`` according to the API server, from ``terminal_pods()``; the kubelet's ``List`` may still
report them, kubernetes/kubernetes#119423 and #132020). Filtered pods count neither in the zones nor
in the fingerprint. ``--watch-namespace`` restricts only the zone accounting, as upstream.

If the PodResources server does not implement ``GetAllocatableResources`` (kubelet < 1.23 or its
feature gate off), the allocatable CPUs fall back to the machine's online CPUs minus the kubelet's
``reservedSystemCPUs``; devices and memory then have no allocatable rows (logged once).

The built object (:class:`ScanResult.nrt`) carries the label
``app.kubernetes.io/managed-by: numaplane-exporter``, the fingerprint attribute, method attribute and
annotation, and the Topology Manager policy and scope attributes. It carries no owner reference and
no trigger annotation: the publisher adds those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any, Final

import structlog

from numaplane.exporter.applied import AppliedPolicySource
from numaplane.exporter.errors import ExporterError, MalformedPodResources, PodResourcesSourceError
from numaplane.exporter.kubelet import KubeletConfigSource
from numaplane.exporter.options import ExporterOptions
from numaplane.exporter.sources import MachineSource, PodResourcesSource, check_consistency
from numaplane.kube.kubeletconfig import KubeletConfiguration
from numaplane.nrt.fingerprint import compute_fingerprint, select_pods
from numaplane.nrt.model import NodeResourceTopology
from numaplane.nrt.podresources import AllocatableResources, ContainerDevices, PodResources
from numaplane.nrt.zones import MachineView, ZoneConfig, compute_zones, make_nrt

__all__ = ["MANAGED_BY", "MANAGED_BY_LABEL", "DRADevices", "ScanResult", "Scanner", "TerminalPods"]

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "numaplane-exporter"

#: The node's DRA device groups ``(allocatable, used)`` (:meth:`numaplane.exporter.dra.DRAInventory.groups`).
DRADevices = Callable[[], tuple[tuple[ContainerDevices, ...], tuple[ContainerDevices, ...]]]

#: The ``(namespace, name)`` pairs of the node's pods whose phase is ``Succeeded`` or ``Failed``.
TerminalPods = Callable[[], AbstractSet[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The object to publish and what went into it (pod counts are after each filter)."""

    nrt: NodeResourceTopology
    pods_listed: int
    pods_excluded: int
    pods_terminal: int
    fingerprint: str | None
    settings: KubeletConfiguration


class Scanner:
    """Builds the node's NodeResourceTopology from its inputs (see the module docstring)."""

    def __init__(
        self,
        options: ExporterOptions,
        podresources: PodResourcesSource,
        *,
        machine_source: MachineSource | None = None,
        kubelet_source: KubeletConfigSource | None = None,
        terminal_pods: TerminalPods | None = None,
        on_error: Callable[[ExporterError], None] | None = None,
        dra: DRADevices | None = None,
    ) -> None:
        self.options = options
        self.podresources = podresources
        self.machine_source = machine_source or MachineSource(options.sysfs_root)
        if kubelet_source is None and options.applied_policy_file is not None:
            kubelet_source = AppliedPolicySource(options.applied_policy_file)
        elif kubelet_source is None and options.kubelet_config_file is not None:
            kubelet_source = KubeletConfigSource(options.kubelet_config_file)
        self.kubelet_source = kubelet_source
        self.terminal_pods = terminal_pods
        self.dra = dra
        self._on_error = on_error or (lambda error: None)
        self._zone_config = ZoneConfig(
            resource_exclude={k: tuple(v) for k, v in options.resource_exclude.items()},
            namespace=options.watch_namespace,
        )
        self.machine: MachineView | None = None
        self.settings: KubeletConfiguration | None = None
        self._machine_stale = False
        self._fallback_logged = False
        self._log = structlog.get_logger("numaplane.exporter").bind(node=options.node_name)

    # ------------------------------------------------------------------ slow inputs

    def refresh_machine(self) -> MachineView:
        """Re-read sysfs; on failure report it and keep the previous view (raise if there is none)."""
        try:
            self.machine = self.machine_source.read()
            self._machine_stale = False
        except ExporterError as error:
            if self.machine is None:
                raise
            self._on_error(error)
        return self.machine

    def refresh_settings(self) -> KubeletConfiguration:
        """Re-read the kubelet config file (if any) and apply the flags; keep the previous value on failure."""
        opts = self.options
        try:
            base = self.kubelet_source.read() if self.kubelet_source is not None else KubeletConfiguration()
        except ExporterError as error:
            if self.settings is not None:
                self._on_error(error)
                return self.settings
            if opts.topology_manager_policy is None or opts.topology_manager_scope is None:
                raise
            # the flags say everything that is published; the file only adds the reserved CPUs
            self._on_error(error)
            base = KubeletConfiguration()
        self.settings = base.overridden(
            policy=opts.topology_manager_policy, scope=opts.topology_manager_scope, reserved_cpus=opts.reserved_cpus
        )
        return self.settings

    # ------------------------------------------------------------------ scan

    async def scan(self, *, refresh: bool = False) -> ScanResult:
        """One scan; ``refresh`` re-reads the slow inputs first. Raises :class:`ExporterError` subclasses."""
        machine = self.refresh_machine() if refresh or self.machine is None or self._machine_stale else self.machine
        settings = self.refresh_settings() if refresh or self.settings is None else self.settings
        allocatable = await self._allocatable(machine, settings)
        pods = tuple(await self.podresources.list_pods())
        try:
            check_consistency(machine, allocatable, pods)
        except MalformedPodResources:
            self._machine_stale = True
            raise
        kept, excluded, terminal = self._filter(pods)
        opts = self.options
        dra_used: tuple[ContainerDevices, ...] = ()
        if self.dra is not None:
            dra_allocatable, dra_used = self.dra()
            allocatable = replace(allocatable, devices=allocatable.devices + dra_allocatable)
        zones = compute_zones(opts.node_name, machine, allocatable, kept, self._zone_config, dra_used)
        fingerprint = compute_fingerprint(select_pods(kept, opts.fingerprint_method)) if opts.fingerprint else None
        nrt = make_nrt(
            opts.node_name,
            zones,
            topology_manager_policy=settings.topology_manager_policy,
            topology_manager_scope=settings.topology_manager_scope,
            fingerprint=fingerprint,
            fingerprint_method=opts.fingerprint_method if fingerprint is not None else None,
        )
        labels: dict[str, str] = {**nrt.metadata.labels, MANAGED_BY_LABEL: MANAGED_BY}
        nrt = replace(nrt, metadata=replace(nrt.metadata, labels=labels))
        return ScanResult(nrt, len(pods), excluded, terminal, fingerprint, settings)

    async def _allocatable(self, machine: MachineView, settings: KubeletConfiguration) -> AllocatableResources:
        try:
            return await self.podresources.allocatable()
        except PodResourcesSourceError as error:
            if error.kind != "podresources_unsupported":
                raise
        online = 0
        for node in machine.numa_nodes:
            online |= node.cpus.mask
        cpus = online & ~settings.reserved_system_cpus.mask
        if not self._fallback_logged:
            self._fallback_logged = True
            self._log.warning(
                "podresources_allocatable_unsupported",
                fallback="online CPUs minus reservedSystemCPUs; no device or memory rows",
                reserved_cpus=settings.reserved_system_cpus.format(),
            )
        return AllocatableResources(cpu_ids=tuple(i for i in range(cpus.bit_length()) if cpus >> i & 1))

    def _filter(self, pods: Sequence[PodResources]) -> tuple[tuple[PodResources, ...], int, int]:
        opts = self.options
        kept = [p for p in pods if not opts.excluded(p.namespace, p.name)]
        excluded = len(pods) - len(kept)
        terminal = 0
        if opts.exclude_terminal_pods and self.terminal_pods is not None:
            done = self.terminal_pods()
            if done:
                before = len(kept)
                kept = [p for p in kept if (p.namespace, p.name) not in done]
                terminal = before - len(kept)
        return tuple(kept), excluded, terminal

    def describe(self) -> dict[str, Any]:
        """The current slow inputs, for logs and the readiness document."""
        return {
            "machine_numa_nodes": [n.id for n in self.machine.numa_nodes] if self.machine else None,
            "kubelet": self.settings.to_dict() if self.settings else None,
        }

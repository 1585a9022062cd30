"""The inputs of the zone computation (:mod:`numaplane.nrt.zones`) other than the PodResources answers.

:class:`MachineView`: what the exporter reads from sysfs per NUMA node (CPUs, distances, MemTotal and
hugepages, bytes); :class:`ZoneConfig`: the exporter options that change the zones. Both are plain
immutable values; ``from_dict`` readers raise :class:`~numaplane.nrt.errors.ZoneInputError` with the
JSON path of the bad field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numaplane.nrt.errors import ZoneInputError
from numaplane.nrt.model import Attribute
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.model import Topology

__all__ = ["MachineView", "NUMANodeView", "ZoneConfig"]


@dataclass(frozen=True, slots=True)
class NUMANodeView:
    """What the exporter reads from sysfs for one NUMA node (bytes; 0 = unknown)."""

    id: int
    cpus: CPUSet = field(default_factory=CPUSet)
    distances: Mapping[int, int] = field(default_factory=dict, hash=False)
    memory_bytes: int = 0
    hugepages_bytes: Mapping[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class MachineView:
    """The NUMA nodes of the machine, ascending by id."""

    numa_nodes: tuple[NUMANodeView, ...]

    @staticmethod
    def from_topology(topology: Topology) -> MachineView:
        """From the machine model (online CPUs, MemTotal, hugepages totals, SLIT distances)."""
        nodes = []
        for node in sorted(topology.numa_nodes, key=lambda n: n.id):
            pages: dict[str, int] = {}
            for hp in node.hugepages:
                pages[hp.resource_name] = pages.get(hp.resource_name, 0) + hp.total_bytes
            nodes.append(NUMANodeView(node.id, node.cpus, dict(node.distances), node.memory_total_bytes, pages))
        return MachineView(tuple(nodes))

    @staticmethod
    def from_dict(doc: Any) -> MachineView:
        """``{"numa_nodes": [{"id", "cpus": "<set>", "distances": {"<id>": d}, "memory"?, "hugepages"?}]}``."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("numa_nodes"), list):
            raise ZoneInputError("$.machine.numa_nodes", "expected a list")
        nodes = []
        for i, item in enumerate(doc["numa_nodes"]):
            where = f"$.machine.numa_nodes[{i}]"
            try:
                nodes.append(
                    NUMANodeView(
                        int(item["id"]),
                        CPUSet.parse(str(item.get("cpus", ""))),
                        {int(k): int(v) for k, v in (item.get("distances") or {}).items()},
                        int(item.get("memory") or 0),
                        {str(k): int(v) for k, v in (item.get("hugepages") or {}).items()},
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                raise ZoneInputError(where, str(error)) from error
        return MachineView(tuple(sorted(nodes, key=lambda n: n.id)))


@dataclass(frozen=True, slots=True)
class ZoneConfig:
    """Exporter options that change the zones.

    ``resource_exclude``: ``{node name or "*": [resource names]}``. ``namespace``: only pods of this
    namespace are charged (RTE ``--watch-namespace``). ``shared_pool_cpus``: subtracted from every
    reported CPU set (RTE's reference container). ``zone_attributes``: attributes per NUMA id.
    """

    resource_exclude: Mapping[str, Sequence[str]] = field(default_factory=dict, hash=False)
    namespace: str | None = None
    shared_pool_cpus: CPUSet | None = None
    zone_attributes: Mapping[int, Sequence[Attribute]] = field(default_factory=dict, hash=False)

    def excluded(self, node_name: str) -> frozenset[str]:
        return frozenset(self.resource_exclude.get("*", ())) | frozenset(self.resource_exclude.get(node_name, ()))

    @staticmethod
    def from_dict(doc: Any) -> ZoneConfig:
        """``{"resource_exclude": {...}, "namespace"?: str}`` (other keys are ignored)."""
        if doc is None:
            return ZoneConfig()
        if not isinstance(doc, Mapping):
            raise ZoneInputError("$.config", "expected an object")
        excludes = doc.get("resource_exclude") or {}
        if not isinstance(excludes, Mapping) or not all(isinstance(v, list) for v in excludes.values()):
            raise ZoneInputError("$.config.resource_exclude", "expected {node: [resource names]}")
        return ZoneConfig({str(k): tuple(str(x) for x in v) for k, v in excludes.items()}, doc.get("namespace"))

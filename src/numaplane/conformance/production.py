"""The production paths the conformance kinds also run through (see :mod:`numaplane.conformance.runner`).

* :func:`scheduler_state` — a :class:`~numaplane.scheduler.state.SchedulerState` (passthrough cache, as the
  cases assume) fed the case's Node and NRT objects the way its informers feed it; decisions then come
  from the vectorised :class:`~numaplane.placement.arrays.pipeline.Pipeline` (kernels, LeastNUMANodes search),
  exactly what the extender and the standalone scheduler run.
* :func:`scan_zones` — the exporter's :class:`~numaplane.exporter.scan.Scanner` over in-memory
  PodResources and sysfs sources holding the case's responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from numaplane.exporter.options import ExporterOptions
from numaplane.exporter.scan import Scanner
from numaplane.nrt.model import Zone
from numaplane.nrt.podresources import AllocatableResources, PodResources, allocatable_from_dict, list_from_dict
from numaplane.nrt.zones import MachineView
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.state import SchedulerState

__all__ = ["scan_zones", "scheduler_state"]


def _named(doc: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """``doc`` with ``metadata.name`` set to ``name`` (the informers key objects by name)."""
    if not isinstance(doc, Mapping):
        return None
    out = dict(doc)
    meta = out.get("metadata")
    out["metadata"] = {**(meta if isinstance(meta, Mapping) else {}), "name": name}
    return out


def scheduler_state(
    nodes: Mapping[str, tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]],
    strategy: ScoringStrategy | None = None,
) -> SchedulerState:
    """A scheduler state knowing ``nodes`` (name → (NRT or None, Node)), synced and ready to evaluate."""
    state = SchedulerState(SchedulerConfig(strategy=strategy or ScoringStrategy(), cache_mode="passthrough"))
    for name, (nrt, node) in nodes.items():
        node_doc = _named(node, name) or {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        state.node_upserted(node_doc)
        nrt_doc = _named(nrt, name)
        if nrt_doc is not None:
            state.nrt_upserted(nrt_doc)
    state.sync()
    return state


class _Responses:
    """A PodResources source answering with fixed responses."""

    def __init__(self, allocatable: AllocatableResources, pods: Sequence[PodResources]) -> None:
        self._allocatable = allocatable
        self._pods = tuple(pods)

    async def list_pods(self) -> Sequence[PodResources]:
        return self._pods

    async def allocatable(self) -> AllocatableResources:
        return self._allocatable

    async def close(self) -> None:
        return None


class _Machine:
    """A sysfs source answering with a fixed machine view."""

    def __init__(self, machine: MachineView) -> None:
        self._machine = machine

    def read(self) -> MachineView:
        return self._machine


def scan_zones(
    node_name: str, machine: Any, allocatable: Any, list_response: Any, config: Mapping[str, Any] | None
) -> tuple[Zone, ...]:
    """The zones one exporter scan publishes for these inputs (SCHEMA.md §4.8 JSON)."""
    exclude = (config or {}).get("resource_exclude") or {}
    namespace = (config or {}).get("namespace")
    options = ExporterOptions(
        node_name=node_name,
        resource_exclude={str(k): tuple(v) for k, v in exclude.items()},
        watch_namespace=None if namespace is None else str(namespace),
        topology_manager_policy="none",
        topology_manager_scope="container",
    )
    source = _Responses(allocatable_from_dict(allocatable, "$.allocatable"), list_from_dict(list_response, "$.list"))
    scanner = Scanner(options, source, machine_source=_Machine(MachineView.from_dict(machine)))  # type: ignore[arg-type]
    result = asyncio.run(scanner.scan())
    return result.nrt.zones

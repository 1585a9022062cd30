"""The part of a core/v1 Node the NUMA filter reads: its name and which resources it advertises.

The plugin looks a requested resource up in the scheduler's node allocatable list, which always holds
``cpu``, ``memory``, ``pods`` and ``ephemeral-storage`` (possibly 0) plus every *scalar* resource of
``status.allocatable``: names with a ``/`` (extended and ``kubernetes.io/`` prefixed resources, except
``requests.``-prefixed non-native names), ``hugepages-*`` and ``attachable-volumes-*``. Any other bare
name in ``status.allocatable`` (for example ``gpu``) is dropped by the scheduler, so a pod requesting it
fails the NUMA filter on every node. Only presence matters; quantities are compared by NodeResourcesFit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.placement.model.errors import NodeDataError
from numaplane.placement.model.requests import ALWAYS_ALLOCATABLE
from numaplane.resources.errors import QuantityError
from numaplane.resources.pod import parse_shared_resource_list
from numaplane.resources.quantity import Quantity, parse_quantity

__all__ = ["NodeInfo", "is_scalar_resource", "node_info"]


def is_scalar_resource(name: str) -> bool:
    """Kubernetes scheduler ``IsScalarResourceName`` (extended, hugepages, prefixed native, volumes)."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.")


@dataclass(frozen=True)
class NodeInfo:
    """A node's name and ``status.allocatable`` (exact quantities)."""

    name: str
    allocatable: Mapping[str, Quantity] = field(default_factory=dict, hash=False)

    def advertises(self, resource: str) -> bool:
        """Whether the scheduler's node allocatable list has ``resource`` (presence only)."""
        return resource in ALWAYS_ALLOCATABLE or (resource in self.allocatable and is_scalar_resource(resource))


def node_info(doc: NodeInfo | Mapping[str, Any]) -> NodeInfo:
    """A :class:`NodeInfo` from core/v1 Node JSON (or itself). Raises :class:`NodeDataError`."""
    if isinstance(doc, NodeInfo):
        return doc
    if not isinstance(doc, Mapping):
        raise NodeDataError("?", f"expected a Node object, got {type(doc).__name__}")
    meta = doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise NodeDataError("?", "metadata.name missing")
    status = doc.get("status") or {}
    alloc = status.get("allocatable") if isinstance(status, Mapping) else None
    if alloc is None:
        alloc = {}
    if not isinstance(alloc, Mapping):
        raise NodeDataError(name, "status.allocatable is not an object")
    shared = parse_shared_resource_list(alloc)  # equal maps of many Nodes: one parsed map
    if shared is not None:
        return NodeInfo(name, shared)
    parsed: dict[str, Quantity] = {}
    for key, value in alloc.items():
        try:
            parsed[str(key)] = parse_quantity(value)
        except QuantityError as exc:
            raise NodeDataError(name, f"status.allocatable.{key}: {exc.reason}") from exc
    return NodeInfo(name, parsed)

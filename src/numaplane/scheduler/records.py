"""What :class:`~numaplane.scheduler.state.SchedulerState` keeps per node and pod, and their keys.

* :func:`object_name` / :func:`pod_key` — the names the informer objects are stored under;
* :class:`NodeRecord` — a Node as the informer last showed it, parsed for the NUMA filter and for the
  basic predicates.

No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numaplane.placement.explain.predicates import BasicNode
from numaplane.placement.model.node import NodeInfo as NumaNode

__all__ = ["TERMINAL_PHASES", "NodeRecord", "object_name", "pod_key"]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def object_name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") if isinstance(doc, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def pod_key(doc: Mapping[str, Any]) -> str:
    """``namespace/name`` of a Pod document (namespace ``default`` when absent)."""
    meta = doc.get("metadata") if isinstance(doc, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


@dataclass(frozen=True)
class NodeRecord:
    """A Node as the informer last showed it, parsed for the NUMA filter and for the basic predicates.

    ``numa``/``basic`` are ``None`` when the object does not parse; ``problem`` then says why, and the
    node fails every check with that reason.
    """

    name: str
    doc: Mapping[str, Any] = field(repr=False)
    numa: NumaNode | None
    basic: BasicNode | None
    problem: str | None = None

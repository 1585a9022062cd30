"""What :class:`~numaplane.scheduler.state.SchedulerState` keeps per node and pod, and their keys.

* :func:`object_name` / :func:`pod_key` — the names the informer objects are stored under;
* :class:`NodeRecord` — a Node as the informer last showed it, parsed for the NUMA filter and for the
  basic predicates;
* :class:`NodesLayout` — the nodes in name order with their fit-array rows, for the basic filter over
  every node at once.

No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from numaplane.placement.fit import FitArrays
from numaplane.placement.node import NodeInfo as NumaNode
from numaplane.placement.predicates import BasicNode, is_restricted

__all__ = ["TERMINAL_PHASES", "NodeRecord", "NodesLayout", "object_name", "pod_key"]

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


class NodesLayout:
    """The nodes in name order with their fit-array rows (-1: no usable Node object) and whether the
    node-level predicates can reject an unconstrained pod there (:func:`is_restricted`). Valid until a
    node is added, deleted, becomes (un)usable or (un)restricted."""

    __slots__ = ("names", "names_array", "restricted", "rows", "usable")

    def __init__(self, nodes: Mapping[str, NodeRecord], fit: FitArrays) -> None:
        self.names = tuple(sorted(nodes))
        self.names_array: npt.NDArray[np.object_] = np.array(self.names, dtype=object)
        rows = [fit.row(name) for name in self.names]
        self.rows: npt.NDArray[np.intp] = np.array([-1 if r is None else r for r in rows], dtype=np.intp)
        self.usable: npt.NDArray[np.bool_] = self.rows >= 0
        self.restricted: npt.NDArray[np.bool_] = np.array(
            [(basic := nodes[name].basic) is not None and is_restricted(basic) for name in self.names], dtype=np.bool_
        )

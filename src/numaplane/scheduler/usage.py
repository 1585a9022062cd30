"""Per-node resource usage as kube-scheduler's NodeResourcesFit sees it: bound pods plus assumed pods.

A pod counts on a node from the moment the scheduler *assumes* it there (before its binding reaches the
API server) until it is deleted or becomes terminal (``Succeeded`` / ``Failed``), exactly once: the
informer's view of a bound pod replaces the assumption under the same ``namespace/name`` key.

Invariants: every key is charged to at most one node; :meth:`NodeUsage.used` is the sum of the
effective requests (:meth:`numaplane.resources.pod.Pod.effective_requests`, overhead included) of the
node's pods; quantities are exact (counts for CPUs and devices, bytes for memory). Every node whose
pods changed since the last :meth:`NodeUsage.drain_changed` is in the set it returns (so a copy kept
elsewhere, such as the scheduler's fit arrays, can follow).
"""

from __future__ import annotations

from collections.abc import Mapping

from numaplane.resources.pod import add_resources
from numaplane.resources.quantity import Quantity

__all__ = ["NodeUsage"]


class NodeUsage:
    """Pods charged to nodes (module docstring). Pure bookkeeping, no I/O."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Mapping[str, Quantity]]] = {}
        self._where: dict[str, str] = {}
        self._assumed: set[str] = set()
        self._sums: dict[str, Mapping[str, Quantity]] = {}
        self._changed: set[str] = set()

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def node_of(self, key: str) -> str | None:
        """The node ``key`` is charged to, if any."""
        return self._where.get(key)

    def is_assumed(self, key: str) -> bool:
        """True while ``key`` is charged only by an assumption (its binding not yet seen bound)."""
        return key in self._assumed

    def put(self, key: str, node: str, requests: Mapping[str, Quantity], *, assumed: bool) -> None:
        """Charge ``key`` to ``node`` (moving it if it was charged elsewhere)."""
        self.drop(key)
        self._by_node.setdefault(node, {})[key] = dict(requests)
        self._where[key] = node
        if assumed:
            self._assumed.add(key)
        self._sums.pop(node, None)
        self._changed.add(node)

    def drop(self, key: str) -> None:
        """Stop charging ``key`` anywhere (no-op when unknown)."""
        node = self._where.pop(key, None)
        self._assumed.discard(key)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(key, None)
            if not pods:
                del self._by_node[node]
        self._sums.pop(node, None)
        self._changed.add(node)

    def drop_node(self, node: str) -> None:
        """Forget every pod charged to ``node`` (the Node object is gone)."""
        for key in list(self._by_node.get(node, {})):
            self.drop(key)

    def used(self, node: str) -> Mapping[str, Quantity]:
        """Sum of the requests charged to ``node`` (cached until the node's pods change)."""
        cached = self._sums.get(node)
        if cached is not None:
            return cached
        total: dict[str, Quantity] = {}
        for requests in self._by_node.get(node, {}).values():
            total = add_resources(total, requests)
        self._sums[node] = total
        return total

    def drain_changed(self) -> set[str]:
        """The nodes whose pods changed since the previous call (module docstring)."""
        changed, self._changed = self._changed, set()
        return changed

    def count(self, node: str) -> int:
        """How many pods are charged to ``node``."""
        return len(self._by_node.get(node, {}))

    def pods(self, node: str) -> list[str]:
        """Keys charged to ``node``, sorted."""
        return sorted(self._by_node.get(node, {}))

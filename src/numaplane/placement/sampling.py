"""kube-scheduler's ``percentageOfNodesToScore``: how many feasible nodes a cycle looks for, and where.

kube-scheduler does not filter every node of a large cluster. A cycle checks nodes in its snapshot
order starting at ``nextStartNodeIndex`` (wrapping around) and stops as soon as it has found
:func:`num_feasible_nodes_to_find` feasible nodes; only those are scored. The start index then
advances by the number of nodes the cycle *processed* (found feasible plus rejected), so that every
node gets the same chance over many cycles (``schedule_one.go``: ``findNodesThatFitPod``,
``findNodesThatPassFilters``, ``numFeasibleNodesToFind``).

kube-scheduler filters nodes on 16 goroutines and may process a few more nodes than needed before
the search is cancelled; this module models the sequential outcome: the processed nodes are exactly
the prefix of the rotation before the first feasible node *not* taken: a goroutine that finds one
feasible node more than wanted cancels the search and drops it, so that node is neither feasible nor
rejected, is not counted as processed, and is where the next cycle starts. Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Sample",
    "num_feasible_nodes_to_find",
    "sample_feasible",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int, nodes: int) -> int:
    """How many feasible nodes a cycle looks for among ``nodes`` (``percentage`` 0: adaptive).

    Every node below 100 nodes; else ``nodes * p // 100`` with ``p = percentage`` or, when 0,
    ``max(50 - nodes // 125, 5)``; never fewer than 100. ``percentage`` 100 scores every node."""
    if not 0 <= percentage <= 100:
        raise ValueError(f"percentageOfNodesToScore must be within 0..100, got {percentage}")
    if nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return nodes
    if percentage == 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Sample:
    """The outcome of one cycle's search: ``rows`` (the feasible nodes found, in search order), the
    ``count`` nodes processed from ``start`` on (wrapping around after ``nodes``) and ``next_start``."""

    __slots__ = ("count", "next_start", "nodes", "rows", "start")

    def __init__(self, rows: npt.NDArray[np.int64], nodes: int, start: int, count: int, next_start: int) -> None:
        self.rows = rows
        self.nodes = nodes
        self.start = start
        self.count = count
        self.next_start = next_start

    def processed(self, where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int64]:
        """The processed nodes in search order; only those with ``where`` (one flag per node) true
        when given."""
        n, end = self.nodes, self.start + self.count
        if where is None:
            out = np.arange(self.start, end, dtype=np.int64)
            out[out >= n] -= n
            return out
        head = np.flatnonzero(where[self.start : min(end, n)]) + self.start
        if end <= n:
            return head.astype(np.int64)
        tail = np.flatnonzero(where[: end - n])
        return np.concatenate((head, tail)).astype(np.int64)


def sample_feasible(passing: npt.NDArray[np.bool_], start: int, want: int) -> Sample:
    """Search ``passing`` (one verdict per node, snapshot order) from ``start`` for ``want`` feasible
    nodes, wrapping around, as a kube-scheduler cycle does (module docstring).

    When ``want`` is at least the number of feasible nodes, every node is processed and the start
    does not move (``start + n`` wraps to ``start``); from start 0 the rows are then ascending."""
    n = len(passing)
    if n == 0:
        return Sample(np.zeros(0, np.int64), 0, 0, 0, 0)
    start %= n
    head = np.flatnonzero(passing[start:]) + start
    if len(head) > want:  # the search stops when it meets one feasible node more than it wants
        return Sample(head[:want].astype(np.int64), n, start, int(head[want]) - start, int(head[want]))
    rows = head
    if start:
        tail = np.flatnonzero(passing[:start])
        if len(head) + len(tail) > want:
            stop = int(tail[want - len(head)])
            rows = np.concatenate((head, tail[: want - len(head)]))
            return Sample(rows.astype(np.int64), n, start, n - start + stop, stop)
        rows = np.concatenate((head, tail))
    return Sample(rows.astype(np.int64), n, start, n, start)

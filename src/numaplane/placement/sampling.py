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
    """The outcome of one cycle's search: ``rows`` (feasible nodes found, in search order),
    ``processed`` (the rotation prefix that was filtered, in search order) and ``next_start``."""

    __slots__ = ("next_start", "processed", "rows")

    def __init__(self, rows: npt.NDArray[np.int64], processed: npt.NDArray[np.int64], next_start: int) -> None:
        self.rows = rows
        self.processed = processed
        self.next_start = next_start


def sample_feasible(passing: npt.NDArray[np.bool_], start: int, want: int) -> Sample:
    """Search ``passing`` (one verdict per node, snapshot order) from ``start`` for ``want`` feasible
    nodes, wrapping around, as a kube-scheduler cycle does (module docstring).

    When ``want`` is at least the number of feasible nodes, every node is processed and the start
    does not move (``start + n`` wraps to ``start``); from start 0 the rows are then ascending."""
    n = len(passing)
    if n == 0:
        return Sample(np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
    start %= n
    if want >= n:
        everything = np.arange(n, dtype=np.int64)
        order = everything if start == 0 else np.roll(everything, -start)
        return Sample(order[passing[order]], order, start)
    rolled = np.concatenate((passing[start:], passing[:start])) if start else passing
    hits = np.flatnonzero(rolled)
    count = n
    if len(hits) > want:  # the search stops when it meets one feasible node more than it wants
        count = int(hits[want])
        hits = hits[:want]
    rows = hits + start
    rows[rows >= n] -= n
    processed = np.arange(start, start + count, dtype=np.int64)
    processed[processed >= n] -= n
    return Sample(rows.astype(np.int64), processed, (start + count) % n)

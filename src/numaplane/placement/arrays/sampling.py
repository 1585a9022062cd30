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

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Search",
    "first_window",
    "next_window",
    "num_feasible_nodes_to_find",
    "search",
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


class Search:
    """The outcome of :func:`search`: ``rows`` (feasible nodes found, in search order), ``reported``
    (the processed nodes the verdicts flagged for reporting, in search order), ``next_start`` and
    ``processed`` (how many nodes the search processed)."""

    __slots__ = ("next_start", "processed", "reported", "rows")

    def __init__(
        self, rows: npt.NDArray[np.int64], reported: npt.NDArray[np.int64], next_start: int, processed: int
    ) -> None:
        self.rows = rows
        self.reported = reported
        self.next_start = next_start
        self.processed = processed


Verdicts = Callable[[slice], tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_] | None]]


def search(nodes: int, start: int, want: int, window: int, verdicts: Verdicts) -> Search:
    """Search the ``nodes`` (snapshot order) from ``start`` for ``want`` feasible nodes, wrapping
    around, as a kube-scheduler cycle does (module docstring), with the verdicts computed on demand.

    ``verdicts(slice(lo, hi))`` gives, for nodes ``lo .. hi-1``, whether each passes the filters and
    (or ``None``) whether it is to be reported when processed (e.g. it failed only the NUMA filter).
    The first window holds at most ``window`` nodes; when it does not end the search, the next window
    is sized from the share of feasible nodes seen so far (:func:`next_window`: the nodes still
    needed at that rate, with a margin), and after :data:`SIZED_WINDOWS` sized windows the rest is
    asked for at once: at most ``SIZED_WINDOWS + 3`` calls (a window never crosses the wrap), in
    search order, each node at most once. The windows change only how many verdicts are computed
    beyond the end of the search (each node's verdict depends on that node alone), never the result.
    When ``want`` is at least the number of feasible nodes, every node is processed and the start
    does not move; from start 0 the rows are then ascending."""
    empty = np.zeros(0, np.int64)
    if nodes == 0:
        return Search(empty, empty, 0, 0)
    start %= nodes
    window = max(1, window)
    rows: list[npt.NDArray[np.int64]] = []
    reported: list[npt.NDArray[np.int64]] = []
    found = 0
    sized = 0
    pos, remaining = start, nodes
    while remaining:
        hi = min(pos + window, nodes, pos + remaining)
        passing, flags = verdicts(slice(pos, hi))
        hits = np.flatnonzero(passing)
        if found + len(hits) > want:  # one feasible node more than wanted: the search stops before it
            take = want - found
            stop = int(hits[take])
            rows.append(hits[:take] + pos)
            if flags is not None:
                reported.append(np.flatnonzero(flags[:stop]) + pos)
            return Search(_joined(rows), _joined(reported), (pos + stop) % nodes, nodes - remaining + stop)
        rows.append(hits + pos)
        if flags is not None:
            reported.append(np.flatnonzero(flags) + pos)
        found += len(hits)
        remaining -= hi - pos
        pos = hi % nodes
        if sized < SIZED_WINDOWS:
            sized += 1
            window = next_window(want + 1 - found, found, nodes - remaining)
        else:
            window = nodes  # evaluate the rest in one go
    return Search(_joined(rows), _joined(reported), start, nodes)


#: Windows sized by :func:`next_window` before a search asks for all the nodes left.
SIZED_WINDOWS = 2


def first_window(want: int, limit: int, last: tuple[int, int] | None) -> int:
    """The first window of a search for ``want`` feasible nodes: ``limit`` at most, and fewer when the
    previous search (``last``: its feasible nodes found and nodes processed) found them densely — the
    nodes needed at that share, an eighth again as many, plus 32. Only the cost depends on it."""
    if last is None or last[0] == 0:
        return limit
    feasible, processed = last
    return max(1, min(limit, -(-(want + 1) * processed * 9 // (feasible * 8)) + 32))


def next_window(needed: int, feasible: int, processed: int) -> int:
    """Nodes to ask next when ``needed`` more feasible nodes end the search and ``feasible`` of the
    ``processed`` nodes so far passed: the expected count at that share, half again as many, plus 32
    (the whole rest when none passed yet)."""
    if feasible == 0:
        return 1 << 62
    return -(-needed * processed * 3 // (feasible * 2)) + 32


def _joined(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    if not parts:
        return np.zeros(0, np.int64)
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)).astype(np.int64, copy=False)

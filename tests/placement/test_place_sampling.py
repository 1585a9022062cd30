"""kube-scheduler's percentageOfNodesToScore: the number of feasible nodes a cycle looks for and the
rotating search (placement/arrays/sampling.py), against the rules and a literal sequential loop."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaplane.placement.arrays.sampling import (
    SIZED_WINDOWS,
    first_window,
    next_window,
    num_feasible_nodes_to_find,
    search,
)


@pytest.mark.parametrize(
    ("percentage", "nodes", "want"),
    [
        (0, 0, 0),
        (0, 1, 1),
        (0, 99, 99),  # below minFeasibleNodesToFind: every node
        (0, 100, 100),  # 50 % of 100 = 50, raised to the minimum of 100
        (0, 250, 120),  # 50 - 250 // 125 = 48 %
        (0, 1000, 420),  # 42 %
        (0, 5000, 500),  # 10 %
        (0, 5625, 281),  # 5 %: 50 - 45
        (0, 15000, 750),  # 50 - 120 < 5: the 5 % floor
        (30, 1000, 300),
        (100, 1000, 1000),
        (1, 1000, 100),  # 10, raised to 100
        (100, 50, 50),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, want: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == want


@pytest.mark.parametrize("percentage", [-1, 101])
def test_percentage_out_of_range_is_rejected(percentage: int) -> None:
    with pytest.raises(ValueError, match=r"0\.\.100"):
        num_feasible_nodes_to_find(percentage, 500)


def _literal(passing: list[bool], start: int, want: int) -> tuple[list[int], list[int], int]:
    """kube-scheduler's search, one node at a time: a node found feasible once ``want`` are already
    taken ends the search and is neither taken nor counted as processed."""
    n = len(passing)
    rows: list[int] = []
    processed: list[int] = []
    for i in range(n):
        node = (start + i) % n
        if passing[node]:
            if len(rows) == want:
                break
            rows.append(node)
        processed.append(node)
    return rows, processed, (start + len(processed)) % n if n else 0


def _everything(passing: np.ndarray, flags: np.ndarray | None = None) -> Any:
    """``evaluate`` for :func:`search` over whole verdict vectors."""

    def evaluate(sel: slice) -> tuple[np.ndarray, np.ndarray | None]:
        return passing[sel], None if flags is None else flags[sel]

    return evaluate


def test_searching_every_node_keeps_the_start_and_gives_ascending_rows() -> None:
    passing = np.array([True, False, True, True, False])
    found = search(5, 0, 5, 5, _everything(passing, np.ones(5, dtype=bool)))
    assert (found.rows.tolist(), found.next_start) == ([0, 2, 3], 0)
    assert found.reported.tolist() == [0, 1, 2, 3, 4]


def test_rotation_gives_every_node_its_turn() -> None:
    passing = np.ones(10, dtype=bool)
    start, seen = 0, []
    for _ in range(5):
        found = search(10, start, 2, 4, _everything(passing))
        seen.append(found.rows.tolist())
        start = found.next_start
    assert seen == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


@given(
    passing=st.lists(st.booleans(), max_size=60),
    start=st.integers(0, 200),
    want=st.integers(1, 70),
    window=st.integers(1, 70),
    seed=st.integers(0, 2**16),
)
def test_windowed_search_equals_the_sequential_search(
    passing: list[bool], start: int, want: int, window: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    verdicts = np.array(passing, dtype=bool)
    flags = rng.random(len(passing)) < 0.5
    asked: list[tuple[int, int]] = []

    def evaluate(sel: slice) -> tuple[np.ndarray, np.ndarray]:
        asked.append((sel.start, sel.stop))
        return verdicts[sel], flags[sel]

    found = search(len(passing), start, want, window, evaluate)
    rows, processed, next_start = _literal(passing, start, want)
    assert found.rows.tolist() == rows
    assert found.reported.tolist() == [p for p in processed if flags[p]]
    assert found.next_start == next_start
    assert found.processed == len(processed)
    # each node asked at most once, in search order, the first window within its size, few calls
    seen = [i for lo, hi in asked for i in range(lo, hi)]
    assert len(seen) == len(set(seen)) and len(asked) <= SIZED_WINDOWS + 3
    assert seen == [(start + k) % len(passing) for k in range(len(seen))]
    assert not asked or asked[0][1] - asked[0][0] <= window


@given(
    want=st.integers(1, 10_000),
    limit=st.integers(1, 20_000),
    feasible=st.integers(0, 5_000),
    extra=st.integers(0, 5_000),
)
def test_window_sizes_stay_within_their_bounds(want: int, limit: int, feasible: int, extra: int) -> None:
    processed = feasible + extra
    window = first_window(want, limit, None if processed == 0 else (feasible, processed))
    assert 1 <= window <= limit
    if processed and feasible and processed == feasible:  # every node passed: want + 1 nodes end it
        assert window >= min(limit, want + 1)
    sized = next_window(want, feasible, max(processed, 1))
    assert sized >= want or feasible == 0

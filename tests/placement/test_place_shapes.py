"""Per pod shape, the pipeline keeps every row's verdict and score and recomputes only the rows changed
since (issue 30): results stay those of the per-node functions, for other pods of the same shape too."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from place_helpers import container, node_doc, nrt, zone

from numaplane.placement.arrays.pipeline import Pipeline
from numaplane.placement.arrays.shapes import RowMemo, pod_shape
from numaplane.placement.explain.filter import filter as filter_node
from numaplane.placement.explain.score import score
from numaplane.placement.model.result import Fit
from numaplane.placement.model.strategies import STRATEGY_TYPES, ScoringStrategy
from numaplane.resources.pod import Pod, parse_pod


def _pod(
    name: str, cpu: int, memory: str, *, extra: dict[str, Any] | None = None, ann: dict[str, str] | None = None
) -> Pod:
    reqs: dict[str, Any] = {"cpu": cpu, "memory": memory, **(extra or {})}
    meta: dict[str, Any] = {"name": name, "annotations": ann or {}}
    return parse_pod({"metadata": meta, "spec": {"containers": [container("c", reqs)]}})


def test_shape_ignores_identity_and_keeps_what_the_filter_reads() -> None:
    a, b = _pod("a", 2, "1Gi"), _pod("b", 2, "1Gi")
    assert pod_shape(a) == pod_shape(b) and hash(pod_shape(a)) == hash(pod_shape(b))
    assert pod_shape(a) != pod_shape(_pod("c", 2, "2Gi"))
    assert pod_shape(a) != pod_shape(_pod("d", 2, "1Gi", extra={"vendor/nic": 1}))
    pinned = _pod("e", 2, "1Gi", ann={"numaplane.io/topology-scope": "pod"})
    assert pod_shape(a) != pod_shape(pinned)
    burstable = parse_pod(
        {
            "metadata": {"name": "f"},
            "spec": {"containers": [container("c", {"cpu": 2, "memory": "1Gi"}, guaranteed=False)]},
        }
    )
    assert pod_shape(a) != pod_shape(burstable)
    assert pod_shape(a.with_changes(node_name="x")) == pod_shape(a)


def test_memo_recomputes_only_changed_and_new_rows() -> None:
    memo: RowMemo[np.int64] = RowMemo()
    asked: list[list[int]] = []
    stamp = np.arange(10, dtype=np.int64)  # stamps only grow; the last one issued is 9

    def every() -> Any:
        asked.append(list(range(len(stamp))))
        return stamp * 10

    def some(rows: Any) -> Any:
        asked.append(rows.tolist())
        return stamp[rows] * 10

    assert memo.rows("k", stamp, 9, every, some).tolist() == (stamp * 10).tolist()
    assert memo.rows("k", stamp, 9, every, some).tolist() == (stamp * 10).tolist()
    assert asked == [list(range(10))]  # the second call computed nothing
    stamp[3] = 10  # row 3 rewritten, row 10 added
    stamp = np.concatenate((stamp, [11]))
    assert memo.rows("k", stamp, 11, every, some).tolist() == (stamp * 10).tolist()
    assert asked[-1] == [3, 10]
    stamp[:] += 100  # most rows changed: every row recomputed at once
    assert memo.rows("k", stamp, 111, every, some).tolist() == (stamp * 10).tolist()
    assert asked[-1] == list(range(11))
    assert memo.rows("other", stamp, 111, every, some).tolist() == (stamp * 10).tolist()
    assert len(asked) == 4  # another key computes its own rows


def test_memo_is_bounded_by_keys_and_bytes() -> None:
    stamp = np.zeros(1000, np.int64)
    by_keys: RowMemo[np.int64] = RowMemo(capacity=3)
    by_bytes: RowMemo[np.int64] = RowMemo(budget=3 * 8000)  # three rows arrays of 1,000 int64
    for key in range(10):
        for memo in (by_keys, by_bytes):
            memo.rows(key, stamp, 0, lambda: np.zeros(1000, np.int64), lambda rows: np.zeros(len(rows), np.int64))
    assert len(by_keys) == 3 and len(by_bytes) == 3


def test_narrow_memo_keeps_small_values_in_one_byte_and_widens_for_larger_ones() -> None:
    memo: RowMemo[np.int64] = RowMemo(narrow=np.int8, budget=3 * 1000)  # three rows arrays of 1,000 int8
    stamp = np.zeros(1000, np.int64)
    values = np.arange(1000, dtype=np.int64) % 101  # scores 0..100

    def every() -> Any:
        return values.copy()

    def some(rows: Any) -> Any:
        return values[rows]

    kept = memo.rows("k", stamp, 0, every, some)
    assert kept.dtype == np.int8 and kept.astype(np.int64).tolist() == values.tolist()
    for key in range(5):
        memo.rows(key, stamp, 0, every, some)
    assert len(memo) == 3  # the byte budget counts one byte per row
    values[7] = 1000  # a value int8 cannot hold: the row is widened, nothing wraps
    stamp[7] = 1
    kept = memo.rows(4, stamp, 1, every, some)
    assert kept.dtype == np.int64 and kept.tolist() == values.tolist()
    values[:] = -500  # every row stale, none fits: kept as computed
    stamp[:] = 2
    assert memo.rows(4, stamp, 2, every, some).tolist() == values.tolist()


def _check(pipe: Pipeline, pod: Pod, entries: dict[str, tuple[Any, dict[str, Any], bool]]) -> None:
    result = pipe.evaluate(pod)
    for name, (doc, node, fresh) in entries.items():
        want_fit = isinstance(filter_node(pod, doc, node, fresh=fresh, options=pipe.options), Fit)
        want_score = score(pod, doc, node, pipe.strategy, fresh=fresh)
        assert result.result(name) == (want_fit, want_score), (name, pod.name)
    rows = np.array(sorted(result.index.values()), dtype=np.int64)
    assert pipe.scores(pod, rows).tolist() == result.scores[rows].tolist()


@pytest.mark.parametrize("kind", STRATEGY_TYPES)
def test_kept_rows_follow_updates_new_resources_and_new_nodes(kind: str) -> None:
    """Fresh pod objects of recurring shapes, between one-row updates, removals, nodes added with a
    resource no node listed before (a new column), freshness flips and NRT-less nodes."""
    rng = random.Random(30)
    resources = ["vendor/nic"]

    def doc(name: str) -> Any:
        zs = [
            zone(
                z, {"cpu": rng.choice([0, 1, 2, 4]), "memory": f"{rng.choice([1, 2])}Gi", **dict.fromkeys(resources, 1)}
            )
            for z in range(rng.choice([1, 2, 4]))
        ]
        return nrt(name, zs, scope=rng.choice(["pod", "container"]), policy=rng.choice(["single-numa-node", "none"]))

    def allocatable() -> dict[str, str]:
        return {"cpu": "64", "memory": "64Gi", **dict.fromkeys(resources, "4")}

    pipe = Pipeline(ScoringStrategy(kind), zones=2)
    entries: dict[str, tuple[Any, dict[str, Any], bool]] = {}
    for i in range(40):
        name = f"n{i}"
        entries[name] = (doc(name), node_doc(name, allocatable()), True)
        pipe.update_node(name, *entries[name][:2])
    shapes = [(1, "1Gi", {}), (2, "1Gi", {"vendor/nic": 1}), (1, "1Gi", {"vendor/gpu": 1}), (4, "2Gi", {})]
    for step in range(80):
        if step == 30:
            resources.append("vendor/gpu")  # nodes from now on list a new resource: a new column
        for _ in range(rng.randint(0, 2)):
            name = f"n{rng.randrange(50)}"
            roll = rng.random()
            if roll < 0.1 and name in entries:
                pipe.remove_node(name)
                del entries[name]
                continue
            fresh = rng.random() > 0.1
            nrt_doc = None if roll > 0.95 else doc(name)
            entries[name] = (nrt_doc, node_doc(name, allocatable()), fresh)
            pipe.update_node(name, nrt_doc, entries[name][1], fresh=fresh)
        cpu, mem, extra = shapes[step % len(shapes)]
        _check(pipe, _pod(f"p{step}", cpu, mem, extra=extra), entries)

"""The scheduling cycle over a changing node set (:class:`~numaplane.placement.cycle.Cycle`): after any
sequence of node additions, removals, allocatable and usage changes, its searches, verdicts and choices
equal those of a cycle built at once from the resulting nodes (same search order, same usage), with and
without the caller's predicate mask, at every ``percentageOfNodesToScore``."""

from __future__ import annotations

import random

import numpy as np
import pytest

from numaplane.placement.cycle import Cycle, SelectionRules
from numaplane.placement.model.node import NodeInfo
from numaplane.resources.pod import Pod, parse_pod
from numaplane.resources.quantity import Quantity, parse_quantity


def _allocatable(rng: random.Random) -> dict[str, Quantity]:
    return {
        "cpu": parse_quantity(str(rng.choice((1, 4, 8, 64)))),
        "memory": parse_quantity(rng.choice(("1Gi", "8Gi", "64Gi"))),
        "pods": parse_quantity(str(rng.choice((2, 110)))),
    }


def _used(rng: random.Random) -> tuple[dict[str, Quantity], int]:
    used = {"cpu": parse_quantity(rng.choice(("0", "500m", "2", "6"))), "memory": parse_quantity("1Gi")}
    return used, rng.randint(0, 3)


def _pod(rng: random.Random, i: int) -> Pod:
    reqs = {"cpu": rng.choice(("100m", "1", "3", "8")), "memory": rng.choice(("100Mi", "2Gi", "16Gi"))}
    doc = {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "resources": {"requests": reqs}}]}}
    return parse_pod(doc)


@pytest.mark.parametrize("seed", range(12))
def test_a_mutated_cycle_decides_as_one_built_at_once(seed: int) -> None:
    rng = random.Random(seed)
    rules = SelectionRules(
        numa_weight=1,
        fit_weight=rng.choice((0, 1, 3)),
        percentage_of_nodes_to_score=rng.choice((100, 50, 0)),
        tie_break=rng.choice(("name", "search-order")),
    )
    mutated = Cycle([], [], {}, rules)
    alloc: dict[str, dict[str, Quantity]] = {}
    usage: dict[str, tuple[dict[str, Quantity], int]] = {}
    for step in range(rng.randint(20, 260)):
        name = f"n{rng.randrange(200)}"
        action = rng.random()
        if action < 0.6:
            new = name not in alloc or rng.random() < 0.5
            if new:
                alloc[name] = _allocatable(rng)
            known = name in mutated
            mutated.set_node(name, NodeInfo(name), alloc[name] if new or not known else None)
            if not known:
                usage[name] = ({}, 0)
        elif action < 0.8:
            mutated.remove_node(name)
            alloc.pop(name, None)
            usage.pop(name, None)
        elif name in usage:
            usage[name] = _used(rng)
            mutated.set_usage(name, *usage[name])
        if step % 17 == 0:
            mutated.decide(_pod(rng, step))  # decisions between changes use (and rebuild) the layout
    names = list(mutated.names)
    assert sorted(names) == sorted(alloc)
    fresh = Cycle(names, [alloc[n] for n in names], {n: NodeInfo(n) for n in names}, rules)
    for name in names:
        fresh.set_usage(name, *usage[name])
    fresh.start = mutated.start
    for i in range(60):
        pod = _pod(rng, i)
        mask = np.array([rng.random() < 0.8 for _ in names], dtype=np.bool_) if i % 2 else None
        assert mutated.fits(pod).tolist() == fresh.fits(pod).tolist()
        got, want = mutated.candidates(pod, mask), fresh.candidates(pod, mask)
        assert got.rows.tolist() == want.rows.tolist() and mutated.start == fresh.start
        if len(want.rows):
            assert mutated.totals(pod, got).tolist() == fresh.totals(pod, want).tolist()
            assert names[mutated.select(pod, got)] == names[fresh.select(pod, want)]


def test_a_node_set_change_needs_an_allocatable_for_a_new_node() -> None:
    cycle = Cycle([], [], {}, SelectionRules())
    with pytest.raises(ValueError, match="allocatable is needed"):
        cycle.set_node("a", NodeInfo("a"))
    cycle.set_node("a", NodeInfo("a"), {"cpu": parse_quantity("4"), "memory": parse_quantity("4Gi")})
    cycle.remove_node("missing")  # no-op
    assert cycle.names == ["a"] and cycle.position("a") == 0
    pod = parse_pod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    assert cycle.decide(pod) == 0
    cycle.remove_node("a")
    assert cycle.decide(pod) is None and cycle.position("a") is None

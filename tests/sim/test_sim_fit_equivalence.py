"""The simulator's NodeResourcesFit arrays (per-resource layout, memoised score parts) give exactly the
verdicts and scores of the verbatim previous implementation (:mod:`reference_fit`) on random request
streams as the simulator produces them (a pod is charged only where it fits), including unknown
resources, zero and default requests.

The reference counted pods in its ``pods`` column and failed a node on any overcommitted column; the
arrays count pods apart and, like ``fits_node``, compare only the requested resources. The two differ
only on overcommitted nodes, which the simulator never makes; ``tests/placement/test_place_fit.py``
checks the arrays against ``fits_node`` there."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from reference_fit import ReferenceFitArrays

from numaplane.placement.arrays.fit import FitArrays
from numaplane.resources.pod import Pod, parse_pod
from numaplane.resources.quantity import Quantity, parse_quantity

RESOURCES = ["cpu", "memory", "pods", "hugepages-1Gi", "example.com/nic", "vendor/other"]
AMOUNTS = {
    "cpu": ["0", "100m", "250m", "1", "2", "4", "16", "64"],
    "memory": ["0", "1Gi", "4Gi", "200Mi", "1500Mi", "64Gi"],
    "hugepages-1Gi": ["0", "1Gi", "4Gi"],
    "example.com/nic": ["0", "1", "2"],
    "vendor/other": ["1"],
}


def _allocatable(rng: random.Random) -> dict[str, Quantity]:
    out = {
        "cpu": parse_quantity(str(rng.choice((0, 4, 8, 64)))),
        "memory": parse_quantity(rng.choice(("0", "8Gi", "64Gi", "256Gi"))),
        "pods": parse_quantity(str(rng.choice((1, 3, 110)))),
    }
    if rng.random() < 0.5:
        out["hugepages-1Gi"] = parse_quantity(rng.choice(("0", "4Gi", "16Gi")))
    if rng.random() < 0.5:
        out["example.com/nic"] = parse_quantity(str(rng.randint(0, 4)))
    return out


def _pod(rng: random.Random, i: int) -> Pod:
    names = rng.sample(list(AMOUNTS), rng.randint(0, 4))
    reqs = {n: rng.choice(AMOUNTS[n]) for n in names}
    doc = {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "resources": {"requests": reqs}}]}}
    return parse_pod(doc)


@pytest.mark.parametrize("seed", range(20))
def test_random_streams_match_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [_allocatable(rng) for _ in range(rng.randint(1, 40))]
    names = [f"n{i}" for i in range(len(nodes))]
    new, ref = FitArrays(names, nodes), ReferenceFitArrays(names, nodes)
    bound: list[tuple[int, Pod]] = []
    for i in range(300):
        pod = _pod(rng, i)
        assert np.array_equal(new.feasible(pod), ref.feasible(pod))
        assert np.array_equal(new.scores(pod), ref.scores(pod))
        roll = rng.random()
        fitting = np.flatnonzero(ref.feasible(pod))
        if roll < 0.5 and len(fitting):  # bind where it fits, as the simulator does
            row = int(rng.choice(fitting.tolist()))
            if rng.random() < 0.5:
                new.add(row, pod.effective_requests())
            else:
                new.add_vector(row, new.vector_of(pod))
            ref.add(row, pod.effective_requests())
            bound.append((row, pod))
        elif roll < 0.8 and bound:
            row, gone = bound.pop(rng.randrange(len(bound)))
            new.add(row, gone.effective_requests(), -1)
            ref.add(row, gone.effective_requests(), -1)
        assert new.cpu_used_fraction() == ref.cpu_used_fraction()
        pods = ref.columns["pods"]
        for r, col in ref.columns.items():
            want = ref.used[:, col] if r != "pods" else np.zeros(len(nodes), dtype=np.int64)
            assert np.array_equal(new.used[new.columns[r]], want)
        assert np.array_equal(new.count * 1000, ref.used[:, pods])


def totals(rules: Any, numa_scores: Mapping[str, int] | None, fit_scores: Mapping[str, int]) -> dict[str, int]:
    """Reference: each node's total score; without NUMA scores the fit score alone, unweighted."""
    if numa_scores is None:
        return dict(fit_scores)
    return {n: rules.numa_weight * numa_scores[n] + rules.fit_weight * s for n, s in fit_scores.items()}


def best_node(scores: Mapping[str, int]) -> str | None:
    """Reference: the node with the highest total, the lowest name on ties."""
    return min(scores, key=lambda n: (-scores[n], n)) if scores else None


@pytest.mark.parametrize("seed", range(20))
def test_cycle_selection_on_rows_is_the_rule_on_names(seed: int) -> None:
    """The simulator's array selection (:meth:`Cycle.select`) picks exactly the node the standalone
    scheduler's rule stated over names (:func:`best_node` over :func:`totals`) picks from the same scores."""
    from numaplane.placement.cycle import Candidates, Cycle, SelectionRules

    rng = random.Random(seed)
    nodes = [_allocatable(rng) for _ in range(rng.randint(1, 60))]
    names = [f"n{rng.randrange(10_000)}-{i}" for i in range(len(nodes))]  # rows not in name order
    rules = SelectionRules(numa_weight=rng.choice((0, 1, 2, 1000)), fit_weight=rng.choice((0, 1, 3)))
    cycle = Cycle(names, nodes, {}, rules)
    for i in range(40):
        row = rng.randrange(len(nodes))
        cycle.fit.add(row, _pod(rng, 1000 + i).effective_requests())
    for i in range(200):
        pod = _pod(rng, i)
        feasible = np.array([rng.random() < 0.6 for _ in nodes])
        if not feasible.any():
            feasible[rng.randrange(len(nodes))] = True
        numa = np.array([rng.choice((0, 50, 100, rng.randint(0, 100))) for _ in nodes], dtype=np.int64)
        start = rng.randrange(len(nodes))
        rows = np.array([r for r in (*range(start, len(nodes)), *range(start)) if feasible[r]], dtype=np.int64)
        fit = {names[r]: int(cycle.fit.scores(pod)[r]) for r in rows}
        with_numa = totals(rules, {names[r]: int(numa[r]) for r in rows}, fit)
        assert names[cycle.select(pod, Candidates(rows, numa[rows]))] == best_node(with_numa)
        assert names[cycle.select(pod, Candidates(rows, None))] == best_node(totals(rules, None, fit))
        # the default scheduler's stand-in for random ties: the first node in search order
        first = Cycle(names, nodes, {}, replace(rules, tie_break="search-order"))
        first.fit = cycle.fit
        combined = [with_numa[names[r]] for r in rows]
        assert first.select(pod, Candidates(rows, numa[rows])) == int(rows[combined.index(max(combined))])


@pytest.mark.parametrize("seed", [1, 7])
def test_generated_pods_equal_their_parsed_documents(seed: int) -> None:
    """The generator parses one pod per shape and copies it: every pod equals parse_pod(its doc)."""
    from numaplane.placement.model.effective import effective_placement
    from numaplane.policy.preferences import allocation_request
    from numaplane.sim.workload import WorkloadMix, generate_workload

    arrivals = generate_workload(seed, WorkloadMix(pods=400, device_resources=("example.com/nic",)))
    for a in arrivals:
        fresh = parse_pod(a.pod.raw)
        assert a.pod == fresh and repr(a.pod) == repr(fresh) and a.pod.raw is not None
        assert a.pod.qos_class == fresh.qos_class and a.pod.effective_requests() == fresh.effective_requests()
        # the values derived once per shape and carried by the copies are the pod's own
        assert allocation_request(a.pod) == allocation_request(fresh)
        assert effective_placement(a.pod) == effective_placement(fresh)
    assert len({a.pod.uid for a in arrivals}) == len(arrivals)

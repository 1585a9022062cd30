"""The plain per-node reference functions agree with every shared nrt-filter, nrt-score and nrt-zones
case, as the production path does (``numaplane conformance`` runs only that one; the property tests
compare the production path with these references on random clusters)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from numaplane.conformance.kinds.nrt_filter import compare as compare_verdict
from numaplane.conformance.kinds.nrt_zones import compare as compare_zones
from numaplane.nrt.zones import zones_from_dicts
from numaplane.placement.explain.filter import filter as reference_filter
from numaplane.placement.explain.score import score as reference_score
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.pod import parse_pod


def _cases(shared_dir: Path, *names: str) -> Iterator[dict[str, Any]]:
    for name in names:
        with (shared_dir / "conformance" / f"{name}.jsonl").open(encoding="utf-8") as fh:
            yield from (json.loads(line) for line in fh if line.strip())


@pytest.mark.parametrize("name", ["nrt-filter", "nrt-filter-oracle"])
def test_reference_filter_meets_every_case(shared_dir: Path, name: str) -> None:
    failures = []
    for case in _cases(shared_dir, name):
        verdict = reference_filter(parse_pod(case["pod"]), case.get("nrt"), case["node"])
        outcome = compare_verdict(case["expect"], verdict)
        if not outcome.passed:
            failures.append((case["id"], outcome.got))
    assert failures == []


@pytest.mark.parametrize("name", ["nrt-score", "nrt-score-oracle"])
def test_reference_score_meets_every_case(shared_dir: Path, name: str) -> None:
    failures = []
    for case in _cases(shared_dir, name):
        strategy = ScoringStrategy.from_dict(case["strategy"])
        pod = parse_pod(case["pod"])
        got = {n: reference_score(pod, e.get("nrt"), e.get("node"), strategy) for n, e in case["nodes"].items()}
        if got != case["expect"]["scores"]:
            failures.append((case["id"], got))
    assert failures == []


def test_reference_zones_meet_every_case(shared_dir: Path) -> None:
    failures = []
    for case in _cases(shared_dir, "nrt-zones"):
        zones = zones_from_dicts(
            str(case["node_name"]), case["machine"], case["allocatable"], case["list"], case.get("config")
        )
        outcome = compare_zones(case, [z.to_dict() for z in zones])
        if not outcome.passed:
            failures.append((case["id"], outcome.got))
    assert failures == []


def test_reason_codes_from_the_arrays_equal_the_explained_reasons(shared_dir: Path) -> None:
    """Every rejection of the nrt-filter cases: the message the production path reports from its
    arrays' reason code is the per-node explanation's reason, word for word."""
    from numaplane.conformance.production import scheduler_state
    from numaplane.placement.arrays.reasons import EXPLAIN
    from numaplane.placement.model.result import Reject

    seen = set()
    for case in _cases(shared_dir, "nrt-filter", "nrt-filter-oracle"):
        if case["expect"].get("fit") is not False:
            continue
        pod = parse_pod(case["pod"])
        ev = scheduler_state({"n": (case.get("nrt"), case["node"])}).evaluate(pod, ["n"], mark=False)
        verdict = ev.reject("n")
        assert isinstance(verdict, Reject) and ev.failed == ["n"], case["id"]
        assert ev.reason("n") == verdict.reason, case["id"]
        seen.add(ev.codes.get("n", EXPLAIN))
    assert len(seen) >= 3  # the data-only codes and the explained ones are both exercised

"""The shared conformance cases of the four CPU kinds all pass (SCHEMA.md §4.1–4.3, §4.10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaplane.conformance.runner import run_files

KINDS = ["cpu-take", "cpu-static", "cpu-hints", "cpu-accumulator"]


@pytest.mark.parametrize("kind", KINDS)
def test_conformance_kind_passes(shared_dir: Path, kind: str) -> None:
    folder = shared_dir / "conformance"
    report = run_files([folder / f"{kind}.jsonl"], [folder])
    failures = [
        (r.id, r.outcome.where, r.outcome.expected, r.outcome.got) for r in report.results if not r.outcome.passed
    ]
    assert report.results, f"no {kind} cases found"
    assert failures == []

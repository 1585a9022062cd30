"""Every shared case file passes through the code production runs (runner module docstring): one path
for the nrt kinds, and the agent's admission path as a second caller for cpu-static / memory-static."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaplane.conformance.runner import run_files


def _case_files(shared_dir: Path) -> list[Path]:
    return sorted((shared_dir / "conformance").glob("*.jsonl"))


def test_every_oracle_file_is_present(shared_dir: Path) -> None:
    names = {p.name for p in _case_files(shared_dir)}
    for kind in (
        "cpu-take",
        "cpu-hints",
        "cpu-static",
        "memory-static",
        "topology-merge",
        "nrt-filter",
        "nrt-score",
        "fingerprint",
    ):
        assert f"{kind}-oracle.jsonl" in names


@pytest.mark.parametrize("name", ["nrt-filter", "nrt-score", "nrt-zones", "nrt-filter-oracle", "nrt-score-oracle"])
@pytest.mark.parametrize("which", [("reference",), ("production",), ("reference", "production")])
def test_nrt_cases_pass_through_the_one_production_path(shared_dir: Path, name: str, which: tuple[str, ...]) -> None:
    folder = shared_dir / "conformance"
    report = run_files([folder / f"{name}.jsonl"], [folder], paths_to_run=which)
    assert report.results and {r.path for r in report.results} == {"reference"}  # run once, whatever is asked
    assert len(report.results) == sum(1 for line in (folder / f"{name}.jsonl").open() if line.strip())
    assert [(r.id, r.outcome.got) for r in report.results if not r.outcome.passed] == []


@pytest.mark.parametrize("name", ["cpu-static", "cpu-static-oracle"])
def test_cases_pass_through_both_callers(shared_dir: Path, name: str) -> None:
    folder = shared_dir / "conformance"
    report = run_files([folder / f"{name}.jsonl"], [folder], paths_to_run=("reference", "production"))
    by_path = {r.path for r in report.results}
    assert by_path == {"reference", "production"}
    assert [(r.id, r.path, r.outcome.got) for r in report.results if not r.outcome.passed] == []


@pytest.mark.parametrize(
    "kind", ["cpu-take", "cpu-hints", "cpu-static", "memory-static", "topology-merge", "fingerprint"]
)
def test_oracle_file_passes(shared_dir: Path, kind: str) -> None:
    folder = shared_dir / "conformance"
    report = run_files([folder / f"{kind}-oracle.jsonl"], [folder], paths_to_run=("reference", "production"))
    assert report.results
    assert [(r.id, r.path, r.outcome.got) for r in report.results if not r.outcome.passed] == []

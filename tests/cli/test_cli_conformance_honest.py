"""Strict in, honest out (issue 26 finding 10): ``conformance`` says which cases a path skips and why,
counts an unknown kind once, and names the file, line, case and field of a bad input. Each test runs
the real ``numaplane`` entry point in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import numaplane

# ---- finding 10: conformance -------------------------------------------------------------------------


def test_conformance_says_which_cases_the_production_path_skips_and_why(shared_dir: Path) -> None:
    files = [str(shared_dir / "conformance" / f"{k}.jsonl") for k in ("cpu-static", "memory-static")]
    run = numaplane("conformance", "--path", "both", *files, "-o", "json")
    assert run.code == 0, run.stderr
    doc = json.loads(run.stdout)
    by_kind = doc["byKind"]
    for kind in ("cpu-static", "memory-static"):
        reference, production = by_kind[kind], by_kind[f"{kind} (production)"]
        # every case is accounted for on the production row: run or skipped with a reason
        assert production["passed"] + production["failed"] + production["skipped"] == reference["passed"]
    skipped = doc["skippedCases"]
    assert doc["skipped"] == len(skipped) == sum(t["skipped"] for t in by_kind.values()) > 0
    assert all(c["id"] and c["path"] == "production" and c["reason"] for c in skipped)
    table = numaplane("conformance", "--path", "both", *files)
    assert table.code == 0
    assert "skipped on memory-static (production): " in table.stdout
    assert "no machine in the case" in table.stdout and "expect_new" in table.stdout


def test_conformance_counts_an_unknown_kind_once(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "x1", "kind": "cpu-tkae"}) + "\n")
    run = numaplane("conformance", "--path", "both", str(path), "-o", "json")
    assert run.code == 1
    doc = json.loads(run.stdout)
    assert doc["failed"] == 1 and doc["byKind"] == {"cpu-tkae": {"passed": 0, "failed": 1, "skipped": 0}}
    assert "unknown kind 'cpu-tkae'" in doc["failures"][0]["got"] and "cpu-take" in doc["failures"][0]["got"]


def test_conformance_case_missing_a_field_names_case_and_field(tmp_path: Path, shared_dir: Path) -> None:
    path = tmp_path / "c.jsonl"
    cases = [
        {"id": "ok", "kind": "topology-helpers", "helper": "max_of_min_affinity_counts", "hint_lists": [], "expect": 0},
        {"id": "no-topology", "kind": "cpu-take", "available": "0-3", "request": 2, "expect": {"cpus": "0-1"}},
    ]
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    run = numaplane("conformance", str(path), "--set-dir", str(shared_dir / "conformance"))
    assert run.code == 2, run.stdout
    assert run.error_line == f"Error: {path}:2: case 'no-topology' has no field 'topology'"
    assert "Traceback" not in run.stdout


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"", "no case in it (empty file)"), (b"\n  \n", "no case in it"), (b"\x7fELF\x02\x01\xff\xfe", "not UTF-8")],
)
def test_conformance_on_an_empty_or_binary_file_names_it(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(content)
    run = numaplane("conformance", str(path))
    assert run.code == 2, run.stdout
    assert str(path) in run.error_line and words in run.error_line

"""Load case files, run each case through its kind module, and tally results.

Reading files happens here (this is a component); the kind modules call the pure core only.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numaplane.conformance.errors import CaseFileError
from numaplane.conformance.outcome import CaseContext, Outcome

KindRunner = Callable[[dict[str, Any], CaseContext], Outcome]


@dataclass(frozen=True)
class CaseResult:
    id: str
    kind: str
    outcome: Outcome
    file: str
    note: str = ""


@dataclass
class Report:
    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.outcome.passed)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.outcome.passed)

    def by_kind(self) -> dict[str, dict[str, int]]:
        tally: dict[str, dict[str, int]] = {}
        for r in self.results:
            t = tally.setdefault(r.kind, {"passed": 0, "failed": 0})
            t["passed" if r.outcome.passed else "failed"] += 1
        return dict(sorted(tally.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": "numaplane.io/v1",
            "kind": "ConformanceReport",
            "passed": self.passed,
            "failed": self.failed,
            "byKind": self.by_kind(),
            "failures": [
                {"id": r.id, "expected": r.outcome.expected, "got": r.outcome.got, "where": r.outcome.where}
                for r in self.results
                if not r.outcome.passed
            ],
        }


def kind_runner(kind: str) -> KindRunner | None:
    """The ``run`` function of the kind's module, or ``None`` when the kind is unknown."""
    module_name = f"numaplane.conformance.kinds.{kind.replace('-', '_')}"
    if importlib.util.find_spec(module_name) is None:
        return None
    module = importlib.import_module(module_name)
    run: KindRunner = module.run
    return run


def known_kinds() -> list[str]:
    """Every case kind that has a runner (``numaplane.conformance.kinds.<kind>``), sorted."""
    from numaplane.conformance import kinds as kinds_package

    return sorted(
        m.name.replace("_", "-") for m in pkgutil.iter_modules(kinds_package.__path__) if not m.name.startswith("_")
    )


def iter_cases(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, case)`` for each non-blank line of a ``.jsonl`` file.

    Raise :class:`CaseFileError` naming the file and line when a line is not a JSON object."""
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CaseFileError(path, lineno, f"not valid JSON: {exc.msg} (column {exc.colno})") from exc
            if not isinstance(case, dict):
                raise CaseFileError(path, lineno, "a case must be a JSON object")
            yield lineno, case


def run_files(
    paths: Iterable[Path],
    set_dirs: Iterable[Path] = (),
    *,
    kinds: set[str] | None = None,
    ids: set[str] | None = None,
) -> Report:
    """Run every case of every file (optionally only some kinds or ids).

    Unknown kinds and crashing cases count as failures.
    """
    report = Report()
    extra = list(set_dirs)
    for path in paths:
        ctx = CaseContext(case_file=path, set_dirs=extra)
        for lineno, case in iter_cases(path):
            case_id = str(case.get("id", f"{path.name}:{lineno}"))
            kind = str(case.get("kind", ""))
            if (kinds is not None and kind not in kinds) or (ids is not None and case_id not in ids):
                continue
            runner = kind_runner(kind) if kind else None
            if runner is None:
                outcome = Outcome.fail("a runner for this kind", f"unknown kind {kind!r}", "kind")
            else:
                try:
                    outcome = runner(case, ctx)
                except Exception as exc:  # a crash is a failure of that case, not of the run
                    outcome = Outcome.fail(
                        case.get("expect"), f"exception: {exc!r}\n{traceback.format_exc(limit=6)}", "run"
                    )
            report.results.append(
                CaseResult(id=case_id, kind=kind, outcome=outcome, file=str(path), note=str(case.get("note", "")))
            )
    return report

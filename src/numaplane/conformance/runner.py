"""Load case files, run each case through its kind module, and tally results.

Reading files happens here (this is a component). Every kind module has ``run``: the code production
runs. For nrt-filter and nrt-score that is the scheduler state's vectorised NUMA arrays
(:class:`~numaplane.scheduler.state.SchedulerState`), for nrt-zones the exporter's
:class:`~numaplane.exporter.scan.Scanner`; the plain per-node functions are reference implementations
checked in ``tests/`` only. For the other kinds the pure core's functions are what production calls.
cpu-static and memory-static also have ``run_production``: the resource manager's built-in CPU and
memory plugins as the agent's admission builds and calls them (a second caller of the same code, not a
second implementation); both paths must pass; a production result is tallied under
``"<kind> (production)"``; a production runner returns ``None`` for a case its path does not apply to.
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

KindRunner = Callable[[dict[str, Any], CaseContext], Outcome | None]  # None: the path does not apply
PATHS = ("reference", "production")


@dataclass(frozen=True)
class CaseResult:
    id: str
    kind: str
    outcome: Outcome
    file: str
    note: str = ""
    path: str = "reference"

    @property
    def label(self) -> str:
        """The kind, marked with the path when it is not the reference one."""
        return self.kind if self.path == "reference" else f"{self.kind} ({self.path})"


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
            t = tally.setdefault(r.label, {"passed": 0, "failed": 0})
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
                {
                    "id": r.id,
                    "path": r.path,
                    "expected": r.outcome.expected,
                    "got": r.outcome.got,
                    "where": r.outcome.where,
                }
                for r in self.results
                if not r.outcome.passed
            ],
        }


def kind_runner(kind: str, path: str = "reference") -> KindRunner | None:
    """The kind module's runner for ``path`` (``run`` / ``run_production``); ``None`` when the kind is
    unknown or has no separate production path."""
    module_name = f"numaplane.conformance.kinds.{kind.replace('-', '_')}"
    if importlib.util.find_spec(module_name) is None:
        return None
    module = importlib.import_module(module_name)
    run: KindRunner | None = getattr(module, "run" if path == "reference" else "run_production", None)
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
    paths_to_run: Iterable[str] = ("reference",),
) -> Report:
    """Run every case of every file (optionally only some kinds or ids) through each of ``paths_to_run``
    (``reference``, ``production``: module docstring).

    Unknown kinds and crashing cases count as failures; a kind without a production path is run once
    (also when only ``production`` is asked for).
    """
    wanted = [p for p in PATHS if p in set(paths_to_run)]
    report = Report()
    extra = list(set_dirs)
    for path in paths:
        ctx = CaseContext(case_file=path, set_dirs=extra)
        for lineno, case in iter_cases(path):
            case_id = str(case.get("id", f"{path.name}:{lineno}"))
            kind = str(case.get("kind", ""))
            if (kinds is not None and kind not in kinds) or (ids is not None and case_id not in ids):
                continue
            for which in wanted:
                runner = kind_runner(kind, which) if kind else None
                outcome: Outcome | None
                if runner is None and which != "reference" and kind and kind_runner(kind) is not None:
                    if "reference" in wanted:
                        continue  # no second caller for this kind: its one runner already ran
                    which, runner = "reference", kind_runner(kind)  # never skipped: run its one runner
                if runner is None:
                    outcome = Outcome.fail("a runner for this kind", f"unknown kind {kind!r}", "kind")
                else:
                    outcome = _run_one(runner, case, ctx)
                    if outcome is None:
                        continue  # this path does not apply to this case (the kind module says why)
                report.results.append(CaseResult(case_id, kind, outcome, str(path), str(case.get("note", "")), which))
    return report


def _run_one(runner: KindRunner, case: dict[str, Any], ctx: CaseContext) -> Outcome | None:
    try:
        return runner(case, ctx)
    except Exception as exc:  # a crash is a failure of that case, not of the run
        return Outcome.fail(case.get("expect"), f"exception: {exc!r}\n{traceback.format_exc(limit=6)}", "run")

"""Load case files, run each case through its kind module, and tally results.

Reading files happens here (this is a component). Every kind module has ``run``: the code production
runs. For nrt-filter and nrt-score that is the scheduler state's vectorised NUMA arrays
(:class:`~numaplane.scheduler.state.SchedulerState`), for nrt-zones the exporter's
:class:`~numaplane.exporter.scan.Scanner`; the plain per-node functions are reference implementations
checked in ``tests/`` only. For the other kinds the pure core's functions are what production calls.
cpu-static and memory-static also have ``run_production``: the resource manager's built-in CPU and
memory plugins as the agent's admission builds and calls them (a second caller of the same code, not a
second implementation); both paths must pass; a production result is tallied under
``"<kind> (production)"``; a production runner returns :class:`NotApplicable` (with why) for a case its
path does not apply to, and the report lists those cases as skipped on that path with the reason.

A case that lacks a field its kind reads, a file that is not UTF-8 text or holds no case are input
errors (:class:`CaseFileError`, naming the file, line, case and field), not failed cases; a case of an
unknown kind fails once (it has no runner on any path).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from numaplane.conformance.errors import CaseFileError
from numaplane.conformance.outcome import CaseContext, CaseDict, MissingField, NotApplicable, Outcome, case_tree

KindRunner = Callable[[dict[str, Any], CaseContext], Outcome | NotApplicable]
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


@dataclass(frozen=True)
class SkippedCase:
    """A case a path does not apply to (see :class:`NotApplicable`)."""

    id: str
    kind: str
    path: str
    reason: str

    @property
    def label(self) -> str:
        return self.kind if self.path == "reference" else f"{self.kind} ({self.path})"


@dataclass
class Report:
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[SkippedCase] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.outcome.passed)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.outcome.passed)

    def by_kind(self) -> dict[str, dict[str, int]]:
        tally: dict[str, dict[str, int]] = {}
        for r in self.results:
            t = tally.setdefault(r.label, {"passed": 0, "failed": 0, "skipped": 0})
            t["passed" if r.outcome.passed else "failed"] += 1
        for skip in self.skipped:
            tally.setdefault(skip.label, {"passed": 0, "failed": 0, "skipped": 0})["skipped"] += 1
        return dict(sorted(tally.items()))

    def skip_reasons(self) -> dict[str, dict[str, int]]:
        """Per kind label: how many cases were skipped for each reason."""
        out: dict[str, dict[str, int]] = {}
        for skip in self.skipped:
            reasons = out.setdefault(skip.label, {})
            reasons[skip.reason] = reasons.get(skip.reason, 0) + 1
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": "numaplane.io/v1",
            "kind": "ConformanceReport",
            "passed": self.passed,
            "failed": self.failed,
            "skipped": len(self.skipped),
            "byKind": self.by_kind(),
            "skippedCases": [{"id": c.id, "kind": c.kind, "path": c.path, "reason": c.reason} for c in self.skipped],
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

    Raise :class:`CaseFileError` naming the file (and line) when a line is not a JSON object, the file
    is not UTF-8 text or cannot be read, or it holds no case at all."""
    lineno = 0
    found = False
    try:
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
                found = True
                yield lineno, case
    except UnicodeDecodeError:
        raise CaseFileError(path, lineno + 1, "not UTF-8 text (a case file is JSON lines)") from None
    except OSError as exc:
        raise CaseFileError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if not found:
        raise CaseFileError(path, None, "no case in it (empty file)")


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

    Unknown kinds (once, whatever the paths) and crashing cases count as failures; a kind without a
    production path is run once (also when only ``production`` is asked for); a case a path does not
    apply to is listed in ``Report.skipped`` with the reason.
    """
    wanted = [p for p in PATHS if p in set(paths_to_run)]
    report = Report()
    extra = list(set_dirs)
    files = [(path, list(iter_cases(path))) for path in paths]  # every file read (and checked) before any run
    for path, cases in files:
        ctx = CaseContext(case_file=path, set_dirs=extra)
        for lineno, case in cases:
            case_id = str(case.get("id", f"{path.name}:{lineno}"))
            kind = str(case.get("kind", ""))
            if (kinds is not None and kind not in kinds) or (ids is not None and case_id not in ids):
                continue
            note = str(case.get("note", ""))
            if not kind or kind_runner(kind) is None:
                unknown = f"unknown kind {kind!r} (no runner; known: {', '.join(known_kinds())})"
                outcome = Outcome.fail("a runner for this kind", unknown, "kind")
                report.results.append(CaseResult(case_id, kind, outcome, str(path), note, wanted[0]))
                continue
            for which in wanted:
                runner = kind_runner(kind, which)
                if runner is None:
                    if "reference" in wanted:
                        continue  # no second caller for this kind: its one runner already ran
                    which, runner = "reference", kind_runner(kind)  # never skipped: run its one runner
                    assert runner is not None
                result = _run_one(runner, case, ctx, path, lineno, case_id)
                if isinstance(result, NotApplicable):
                    report.skipped.append(SkippedCase(case_id, kind, which, result.reason))
                    continue
                report.results.append(CaseResult(case_id, kind, result, str(path), note, which))
    return report


def _run_one(
    runner: KindRunner, case: dict[str, Any], ctx: CaseContext, path: Path, lineno: int, case_id: str
) -> Outcome | NotApplicable:
    try:
        result = runner(case_tree(case), ctx)
    except MissingField as exc:  # the case, not the code: an input error naming the case and the field
        raise CaseFileError(path, lineno, f"case {case_id!r} has no field {exc.field!r}") from None
    except Exception as exc:  # a crash is a failure of that case, not of the run
        return Outcome.fail(case.get("expect"), f"exception: {exc!r}\n{traceback.format_exc(limit=6)}", "run")
    if isinstance(result, Outcome) and not result.passed:  # the case's own values, as plain data again
        return replace(result, expected=_plain(result.expected), got=_plain(result.got))
    return result


def _plain(value: Any) -> Any:
    if isinstance(value, CaseDict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value

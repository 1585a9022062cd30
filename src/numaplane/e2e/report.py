"""Check results and their three renderings: a table, a JSON document, JUnit XML (pure).

A :class:`CheckResult` is one named check with a :class:`Status`: ``pass``, ``fail``, ``warn`` (the
stack works but something deserves a look) or ``skip`` (not applicable here, with the reason). The
suite fails — exit status 1 — exactly when one result is ``fail``. Names are stable
(``crds``, ``operator``, ``nrt/<node>``, ...) so CI systems can track them across runs.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree as ET

__all__ = ["CheckResult", "Report", "Status", "to_json", "to_junit", "to_table"]


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: ``message`` says what was seen and, on failure, what to do."""

    name: str
    status: Status
    message: str
    duration_seconds: float = 0.0
    details: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "durationSeconds": round(self.duration_seconds, 3),
        }
        if self.details:
            out["details"] = list(self.details)
        return out


@dataclass(frozen=True, slots=True)
class Report:
    """Every result of one run, in the order the checks ran."""

    results: tuple[CheckResult, ...]
    duration_seconds: float
    cluster: str = ""
    serial: bool = False
    cleanup_problems: tuple[str, ...] = field(default=())

    @property
    def failed(self) -> bool:
        return any(r.status is Status.FAIL for r in self.results) or bool(self.cleanup_problems)

    def counts(self) -> dict[str, int]:
        return {s.value: sum(1 for r in self.results if r.status is s) for s in Status}

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": "numaplane.io/v1",
            "kind": "E2EReport",
            "cluster": self.cluster,
            "serial": self.serial,
            "passed": not self.failed,
            "counts": self.counts(),
            "durationSeconds": round(self.duration_seconds, 3),
            "results": [r.to_dict() for r in self.results],
            "cleanupProblems": list(self.cleanup_problems),
        }


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def to_junit(report: Report, suite: str = "numaplane-e2e") -> str:
    """JUnit XML: one ``testcase`` per check; ``fail`` → ``failure``, ``skip`` → ``skipped``."""
    counts = report.counts()
    root = ET.Element(
        "testsuites", name=suite, tests=str(len(report.results)), failures=str(counts["fail"]), errors="0"
    )
    node = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(report.results)),
        failures=str(counts["fail"]),
        errors="0",
        skipped=str(counts["skip"]),
        time=f"{report.duration_seconds:.3f}",
    )
    for result in report.results:
        case = ET.SubElement(node, "testcase", classname=suite, name=result.name, time=f"{result.duration_seconds:.3f}")
        text = "\n".join((result.message, *result.details))
        if result.status is Status.FAIL:
            ET.SubElement(case, "failure", message=result.message).text = text
        elif result.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=result.message)
        else:
            ET.SubElement(case, "system-out").text = text
    for problem in report.cleanup_problems:
        case = ET.SubElement(node, "testcase", classname=suite, name="cleanup", time="0")
        ET.SubElement(case, "failure", message=problem).text = problem
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


_MARK = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.WARN: "WARN", Status.SKIP: "SKIP"}


def to_table(report: Report) -> str:
    """Plain text: one line per check, details indented below, then a one-line verdict."""
    rows: list[str] = []
    width = max((len(r.name) for r in report.results), default=4)
    for result in report.results:
        rows.append(f"{_MARK[result.status]:4}  {result.name:<{width}}  {result.message}")
        rows.extend(f"{'':4}  {'':<{width}}    {line}" for line in result.details)
    rows.extend(f"FAIL  {'cleanup':<{width}}  {p}" for p in report.cleanup_problems)
    counts = report.counts()
    verdict = "FAILED" if report.failed else "PASSED"
    summary = ", ".join(f"{counts[s.value]} {s.value}" for s in Status if counts[s.value])
    rows.append(f"\n{verdict}: {summary} in {report.duration_seconds:.1f} s" + (" (serial)" if report.serial else ""))
    return "\n".join(rows) + "\n"


def summary_lines(results: Sequence[CheckResult]) -> list[str]:
    """``name: message`` of every failed result (for one-line errors)."""
    return [f"{r.name}: {r.message}" for r in results if r.status is Status.FAIL]

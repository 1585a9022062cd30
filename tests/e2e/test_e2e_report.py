"""The e2e report's renderings: exit decision, table, JSON, JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from numaplane.e2e.report import CheckResult, Report, Status, to_json, to_junit, to_table

RESULTS = (
    CheckResult("crds", Status.PASS, "4 CRDs established and served", 0.1),
    CheckResult("nrt/n1", Status.FAIL, "stale: exporter pod x is not Ready", 0.01, ("check: kubectl get pods",)),
    CheckResult("agent/n1", Status.WARN, "agent ready; configz unreadable"),
    CheckResult("scheduler", Status.SKIP, "no NUMAResourcesScheduler"),
)


def test_a_failed_check_fails_the_run_and_warnings_do_not() -> None:
    assert Report(RESULTS, 1.0).failed
    assert not Report(tuple(r for r in RESULTS if r.status is not Status.FAIL), 1.0).failed
    assert Report((), 1.0, cleanup_problems=("namespace x not deleted",)).failed


def test_table_json_and_junit() -> None:
    report = Report(RESULTS, 2.5, cluster="test")
    table = to_table(report).splitlines()
    assert table[0].startswith("PASS  crds")
    assert table[1].startswith("FAIL  nrt/n1") and "check: kubectl get pods" in table[2]
    assert table[-1] == "FAILED: 1 pass, 1 fail, 1 warn, 1 skip in 2.5 s"
    doc = json.loads(to_json(report))
    assert doc["kind"] == "E2EReport" and doc["passed"] is False
    assert doc["counts"] == {"pass": 1, "fail": 1, "warn": 1, "skip": 1}
    suite = ET.fromstring(to_junit(report)).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["nrt/n1"].find("failure") is not None
    assert cases["scheduler"].find("skipped") is not None

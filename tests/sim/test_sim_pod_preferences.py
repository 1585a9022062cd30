"""The simulator runs the scheduler that ships, which judges each pod at its own preferences
(``placement/effective.py``): a pod asking pod scope is never sent where only container scope fits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import REPO, numaplane

from numaplane.sim.report import verdict
from numaplane.sim.spec import RunResult


def test_ai_inference_example_gives_no_node_rejection_for_any_overreserve_numa_aware_scheduler() -> None:
    """The shipped example asks ``topology-scope: pod`` on container-scope nodes (issue 24)."""
    path = REPO / "examples/workloads/ai-inference.yaml"
    doc = json.loads(numaplane("simulate", "-q", "--workload", str(path), "-o", "json").stdout)
    # over-reserve: the cache accounts the pods it sent since the last NRT (passthrough judges stale NRTs)
    aware = [s for s in doc["schedulers"] if s["scheduler"].endswith("-overreserve")]
    assert len(aware) >= 4
    assert {s["scheduler"]: s["rejectedAtNode"] for s in aware} == {s["scheduler"]: 0 for s in aware}
    assert all(s["failedAfterRecreates"] == 0 for s in aware)


def _run(name: str, rejected: dict[str, int], failed: int, placed: int = 10) -> RunResult:
    return RunResult(name, pods=20, placed=placed, rejections=rejected, failed=failed)


def test_verdict_names_every_numa_aware_scheduler_with_rejections_or_lost_pods() -> None:
    results = [
        _run("default", {"TopologyAffinityError": 9}, 3),
        _run("numa-a", {}, 0, placed=15),
        _run("numa-b", {}, 0, placed=14),
        _run("numa-c", {"TopologyAffinityError": 4}, 2, placed=12),
    ]
    text = verdict(results, policy="single-numa-node")
    assert "numa-c (4 rejected, 2 lost)" in text
    assert "as did 1 other NUMA-aware scheduler(s)" in text


def test_verdict_does_not_blame_stale_nrts_where_the_numa_filter_does_not_apply() -> None:
    results = [_run("default", {"TopologyAffinityError": 9}, 3), _run("numa-a", {"TopologyAffinityError": 5}, 1)]
    text = verdict(results, policy="best-effort")
    assert "stale" not in text and "does not apply" in text and "'best-effort'" in text


def test_verdict_says_invalid_preferences_are_the_cause() -> None:
    results = [_run("default", {"InvalidPreference": 16}, 4, 0), _run("numa-a", {"InvalidPreference": 16}, 4, 0)]
    text = verdict(results, policy="single-numa-node")
    assert "stale" not in text and "numaplane.io/ annotations are invalid" in text


def test_simulation_verdict_shows_an_invalid_preference_with_its_message(tmp_path: Path) -> None:
    workload = tmp_path / "bad.yaml"
    workload.write_text(
        "apiVersion: numaplane.io/v1\nkind: Workload\npods:\n  - name: bad\n    count: 4\n    interval: 1\n"
        "    annotations: {numaplane.io/cpu-strategy: fastest}\n    spec:\n      containers:\n        - name: c\n"
        "          resources:\n            requests: {cpu: '2', memory: 2Gi}\n            limits: {cpu: '2', memory: 2Gi}\n"
    )
    doc = json.loads(numaplane("simulate", "-q", "--workload", str(workload), "-o", "json").stdout)
    assert "numaplane.io/cpu-strategy='fastest'" in doc["verdict"] and "stale" not in doc["verdict"]
    assert "refuse them" in doc["verdict"]

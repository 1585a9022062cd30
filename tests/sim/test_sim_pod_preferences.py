"""The simulator runs the scheduler that ships, which judges each pod at its own preferences
(``placement/model/effective.py``): a pod asking pod scope is never sent where only container scope fits."""

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


def _run(name: str, rejected: dict[str, int], failed: int, placed: int = 10, unfiltered: int = 0) -> RunResult:
    return RunResult(name, pods=20, placed=placed, rejections=rejected, failed=failed, unfiltered=unfiltered)


def test_verdict_names_every_numa_aware_scheduler_with_rejections_or_lost_pods() -> None:
    results = [
        _run("default", {"TopologyAffinityError": 9}, 3),
        _run("numa-a", {}, 0, placed=15),
        _run("numa-b", {}, 0, placed=14),
        _run("numa-c", {"TopologyAffinityError": 4}, 2, placed=12),
    ]
    text = verdict(results, policy="single-numa-node")
    assert "numa-c (4 rejected: 4 judged on a stale view, 2 lost)" in text
    assert "as did 1 other NUMA-aware scheduler(s)" in text


def test_verdict_does_not_blame_stale_nrts_where_the_numa_filter_does_not_apply() -> None:
    results = [
        _run("default", {"TopologyAffinityError": 9}, 3),
        _run("numa-a", {"TopologyAffinityError": 5}, 1, unfiltered=5),
    ]
    text = verdict(results, policy="best-effort")
    assert "no longer true" not in text and "5 were of pods the NUMA filter does not judge" in text
    assert "'best-effort'" in text


def test_verdict_derives_the_cause_from_the_runs_facts_not_the_nodes_policy() -> None:
    """Under best-effort nodes, pods asking topology-policy single-numa-node are judged by the filter:
    their rejections are the filter's (a stale view), the others are not; each named with its count."""
    results = [
        _run("default", {"TopologyAffinityError": 9}, 3),
        _run("numa-a", {"TopologyAffinityError": 5}, 1, unfiltered=3),
        _run("numa-b", {"TopologyAffinityError": 7, "InvalidPreference": 1}, 2, unfiltered=4),
    ]
    text = verdict(results, policy="best-effort")
    assert "3 were of pods the NUMA filter does not judge" in text
    assert "2 were of pods the NUMA filter judged on a view of the node that was no longer true" in text
    assert "numa-b (8 rejected: 3 judged on a stale view, 4 not judged by the NUMA filter, 1 InvalidPreference" in text


def test_simulation_counts_rejections_the_numa_filter_did_not_judge() -> None:
    """Under best-effort nodes the NUMA filter judges no plain pod: every rejection a NUMA-aware
    scheduler has is counted as not judged, and the verdict does not blame a stale view."""
    doc = json.loads(
        numaplane(
            "simulate",
            "-q",
            "--policy",
            "best-effort",
            "--schedulers",
            "default,numa:LeastAllocated:overreserve",
            "-o",
            "json",
        ).stdout
    )
    aware = next(s for s in doc["schedulers"] if s["scheduler"] != "default")
    assert aware["rejectedAtNode"] > 0  # the case shows something
    assert aware["rejectedWithoutNumaFilter"] == aware["rejectedAtNode"]
    assert "no longer true" not in doc["verdict"] and "does not judge" in doc["verdict"]


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
    # the NUMA-aware schedulers hold the pods (their filter rejects them on every node) and say why
    aware = [s for s in doc["schedulers"] if s["scheduler"] != "default"]
    assert aware and all(s["pendingInvalidPreference"] == 4 == s["pending"] for s in aware)
    assert "4 pod(s) wait pending under the NUMA-aware scheduler(s) because every node refuses" in doc["verdict"]
    assert "that fit no NUMA zone" not in doc["verdict"]


def test_html_report_verdict_knows_the_nodes_policy(tmp_path: Path) -> None:
    """The HTML report's verdict is the table's and the JSON's (the nodes' policy named in the cause)."""
    from numaplane.sim.report import write_report

    results = [
        _run("default", {"TopologyAffinityError": 9}, 3),
        _run("numa-a", {"TopologyAffinityError": 5}, 1, unfiltered=5),
    ]
    page = write_report(results, {"topologyManager": "best-effort / container"}, tmp_path).read_text()
    assert "the nodes&#x27; topology manager policy is &#x27;best-effort&#x27;" in page


def test_pods_asking_single_numa_node_on_best_effort_nodes_are_judged_as_on_single_numa_node_nodes(
    tmp_path: Path,
) -> None:
    """The ai-inference example with every pod asking ``topology-policy: single-numa-node``, on
    best-effort nodes: the NUMA filter judges every pod (none of the rejections is "not judged"), the
    over-reserve schedulers have no rejection, and the verdict blames no node policy."""
    text = (REPO / "examples/workloads/ai-inference.yaml").read_text()
    snn = "numaplane.io/topology-policy: single-numa-node"
    text = text.replace(
        "annotations: {numaplane.io/topology-scope: pod}", f"annotations: {{numaplane.io/topology-scope: pod, {snn}}}"
    )
    text = text.replace("    interval: 0.5\n", f"    interval: 0.5\n    annotations: {{{snn}}}\n")
    assert text.count(snn) == 2
    workload = tmp_path / "ai-snn.yaml"
    workload.write_text(text)
    doc = json.loads(
        numaplane("simulate", "-q", "--workload", str(workload), "--policy", "best-effort", "-o", "json").stdout
    )
    aware = [s for s in doc["schedulers"] if s["scheduler"] != "default"]
    assert all(s["rejectedWithoutNumaFilter"] == 0 for s in aware)
    assert all(s["rejectedAtNode"] == 0 for s in aware if s["scheduler"].endswith("-overreserve"))
    assert "does not judge" not in doc["verdict"] and "'best-effort'" not in doc["verdict"]

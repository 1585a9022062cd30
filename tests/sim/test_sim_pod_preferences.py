"""The simulator runs the scheduler that ships, which judges each pod at its own preferences
(``placement/effective.py``): a pod asking pod scope is never sent where only container scope fits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import REPO, numaplane


def test_ai_inference_example_gives_no_node_rejection_for_any_numa_aware_scheduler() -> None:
    """The shipped example asks ``topology-scope: pod`` on container-scope nodes (issue 24)."""
    path = REPO / "examples/workloads/ai-inference.yaml"
    doc = json.loads(numaplane("simulate", "-q", "--workload", str(path), "-o", "json").stdout)
    aware = [s for s in doc["schedulers"] if s["scheduler"].startswith("numa-")]
    assert len(aware) >= 5
    assert {s["scheduler"]: s["rejectedAtNode"] for s in aware} == {s["scheduler"]: 0 for s in aware}
    assert all(s["failedAfterRecreates"] == 0 for s in aware)

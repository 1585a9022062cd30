"""The simulator's output makes its case (issue 14, item 8) and a built-in machine is one machine in
every command, with plausible memory where its snapshot had none (item 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import REPO, numaplane

from numaplane.sim.cluster import build_templates, load_topology

TWO = "default,numa:LeastAllocated:overreserve"


def test_output_leads_with_a_verdict_and_explains_every_column() -> None:
    run = numaplane("simulate", "-q", "--nodes", "12")
    assert run.code == 0, run.stderr
    lines = [line.rstrip() for line in run.stdout.splitlines()]
    assert lines[0].startswith("Verdict. The default scheduler")
    assert "rejected" in lines[0] and "lost for good" in run.stdout
    for column in ("placed:", "rejected at node:", "pending:", "CPU util:", "fragmentation:", "attempts:"):
        assert any(line.startswith(column) for line in lines), column
    header = next(line for line in lines if "scheduler" in line and "placed" in line)
    assert "NUMA-aligned" not in header  # 100% for every scheduler under single-numa-node
    assert "not shown: NUMA-aligned is 100.0% for every scheduler" in run.stdout


def test_generated_workload_scales_with_nodes() -> None:
    doc = json.loads(numaplane("simulate", "-q", "--nodes", "72", "--schedulers", "default", "-o", "json").stdout)
    assert doc["inputs"]["pods"] == 2000 and doc["verdict"]
    assert doc["schedulers"][0]["cpuUtilisation"] > 0.3


@pytest.mark.parametrize("example", ["telco-mix", "ai-inference"])
def test_example_workloads_show_a_difference(example: str) -> None:
    path = REPO / "examples/workloads" / f"{example}.yaml"
    doc = json.loads(numaplane("simulate", "-q", "--workload", str(path), "--schedulers", TWO, "-o", "json").stdout)
    default, aware = doc["schedulers"]
    assert default["rejectedAtNode"] > 0 and aware["rejectedAtNode"] == 0
    assert aware["placed"] > default["placed"]


MEMORYLESS = [
    "amd-epyc7451-2s8n-96t",
    "amd-ryzen5-1600-1s1n-12t",
    "intel-xeon-x7550-4s-64t-3nodes",
    "riscv-sophgo-sg2042-1s4n-64c",
]


@pytest.mark.parametrize("name", MEMORYLESS)
def test_machines_without_memory_data_get_plausible_memory(name: str) -> None:
    topology = load_topology(name)
    for node in topology.numa_nodes:
        if not node.cpus.is_empty():
            assert node.memory_total_bytes == node.cpus.size() * (4 << 30)


def test_one_name_is_one_machine_in_admit_and_simulate(tmp_path: Path) -> None:
    name = "amd-epyc7451-2s8n-96t"
    templates = build_templates([(name, 2)], policy="single-numa-node", scope="container")
    assert all(t.topology == load_topology(name) for t in templates)  # what admit --topology NAME loads
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: '2', memory: 1Gi}}}]}\n"
    )
    doc = json.loads(numaplane("admit", "--topology", name, str(pod), "-o", "json").stdout)
    assert all(v["memory"] > 0 for v in doc["available"].values())
    run = numaplane(
        "simulate", "-q", "--topology", f"{name}=10", "--pods", "100", "--schedulers", "default", "-o", "json"
    )
    result = json.loads(run.stdout)["schedulers"][0]
    assert result["placed"] >= 80 and result["cpuUtilisation"] > 0.1


def test_verdict_with_only_the_default_scheduler_names_no_numa_aware_one() -> None:
    from numaplane.sim.report import verdict
    from numaplane.sim.spec import RunResult

    text = verdict([RunResult("default", pods=10, placed=8, rejections={"TopologyAffinityError": 3}, failed=2)])
    assert "NUMA-aware scheduler," not in text and "rejected 3 bindings" in text and "--schedulers" in text

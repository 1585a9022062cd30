"""Strict in, honest out (issue 26 findings 2, 3 and the ``simulate`` part of 11): what-if options that
do not apply are usage errors, the what-if table says where every added pod went, and bad inputs of
``simulate`` exit 2 naming them. Each test runs the real ``numaplane`` entry point in a subprocess."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import numaplane

from numaplane.nrt.from_manager import node_nrt
from numaplane.policy.config import parse_config
from numaplane.policy.manager import ResourceManager
from numaplane.sim.snapshot import SnapshotWriter, reduce_nrt, reduce_pod
from numaplane.topology.model import synthetic


def _spec(cpus: int) -> dict[str, Any]:
    def req() -> dict[str, str]:
        return {"cpu": str(cpus), "memory": "1Gi"}

    return {"containers": [{"name": "c", "resources": {"requests": req(), "limits": req()}}]}


def _snapshot(tmp_path: Path, pending: Sequence[dict[str, Any]] = ()) -> Path:
    """One empty node modelled from its NRT: 2 NUMA nodes × 8 CPUs, 2 reserved, single-numa-node;
    ``pending``: pods waiting for a node."""
    topology = synthetic(sockets=2, cores_per_numa=8, threads_per_core=1)
    config = parse_config(
        {
            "topologyManager": {"policy": "single-numa-node"},
            "cpuManager": {"policy": "static", "reservedCPUCount": 2},
            "memoryManager": {"policy": "None"},
        }
    )
    out = io.StringIO()
    writer = SnapshotWriter(out, {"source": "test"})
    writer.section("nodes")
    writer.add(
        {"name": "n1", "labels": {"pool": "numa"}, "allocatable": {"cpu": "14", "memory": "100Gi", "pods": "110"}}
    )
    writer.section("nodeResourceTopologies")
    writer.add(reduce_nrt(node_nrt(ResourceManager(topology, config), "n1").to_dict()))
    writer.section("pods")
    for pod in pending:
        writer.add(reduce_pod(pod))
    writer.close()
    path = tmp_path / "snap.yaml"
    path.write_text(out.getvalue())
    return path


def _workload(tmp_path: Path) -> Path:
    """Two 7-CPU pods (the second fits the node's allocatable but no NUMA zone) and one 20-CPU pod."""
    doc = {
        "apiVersion": "numaplane.io/v1",
        "kind": "Workload",
        "pods": [{"name": "big", "count": 2, "spec": _spec(7)}, {"name": "huge", "count": 1, "spec": _spec(20)}],
    }
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


# ---- finding 1: the scenario is checked against its schema, every problem named by its path ---------


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (
            {"policies": [{"config": {"topologyManager": {"policy": "single-numa"}}}]},
            "policies[0].config.topologyManager.policy: 'single-numa' is not one of none, best-effort, restricted",
        ),
        (
            {"policies": [{"config": {"cpuManager": {"reservedCPUCount": "lots"}}}]},
            "policies[0].config.cpuManager.reservedCPUCount: expected an integer, got a string",
        ),
        ({"policies": [{"nodeSelector": "pool=numa", "config": {}}]}, "policies[0].config: empty"),
        ({"policies": [{"nodeSelector": "pool=numa"}]}, "policies[0]: 'config' is required"),
        ({"apiVersion": "numaplane.io/v2"}, "apiVersion: expected 'numaplane.io/v1', got 'numaplane.io/v2'"),
        ({"schedulers": "default"}, "schedulers: expected a list, got a string"),
        ({"workload": {"podz": []}}, "workload.podz: unknown field"),
        (
            {"policies": [{"nodeSelecter": "pool=numa", "config": {"topologyManger": {}}}]},
            "2 problems: policies[0].nodeSelecter: unknown field (known: nodeSelector, config); "
            "policies[0].config.topologyManger: unknown field (known: topologyManager, cpuManager,",
        ),
    ],
)
def test_scenario_is_checked_against_its_schema(tmp_path: Path, doc: dict[str, Any], problem: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"kind": "WhatIfScenario", **doc}))
    run = numaplane("simulate", "--from", str(_snapshot(tmp_path)), "--scenario", str(scenario))
    assert run.code == 2, run.stderr
    assert run.error_line.startswith(f"Error: {scenario}: ")
    assert problem in run.error_line


def test_a_change_valid_alone_but_not_on_a_node_names_the_change_and_the_node(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    change = {"nodeSelector": "pool=numa", "config": {"cpuManager": {"options": {"full-pcpus-onlyy": "true"}}}}
    scenario.write_text(yaml.safe_dump({"kind": "WhatIfScenario", "policies": [change]}))
    run = numaplane("simulate", "--from", str(_snapshot(tmp_path)), "--scenario", str(scenario))
    assert run.code == 2, run.stderr
    assert f"{scenario}: policies[0] on node n1: " in run.error_line
    assert "cpuManager.options.full-pcpus-onlyy: unknown option" in run.error_line


# ---- finding 2: what-if options without --from, generated-simulation options with it ----------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--set-policy", "single-numa-node"], "--set-policy"),
        (["--add-workload", "w.yaml"], "--add-workload"),
        (["--scenario", "does-not-exist.yaml"], "--scenario"),
    ],
)
def test_what_if_options_without_from_are_usage_errors(args: list[str], flag: str) -> None:
    run = numaplane("simulate", *args)
    assert run.code == 2, run.stderr
    assert f"{flag} needs --from SNAPSHOT" in run.error_line
    assert run.stdout == ""  # no default simulation was run


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--nodes", "3"], "--nodes does not apply with --from (the snapshot gives the nodes)"),
        (["--report", "out"], "--report does not apply with --from (the what-if writes no HTML report"),
        (["--policy", "none"], "--policy does not apply with --from (change policies with --set-policy"),
        (["--workload", "w.yaml"], "--workload does not apply with --from (add pods with --add-workload"),
        (["--resync-period", "3"], "--resync-period does not apply with --from"),
    ],
)
def test_options_that_do_not_apply_with_from_are_usage_errors(tmp_path: Path, args: list[str], reason: str) -> None:
    run = numaplane("simulate", "--from", str(_snapshot(tmp_path)), *args)
    assert run.code == 2, run.stderr
    assert reason in run.error_line
    assert not (tmp_path / "out").exists()


def test_options_a_what_if_uses_are_accepted(tmp_path: Path) -> None:
    run = numaplane(
        "simulate",
        "--from",
        str(_snapshot(tmp_path)),
        "--schedulers",
        "default",
        "--validate",
        "warn",
        "-q",
        "-o",
        "json",
    )
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["schedulers"][0]["scheduler"] == "default"


# ---- finding 3: the what-if table shows the added workload's rejections and each pod's fate ----------


def test_what_if_table_shows_rejections_and_where_each_added_pod_went(tmp_path: Path) -> None:
    snap, workload = _snapshot(tmp_path), _workload(tmp_path)
    run = numaplane("simulate", "--from", str(snap), "--add-workload", str(workload))
    assert run.code == 0, run.stderr
    text = run.stdout
    row = next(line for line in text.splitlines() if line.startswith("│ default"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    # scheduler, now failing, pending placed, still pending, added placed / rejected / pending, rejected at node
    assert cells[4:7] == ["1/3", "1/3", "1/3"]
    assert cells[7].startswith("TopologyAffinityError ×")
    assert "added pod default/big-0: placed on n1" in text
    assert "added pod default/big-1: rejected at node: TopologyAffinityError on n1 ×" in text
    assert "added pod default/huge: pending: no node fits" in text
    doc = json.loads(numaplane("simulate", "--from", str(snap), "--add-workload", str(workload), "-o", "json").stdout)
    (scheduler,) = doc["schedulers"]
    added = scheduler["addedWorkload"]
    assert (added["pods"], added["placed"], added["rejected"], added["pending"]) == (3, 1, 1, 1)
    # the table's counts are the document's, and the document's tally is its pods' rejections
    attempts = sum(len(p["rejections"]) for p in scheduler["addedPods"])
    assert added["rejectedAtNode"] == {"TopologyAffinityError": attempts}
    assert f"TopologyAffinityError ×{attempts}" == cells[7]
    assert [(p["pod"], p["outcome"]) for p in scheduler["addedPods"]] == [
        ("default/big-0", "placed"),
        ("default/big-1", "rejected"),
        ("default/huge", "pending"),
    ]


def test_what_if_says_why_a_pending_pod_stays_pending(tmp_path: Path) -> None:
    meta = {"namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}
    pods = [
        {"metadata": {"name": "waiting", "uid": "u1", **meta}, "spec": _spec(7)},
        {"metadata": {"name": "too-big", "uid": "u2", **meta}, "spec": _spec(20)},
    ]
    run = numaplane("simulate", "--from", str(_snapshot(tmp_path, pods)))
    assert run.code == 0, run.stderr
    assert "pending pod default/waiting would fit on n1" in run.stdout
    assert "pending pod default/too-big not placed: pending: no node fits" in run.stdout


# ---- finding 11 (simulate part): bad inputs exit 2 naming them; --topology bounded ------------------


@pytest.mark.parametrize(
    ("option", "what"),
    [
        ("--from", "cannot read: No such file"),
        ("--scenario", "cannot read scenario"),
        ("--add-workload", "cannot read workload"),
    ],
)
def test_a_missing_what_if_input_exits_2_naming_it(tmp_path: Path, option: str, what: str) -> None:
    missing = tmp_path / "missing.yaml"
    args = (
        ["--from", str(missing)] if option == "--from" else ["--from", str(_snapshot(tmp_path)), option, str(missing)]
    )
    run = numaplane("simulate", *args)
    assert run.code == 2, run.stderr
    assert str(missing) in run.error_line and what in run.error_line


@pytest.mark.parametrize(
    ("option", "what"),
    [
        ("--from", "apiVersion: expected 'numaplane.io/v1'"),
        ("--scenario", "kind: expected 'WhatIfScenario', got 'Pod'"),
        ("--add-workload", "kind: expected 'Workload', got 'Pod'"),
    ],
)
def test_a_what_if_input_of_the_wrong_kind_exits_2_naming_it(tmp_path: Path, option: str, what: str) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    args = ["--from", str(pod)] if option == "--from" else ["--from", str(_snapshot(tmp_path)), option, str(pod)]
    run = numaplane("simulate", *args)
    assert run.code == 2, run.stderr
    assert str(pod) in run.error_line and what in run.error_line


def test_a_missing_topology_file_says_it_does_not_exist(tmp_path: Path) -> None:
    run = numaplane("simulate", "--topology", "./missing.yaml")
    assert run.code == 2, run.stderr
    assert "./missing.yaml" in run.error_line and "no such file" in run.error_line
    assert "built-in" not in run.error_line
    unknown = numaplane("simulate", "--topology", "no-such-machine")
    assert unknown.code == 2 and "not a built-in name" in unknown.error_line


@pytest.mark.parametrize("count", ["100000", "0", "-3"])
def test_topology_count_is_bounded(count: str) -> None:
    run = numaplane("simulate", "--topology", f"intel-xeon-4s4n-144t={count}", timeout=30)
    assert run.code == 2, run.stderr
    assert f"--topology 'intel-xeon-4s4n-144t={count}'" in run.error_line
    assert "count" in run.error_line


def test_nodes_is_bounded() -> None:
    run = numaplane("simulate", "--nodes", "1000000", timeout=30)
    assert run.code == 2, run.stderr
    assert "--nodes" in run.error_line

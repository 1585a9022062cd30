"""Strict in, honest out (issue 26): inputs with a typo are refused, naming the path, rather than
answered with a confident, wrong result. Each test runs the real ``numaplane`` entry point in a
subprocess and checks the exit code and the one-line message."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from cli_helpers import numaplane

from numaplane.sim.snapshot import SnapshotWriter

_REQ = {"cpu": "2", "memory": "1Gi"}
_SPEC = {"containers": [{"name": "c", "resources": {"requests": _REQ, "limits": _REQ}}]}


def _snapshot(tmp_path: Path) -> Path:
    """Two nodes from capacity (pool=numa, pool=plain), no pods, written by the real writer."""
    out = io.StringIO()
    writer = SnapshotWriter(out, {"source": "test"})
    writer.section("nodes")
    for name, pool in (("n1", "numa"), ("n2", "plain")):
        writer.add({"name": name, "labels": {"pool": pool}, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}})
    writer.close()
    path = tmp_path / "snap.yaml"
    path.write_text(out.getvalue())
    return path


def _write(tmp_path: Path, name: str, doc: object) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


# ---- finding 1: what-if scenarios -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        ({"nodeSelecter": "pool=numa", "config": {"topologyManager": {"policy": "single-numa-node"}}}, "nodeSelecter"),
        ({"config": {"topologyManger": {"policy": "single-numa-node"}}}, "config.topologyManger"),
        ({"config": {"topologyManager": {"polcy": "single-numa-node"}}}, "config.topologyManager.polcy"),
    ],
)
def test_unknown_key_inside_scenario_policies_is_an_error_naming_the_path(
    tmp_path: Path, policy: dict[str, object], path: str
) -> None:
    snap = _snapshot(tmp_path)
    scenario = _write(tmp_path, "s.yaml", {"kind": "WhatIfScenario", "policies": [policy]})
    run = numaplane("simulate", "--from", str(snap), "--scenario", str(scenario))
    assert run.code == 2, run.stderr
    assert f"policies[0].{path}" in run.error_line
    assert "unknown field" in run.error_line


def test_set_policy_selector_matching_no_node_is_an_error(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path)
    run = numaplane("simulate", "--from", str(snap), "--set-policy", "single-numa-node@pool=nothing")
    assert run.code == 2, run.stderr
    assert "--set-policy 'single-numa-node@pool=nothing'" in run.error_line
    assert "matches none of the snapshot's 2 node(s)" in run.error_line
    ok = numaplane("simulate", "--from", str(snap), "--set-policy", "single-numa-node@pool=numa", "-o", "json")
    assert ok.code == 0, ok.stderr
    assert json.loads(ok.stdout)["schedulers"]


# ---- issue 25 item 4: YAML alias bombs ------------------------------------------------------------

_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def test_yaml_alias_bomb_is_refused_by_the_document_reader() -> None:
    from numaplane.documents import DocumentError, load_yaml

    with pytest.raises(DocumentError, match="aliases"):
        load_yaml(_BOMB)
    assert load_yaml("a: &x 1\nb: *x\n") == {"a": 1, "b": 1}  # an alias to a scalar expands to nothing


def test_yaml_alias_bomb_snapshot_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("apiVersion: numaplane.io/v1\nkind: ClusterSnapshot\n" + _BOMB.replace("a:", "nodes:", 1))
    run = numaplane("simulate", "--from", str(path), timeout=30)
    assert run.code == 2, run.stderr
    assert str(path) in run.error_line and "aliases" in run.error_line

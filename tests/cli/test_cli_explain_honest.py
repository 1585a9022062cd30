"""Strict in, honest out (issue 26 finding 9): ``explain`` scores only nodes the pod fits and tells an
input with nothing to explain (exit 2) from "fits nowhere" (exit 1). Each test runs the real
``numaplane`` entry point in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import REPO, numaplane

POD = str(REPO / "examples/pods/guaranteed.yaml")  # 4 CPUs, 8 GiB: Guaranteed


def _nrt(name: str, cpus: int) -> dict[str, Any]:
    rows = (("cpu", str(cpus)), ("memory", "64Gi"))
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [{"name": r, "capacity": v, "allocatable": v, "available": v} for r, v in rows],
            }
        ],
    }


def _write(path: Path, doc: object) -> str:
    path.write_text(yaml.safe_dump(doc) if doc is not None else "")
    return str(path)


# ---- finding 9: explain ------------------------------------------------------------------------------


def test_explain_prints_no_score_for_a_node_the_pod_does_not_fit(tmp_path: Path) -> None:
    folder = tmp_path / "nrts"
    folder.mkdir()
    _write(folder / "roomy.yaml", _nrt("roomy", 16))
    _write(folder / "small.yaml", _nrt("small", 2))
    table = numaplane("explain", "--pod", POD, "--nrt", str(folder))
    assert table.code == 0, table.stderr
    rows = {
        cells[0]: cells
        for line in table.stdout.splitlines()
        if line.startswith("│") and (cells := [c.strip() for c in line.strip("│").split("│")])[0]
    }
    assert rows["small"][1:3] == ["no", "-"]
    assert rows["roomy"][1] == "yes" and rows["roomy"][2].isdigit()
    doc = json.loads(numaplane("explain", "--pod", POD, "--nrt", str(folder), "-o", "json").stdout)
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert nodes["small"]["fits"] is False and nodes["small"]["score"] is None
    assert nodes["roomy"]["fits"] is True and isinstance(nodes["roomy"]["score"], int)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: (p / "empty").mkdir() or p / "empty", "no NodeResourceTopology object (no .yaml/.yml/.json file"),
        (lambda p: Path(_write(p / "pod.yaml", {"apiVersion": "v1", "kind": "Pod"})), "kind 'Pod' is not"),
        (lambda p: Path(_write(p / "blank.yaml", None)), "no NodeResourceTopology object (no document in it)"),
        (lambda p: Path(_write(p / "anon.yaml", {"kind": "NodeResourceTopology"})), "no node to explain"),
    ],
)
def test_explain_on_an_input_with_nothing_to_explain_is_an_input_error(tmp_path: Path, make: Any, words: str) -> None:
    path = make(tmp_path)
    run = numaplane("explain", "--pod", POD, "--nrt", str(path))
    assert run.code == 2, run.stderr  # not 1: "fits nowhere" is for nodes that were checked
    assert f"--nrt {path}" in run.error_line and words in run.error_line


def test_explain_on_a_binary_nrt_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nrt.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    run = numaplane("explain", "--pod", POD, "--nrt", str(path))
    assert run.code == 2, run.stderr
    assert f"--nrt {path}" in run.error_line and "not UTF-8" in run.error_line


def test_explain_still_exits_1_when_the_pod_fits_nowhere(tmp_path: Path) -> None:
    run = numaplane("explain", "--pod", POD, "--nrt", _write(tmp_path / "n.yaml", _nrt("small", 2)))
    assert run.code == 1 and run.stderr == ""
    assert "fits 0 node(s)" in run.stdout

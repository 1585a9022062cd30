"""Issue 26 finding 5, issue 23 item 8, issue 25 items 5 and 11 (snapshot part): ``simulate --from``
refuses a truncated or inconsistent snapshot naming what is wrong, says only what it compared, and
loads a real cluster's snapshot even when a node cannot be modelled (that node is named and skipped).
Each test runs the real ``numaplane`` entry point in a subprocess."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import numaplane
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numaplane.sim.errors import SnapshotFormatError
from numaplane.sim.snapshot import SnapshotWriter, read_snapshot
from numaplane.sim.whatif import load_cluster

_POLICY = {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container"}


def _zone(numa: int, memory_allocatable: str = "15Gi", extra: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    return {
        "name": f"node-{numa}",
        "type": "Node",
        "costs": [{"name": f"node-{i}", "value": 10 if i == numa else 20} for i in (0, 1)],
        "resources": [
            {"name": "cpu", "capacity": "8", "allocatable": "7", "available": "7"},
            {"name": "memory", "capacity": "16Gi", "allocatable": memory_allocatable, "available": memory_allocatable},
            *extra,
        ],
    }


def _node(name: str, **changes: Any) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {},
        "capacity": {"cpu": "16", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "14", "memory": "30Gi", "pods": "110"},
        **changes,
    }


def _nrt(name: str, *zones: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "attributes": [], "zones": list(zones) or [_zone(0), _zone(1)], "policy": _POLICY}


def _snapshot(tmp_path: Path, nodes: list[dict[str, Any]], nrts: list[dict[str, Any]]) -> Path:
    out = io.StringIO()
    writer = SnapshotWriter(out, {"source": "test"})
    writer.section("nodes")
    for node in nodes:
        writer.add(node)
    writer.section("nodeResourceTopologies")
    for nrt in nrts:
        writer.add(nrt)
    writer.close()
    path = tmp_path / "snap.yaml"
    path.write_text(out.getvalue())
    return path


# ---- truncated or inconsistent files are refused ------------------------------------------------


def test_a_snapshot_cut_after_nodes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cut.yaml"
    path.write_text("apiVersion: numaplane.io/v1\nkind: ClusterSnapshot\nmetadata: {}\nnodes:\n")
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 2, run.stdout
    assert run.error_line == (
        f"Error: {path}: nodeResourceTopologies: section missing: the writer writes every section "
        "(is the file truncated?)"
    )


def test_a_snapshot_without_its_summary_footer_is_refused(tmp_path: Path) -> None:
    path = _snapshot(tmp_path, [_node("w1")], [_nrt("w1")])
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))  # the footer is the last line
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 2, run.stdout
    assert "summary: missing: the writer ends every snapshot with it" in run.error_line


def test_a_summary_that_differs_from_the_items_is_refused(tmp_path: Path) -> None:
    path = _snapshot(tmp_path, [_node("w1"), _node("w2")], [_nrt("w1")])
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if not line.startswith('- {"name":"w2"')))
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 2, run.stdout
    assert f"{path}: summary: nodes 2 in the summary, 1 read (is the file truncated?)" in run.error_line


@pytest.mark.parametrize(
    ("changes", "where", "reason"),
    [
        ({"capacity": {"cpu": "lots", "memory": "1Gi"}}, "nodes[0] (w1).capacity.cpu", "invalid quantity 'lots'"),
        ({"labels": ["a", "b"]}, "nodes[0] (w1).labels", "expected a mapping, got list"),
        ({"capacity": [1], "allocatable": None}, "nodes[0] (w1).capacity", "expected a mapping, got list"),
        ({"allocatable": {"cpu": {"x": 1}}}, "nodes[0] (w1).allocatable.cpu", "expected a string"),
    ],
    ids=["cpu-lots", "labels-list", "capacity-list", "allocatable-object"],
)
def test_a_node_item_the_rebuild_cannot_read_is_refused_by_name(
    tmp_path: Path, changes: dict[str, Any], where: str, reason: str
) -> None:
    path = _snapshot(tmp_path, [_node("w1", **changes)], [])
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 2, run.stdout
    assert f"Error: {path}: {where}: {reason}" in run.error_line


@pytest.mark.parametrize(
    ("inner", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ("9" * 5000, "not usable JSON: Exceeds the limit"),
    ],
    ids=["deep", "5000-digits"],
)
def test_a_hostile_item_line_is_one_line_naming_the_line(tmp_path: Path, inner: str, reason: str) -> None:
    path = _snapshot(tmp_path, [_node("w1")], [])
    path.write_text(path.read_text().replace('- {"name":"w1"', '- {"x":' + inner + ',"name":"w1"', 1))
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 2, run.stdout
    assert f"Error: {path}: line " in run.error_line and "(nodes): " + reason in run.error_line


# ---- every summary printed is computed from what was compared -----------------------------------


def test_no_match_is_claimed_when_no_nrt_was_usable(tmp_path: Path) -> None:
    broken = {"name": "w1", "attributes": [], "zones": [{"name": "socket-0", "type": "Socket", "resources": []}]}
    path = _snapshot(tmp_path, [_node("w1")], [broken])
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 0, run.stderr
    assert "matches the NRT objects" not in run.stdout
    assert "per-zone availability not compared: no node is modelled from a usable NRT object" in run.stdout
    doc = json.loads(numaplane("simulate", "--from", str(path), "-o", "json").stdout)
    assert doc["baseline"]["matchesNRT"] is None and doc["baseline"]["nodesComparedWithNRT"] == 0


def test_a_match_says_how_many_nodes_were_compared(tmp_path: Path) -> None:
    path = _snapshot(tmp_path, [_node("w1"), _node("w2")], [_nrt("w1")])
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 0, run.stderr
    assert "per-zone availability matches the NRT objects on all 1 node(s) compared" in run.stdout


# ---- a real cluster's snapshot loads; a node that cannot be modelled is named and skipped ---------


def test_memory_allocatable_equal_to_capacity_loads_and_is_noted(tmp_path: Path) -> None:
    """Issue 23 item 8: it failed with "[memorymanager] you should specify the system reserved memory"."""
    full = _nrt("w1", _zone(0, "16Gi"), _zone(1, "16Gi"))
    path = _snapshot(tmp_path, [_node("w1"), _node("w2")], [full, _nrt("w2")])
    run = numaplane("simulate", "--from", str(path))
    assert run.code == 0, run.stderr
    assert "snapshot: 2 nodes (2 from NRT)" in run.stdout
    assert "model of w1: the NRT reports no reserved memory (allocatable equals capacity)" in run.stdout


def test_an_nrt_row_of_capacity_1e15_is_bounded_not_allocated(tmp_path: Path) -> None:
    """Issue 25 item 5: one object was made per unit of a device row (180 MB/s)."""
    device = {"name": "example.com/dev", "capacity": "1e15", "allocatable": "1e15", "available": "1e15"}
    path = _snapshot(tmp_path, [_node("w1")], [_nrt("w1", _zone(0, extra=(device,)), _zone(1))])
    run = numaplane("simulate", "--from", str(path), timeout=60)
    assert run.code == 0, run.stderr
    assert (
        "model of w1: NRT not usable (invalid NodeResourceTopology at zone node-0, resource example.com/dev: "
        "1000000000000000 devices: a node has at most 16384)" in run.stdout
    )


def test_a_node_that_cannot_be_modelled_is_skipped_by_name(tmp_path: Path) -> None:
    path = _snapshot(tmp_path, [_node("w1", capacity={"cpu": "1e15"}, allocatable={}), _node("w2")], [_nrt("w2")])
    run = numaplane("simulate", "--from", str(path), timeout=60)
    assert run.code == 0, run.stderr
    assert "snapshot: 1 nodes (1 from NRT)" in run.stdout
    assert "node w1 skipped (cannot be modelled): capacity cpu 1000000000000000: a node has at most 65536" in run.stdout


# ---- the reader, fuzzed: only SnapshotFormatError ------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
_values = st.recursive(
    _scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=12
)
_items = st.dictionaries(
    st.sampled_from(["name", "labels", "capacity", "allocatable", "taints", "zones", "policy", "x"]),
    _values,
    max_size=5,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(_items, max_size=3), nrts=st.lists(_items, max_size=2), cut=st.integers(0, 400))
def test_any_snapshot_is_refused_with_a_snapshot_error_or_rebuilt(
    nodes: list[dict[str, Any]], nrts: list[dict[str, Any]], cut: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _snapshot(Path(folder), nodes, nrts)
        text = path.read_text()
        path.write_text(text[: len(text) - cut] if cut else text)
        try:
            snapshot = read_snapshot(path)
        except SnapshotFormatError:
            return
    cluster = load_cluster(snapshot)  # what the reader accepts, the rebuild models or skips by name
    assert len(cluster.nodes) + len(cluster.skipped) <= len(snapshot.nodes)

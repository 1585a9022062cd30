"""Issue 25 items 4 and 11: every reader of user YAML refuses a < 1 KB alias bomb quickly, naming the
file; malformed documents (``metadata: 1``, ``pluginConfig: 1``, a 400-digit period) are one line,
exit 2, naming the file and the field. The CLI entry points run as a user runs them (a subprocess);
the daemons' readers (agent config watcher, exporter kubelet config) are called directly."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from cli_helpers import numaplane

from numaplane.agent.configwatch import read_config
from numaplane.agent.errors import AgentConfigError
from numaplane.exporter.errors import KubeletConfigError
from numaplane.exporter.kubelet import parse_kubelet_config
from numaplane.sim.snapshot import SnapshotWriter

#: 9 levels of 9 aliases: 9⁹ (387 million) leaves when walked path by path; 378 bytes.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)

NRT = """\
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: n1}
attributes: [{name: topologyManagerPolicy, value: single-numa-node}]
zones:
- {name: node-0, type: Node, resources: [{name: cpu, capacity: "4", allocatable: "4", available: "4"}]}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, resources: {limits: {cpu: "1", memory: 1Gi}}}]}
"""


def _files(tmp_path: Path) -> dict[str, Path]:
    files = {"bomb": BOMB, "nrt": NRT, "pod": POD}
    out = {}
    for name, text in files.items():
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(text)
    return out


@pytest.mark.parametrize(
    "args",
    [
        ("explain", "--pod", "{bomb}", "--nrt", "{nrt}"),
        ("simulate", "--workload", "{bomb}"),
        ("simulate", "--topology", "{bomb}", "--pods", "1"),
        ("render", "--from", "{bomb}"),
        ("admit", "--config", "{bomb}", "{pod}"),
        ("admit", "{bomb}"),
        ("topology", "--from", "{bomb}"),
        ("scheduler", "extender", "--config", "{bomb}"),
    ],
    ids=lambda a: " ".join(a).replace("{", "").replace("}", ""),
)
def test_an_alias_bomb_is_refused_quickly_by_every_command(tmp_path: Path, args: tuple[str, ...]) -> None:
    files = _files(tmp_path)
    started = time.perf_counter()
    run = numaplane(*(a.format(**{k: str(v) for k, v in files.items()}) for a in args), timeout=60)
    elapsed = time.perf_counter() - started
    assert run.code == 2, (run.stdout, run.stderr)
    assert str(files["bomb"]) in run.error_line and "aliases" in run.error_line
    assert elapsed < 15  # process start included; the reader itself takes milliseconds


def test_an_nrt_file_that_is_an_alias_bomb_is_an_input_error_for_explain(tmp_path: Path) -> None:
    """``explain --nrt`` given only an unreadable NRT file has nothing to explain: exit 2 naming the file and why."""
    files = _files(tmp_path)
    started = time.perf_counter()
    run = numaplane("explain", "--pod", str(files["pod"]), "--nrt", str(files["bomb"]), "-o", "json", timeout=60)
    assert time.perf_counter() - started < 15
    assert run.code == 2, run.stderr
    assert str(files["bomb"]) in run.error_line
    assert "YAML aliases (*name) to mappings or lists are not accepted" in run.error_line


def test_an_alias_bomb_in_a_scenario_or_an_added_workload_is_refused(tmp_path: Path) -> None:
    """``simulate --from``'s other inputs (the snapshot itself: test_cli_strict.py)."""
    files = _files(tmp_path)
    snapshot = tmp_path / "snap.yaml"
    out = io.StringIO()
    writer = SnapshotWriter(out, {"source": "test"})
    writer.close()
    snapshot.write_text(out.getvalue())
    for flag in ("--scenario", "--add-workload"):
        run = numaplane("simulate", "--from", str(snapshot), flag, str(files["bomb"]), timeout=60)
        assert run.code == 2, (flag, run.stdout, run.stderr)
        assert str(files["bomb"]) in run.error_line and "aliases" in run.error_line


def test_an_alias_bomb_in_a_snapshot_header_is_refused(tmp_path: Path) -> None:
    """The snapshot's fast reader parses the header lines with YAML too; it was accepted (exit 0)."""
    out = io.StringIO()
    SnapshotWriter(out, {"source": "test"}).close()
    flow = "{" + ", ".join(BOMB.strip().splitlines()) + "}"
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(out.getvalue().replace("  source: test\n", f"  source: test\n  x: {flow}\n", 1))
    assert flow in snapshot.read_text()
    run = numaplane("simulate", "--from", str(snapshot), timeout=60)
    assert run.code == 2, (run.stdout, run.stderr)
    assert run.error_line == f"Error: {snapshot}: YAML aliases (*name) to mappings or lists are not accepted"


def test_the_agent_config_watcher_and_the_exporter_refuse_an_alias_bomb(tmp_path: Path) -> None:
    path = _files(tmp_path)["bomb"]
    started = time.perf_counter()
    with pytest.raises(AgentConfigError, match="aliases"):
        read_config(path)
    with pytest.raises(KubeletConfigError, match="aliases"):
        parse_kubelet_config(BOMB, str(path))
    assert time.perf_counter() - started < 1


# ---- item 11: malformed documents are one line, exit 2, naming the file and the field ----------------


def test_render_from_with_metadata_1_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "nro.yaml"
    path.write_text("apiVersion: numaplane.io/v1\nkind: NUMAResourcesOperator\nmetadata: 1\nspec: {}\n")
    run = numaplane("render", "--from", str(path))
    assert run.code == 2
    assert run.error_line == (
        f"Error: invalid custom resource (InvalidSpec): {path} document 0 (NUMAResourcesOperator/?): "
        "metadata: must be an object"
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (
            "kind: KubeSchedulerConfiguration\nprofiles: [{pluginConfig: 1}]\n",
            "profiles[0].pluginConfig must be a list",
        ),
        (f"cacheResyncPeriodSeconds: {'9' * 400}\n", "cacheResyncPeriodSeconds must be a number of seconds within"),
        ("podMaxBackoffSeconds: .nan\n", "podMaxBackoffSeconds must be a number of seconds within"),
    ],
    ids=["pluginConfig-1", "400-digit-period", "nan-backoff"],
)
def test_a_bad_scheduler_config_names_the_file_and_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(text)
    run = numaplane("scheduler", "extender", "--config", str(path))
    assert run.code == 2
    assert f"Error: {path}: {field}" in run.error_line

"""``numaplane topology``: formats, round trip through --from, snapshots as folders or archives, errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from numaplane.cli import main
from numaplane.topology.document import topology_document, topology_from_dict, topology_to_dict
from numaplane.topology.model import synthetic

MACHINE = "intel-xeon-2s-snc2-4n-4pmem-112t"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_json_output_reads_back_identically(
    runner: CliRunner, snapshot_root: Callable[[str], Path], tmp_path: Path
) -> None:
    first = runner.invoke(main, ["topology", "--sysfs", str(snapshot_root(MACHINE)), "--output", "json"])
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert doc["name"] == MACHINE and doc["numCpus"] == 112
    assert (doc["apiVersion"], doc["kind"]) == ("numaplane.io/v1", "Topology")
    saved = tmp_path / "machine.json"
    saved.write_text(first.stdout)
    second = runner.invoke(main, ["topology", "--from", str(saved), "--output", "json"])
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout) == doc
    assert second.stdout == first.stdout


def test_yaml_output_reads_back_identically(runner: CliRunner, tmp_path: Path) -> None:
    source = tmp_path / "synthetic.json"
    source.write_text(json.dumps(topology_to_dict(synthetic(hugepages_2m_per_numa=4))))
    out = tmp_path / "machine.yaml"
    result = runner.invoke(main, ["topology", "--from", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(out.read_text())
    assert doc == topology_document(topology_from_dict(json.loads(source.read_text())))  # the old form reads too
    again = runner.invoke(main, ["topology", "--from", str(out), "-o", "json"])
    assert json.loads(again.stdout) == doc


def test_svg_output(runner: CliRunner, snapshot_root: Callable[[str], Path]) -> None:
    result = runner.invoke(main, ["topology", "--sysfs", str(snapshot_root(MACHINE)), "--output", "svg"])
    assert result.exit_code == 0, result.output
    assert result.stdout.lstrip().startswith("<?xml") and "<svg" in result.stdout
    for text in ("NUMA node 4 (no CPUs)", "Package 1", "124.0 GiB"):
        assert text in result.stdout


def test_png_to_file(runner: CliRunner, tmp_path: Path, snapshot_root: Callable[[str], Path]) -> None:
    out = tmp_path / "machine.png"
    result = runner.invoke(
        main, ["topology", "--sysfs", str(snapshot_root("kvm-skylake-4cpu-2offline")), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_table_output(runner: CliRunner, snapshot_root: Callable[[str], Path]) -> None:
    result = runner.invoke(main, ["topology", "--sysfs", str(snapshot_root("ibm-power9-2s-6gpumem-nodes"))])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("NUMA nodes", "NUMA distances", "Sockets", "Threads/core", "127.7 GiB", "250", "cpulist trusted"):
        assert text in out


def test_archive_is_unpacked_to_a_temporary_folder(runner: CliRunner, real_dir: Path) -> None:
    archive = real_dir / "kvm-skylake-4cpu-2offline.tar.gz"
    result = runner.invoke(main, ["topology", "--sysfs", str(archive), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["name"] == "kvm-skylake-4cpu-2offline"
    assert doc["source"] == f"sysfs:{archive}"
    assert topology_from_dict(doc).offline_cpus.format() == "2-3"


def test_snapshot_parent_folder_is_accepted(runner: CliRunner, snapshot_root: Callable[[str], Path]) -> None:
    root = snapshot_root("kvm-skylake-4cpu-2offline")
    result = runner.invoke(main, ["topology", "--sysfs", str(root.parent), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["numCpus"] == 2


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: ["--sysfs", str(p)], "expected a sysfs root"),
        (lambda p: ["--from", str(_write(p / "bad.json", "{"))], "invalid JSON"),
        (lambda p: ["--from", str(_write(p / "bad.yaml", '{"cpus": 3}'))], "$.cpus"),
        (lambda p: ["--sysfs", str(_write(p / "x.tar.gz", "not a tar"))], "not a folder or a tar archive"),
        (lambda p: ["--sysfs", str(p), "--from", str(_write(p / "a.json", "{}"))], "mutually exclusive"),
    ],
)
def test_errors_are_one_line_messages(
    runner: CliRunner, tmp_path: Path, setup: Callable[[Path], list[str]], message: str
) -> None:
    result = runner.invoke(main, ["topology", *setup(tmp_path)])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_this_machine(runner: CliRunner) -> None:
    if not Path("/sys/devices/system/cpu").is_dir():
        pytest.skip("no Linux sysfs on this machine")
    result = runner.invoke(main, ["topology", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["numCpus"] >= 1


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path

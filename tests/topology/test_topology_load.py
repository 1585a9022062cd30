"""topology/load.py: one loader for a built-in name, a topology document, a sysfs folder or an archive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numaplane.topology.document import topology_from_dict, topology_to_dict
from numaplane.topology.errors import TopologyError, TopologyLoadError
from numaplane.topology.load import archive_stem, load_sysfs, load_topology, load_topology_file


def _fixture(shared_dir: Path) -> Path:
    return shared_dir / "conformance" / "topologies" / "topoDualSocketHT.json"


def test_document_json_and_yaml(shared_dir: Path, tmp_path: Path) -> None:
    expected = topology_from_dict(json.loads(_fixture(shared_dir).read_text()))
    assert load_topology_file(_fixture(shared_dir)).cpus == expected.cpus
    doc = topology_to_dict(expected)
    doc.pop("name", None)
    yaml_file = tmp_path / "machine.yaml"
    yaml_file.write_text(json.dumps(doc))  # JSON is YAML
    loaded = load_topology(yaml_file)
    assert loaded.name == "machine" and loaded.cpus == expected.cpus


def test_builtin_names_come_from_the_caller(shared_dir: Path) -> None:
    machine = load_topology_file(_fixture(shared_dir))
    assert load_topology("mine", builtins={"mine": lambda: machine}) is machine
    with pytest.raises(TopologyLoadError, match=r"^other: not a built-in name \(mine\) and no such file or folder"):
        load_topology("other", builtins={"mine": lambda: machine})


def test_archive_and_folder(real_dir: Path) -> None:
    archive = real_dir / "kvm-skylake-4cpu-2offline.tar.gz"
    topology = load_topology(archive)
    assert topology.name == "kvm-skylake-4cpu-2offline" and topology.source == f"sysfs:{archive}"
    assert archive_stem(archive) == "kvm-skylake-4cpu-2offline"


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad.json", "{", "invalid JSON"),
        ("list.json", "[1, 2]", "must be a JSON object"),
        ("cpus.yaml", '{"cpus": 3}', "invalid topology document at $.cpus"),
    ],
)
def test_document_errors_name_the_file(tmp_path: Path, name: str, content: str, reason: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TopologyLoadError) as info:
        load_topology(path)
    assert str(info.value).startswith(f"{path}: ") and reason in str(info.value)


def test_sysfs_errors(tmp_path: Path) -> None:
    not_tar = tmp_path / "x.tar.gz"
    not_tar.write_text("not a tar")
    with pytest.raises(TopologyLoadError, match="not a folder or a tar archive"):
        load_topology(not_tar)
    with pytest.raises(TopologyError, match="expected a sysfs root"):
        load_sysfs(tmp_path)

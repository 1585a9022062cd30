"""The one YAML/JSON document reader: formats by suffix, empty files, and errors that name the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaplane.documents import DocumentError, parse_document, parse_documents, read_document, read_documents


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_json_means_json_yaml_means_yaml(tmp_path: Path) -> None:
    assert read_document(_write(tmp_path / "a.json", '{"n": 1e3}')) == {"n": 1000.0}
    assert read_document(_write(tmp_path / "a.yaml", "n: 1e3")) == {"n": "1e3"}  # YAML 1.1, as PyYAML reads it
    assert read_document(_write(tmp_path / "a", "n: 2")) == {"n": 2}  # no suffix: JSON first, then YAML
    assert read_documents(_write(tmp_path / "m.yaml", "a: 1\n---\n---\nb: 2\n")) == [{"a": 1}, {"b": 2}]


def test_empty_is_no_document(tmp_path: Path) -> None:
    for name in ("e.json", "e.yaml", "e"):
        assert read_documents(_write(tmp_path / name, " \n")) == []
        assert read_document(tmp_path / name) is None


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad.json", "{", "invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2"),
        ("bad.yaml", "a: [", "not valid YAML/JSON: "),
        ("bad", "a: [", "not valid YAML/JSON: "),
        ("bin.yaml", b"\xff\xfe", "not UTF-8 text"),
        ("two.yaml", "a: 1\n---\nb: 2\n", "2 documents where one is expected"),
    ],
)
def test_errors_name_the_file(tmp_path: Path, name: str, content: str | bytes, reason: str) -> None:
    path = _write(tmp_path / name, content)
    with pytest.raises(DocumentError) as info:
        read_document(path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: {reason}")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"missing\.yaml: cannot read: No such file or directory"):
        read_documents(tmp_path / "missing.yaml")


def test_text_with_a_source_name() -> None:
    assert parse_documents('{"kind": "Pod"}', "-") == [{"kind": "Pod"}]
    assert parse_document("kind: Pod", "kubelet config") == {"kind": "Pod"}
    with pytest.raises(DocumentError, match=r"^kubelet config: not valid YAML/JSON"):
        parse_document("a: [", "kubelet config")

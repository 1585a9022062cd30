"""YAML/JSON documents from files or text, with one error type that names where the problem is.

Every command and daemon that reads a document file (pods, workloads, scenarios, topologies,
configurations) reads it here, so they agree on the format and on the error:

* ``.yaml`` / ``.yml`` files are YAML (which also reads JSON); other files are tried as JSON first,
  then as YAML unless the name ends in ``.json`` (then the JSON error, with line and column, is the
  answer) — so a JSON file means what JSON says (``1e3`` is a number, not YAML 1.1's string);
* text that is empty or only whitespace holds no document;
* a problem raises :class:`DocumentError`, whose ``path`` names the file (or the source given for
  text) and whose message is ``"<path>: <reason>"`` on one line.

This is an adapter (it reads files): the pure core never imports it (``pyproject.toml``'s contracts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DocumentError", "parse_document", "parse_documents", "read_document", "read_documents"]


class DocumentError(ValueError):
    """A document cannot be read or parsed. ``path``: the file or source; ``reason``: why (one line)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def _yaml_documents(text: str, source: str) -> list[Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as exc:
        raise DocumentError(source, f"not valid YAML/JSON: {_one_line(exc)}") from None


def parse_documents(text: str, source: str | Path) -> list[Any]:
    """The non-empty documents in ``text`` (a multi-document YAML stream, or one JSON value).

    ``source`` names the text in errors; its suffix chooses the format as for files (module docstring).
    """
    name = str(source)
    if not text.strip():
        return []
    suffix = Path(name).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _yaml_documents(text, name)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if suffix == ".json":
            raise DocumentError(name, f"invalid JSON: {exc}") from None
        return _yaml_documents(text, name)
    return [] if doc is None else [doc]


def parse_document(text: str, source: str | Path) -> Any:
    """The one document in ``text`` (``None`` when there is none); several documents are an error."""
    docs = parse_documents(text, source)
    if len(docs) > 1:
        raise DocumentError(source, f"{len(docs)} documents where one is expected")
    return docs[0] if docs else None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DocumentError(path, "not UTF-8 text") from None
    except OSError as exc:
        raise DocumentError(exc.filename or path, f"cannot read: {exc.strerror or exc}") from None


def read_documents(path: str | Path) -> list[Any]:
    """The non-empty documents of a YAML/JSON file (an empty list for an empty file)."""
    return parse_documents(_read_text(Path(path)), path)


def read_document(path: str | Path) -> Any:
    """The one document of a YAML/JSON file (``None`` for an empty file)."""
    return parse_document(_read_text(Path(path)), path)

"""YAML/JSON documents from files or text (untrusted), loaded within bounds, with one error type.

Every command and daemon that reads a document (pods, workloads, scenarios, topologies,
configurations, checkpoints' neighbours) reads it here, so they agree on the format, on the bounds and
on the error:

* ``.yaml`` / ``.yml`` files are YAML (which also reads JSON); other files are tried as JSON first,
  then as YAML unless the name ends in ``.json`` (then the JSON error, with line and column, is the
  answer) — so a JSON file means what JSON says (``1e3`` is a number, not YAML 1.1's string);
* text that is empty or only whitespace holds no document;
* bounds: text larger than :data:`MAX_DOCUMENT_BYTES`, nesting deeper than
  :data:`numaplane.limits.MAX_JSON_DEPTH` (which would otherwise raise ``RecursionError``) and
  integers over 4,300 digits (a plain ``ValueError`` from ``int()``) are refused before or while
  parsing; YAML is loaded with the safe loader only, and an alias to a mapping or list (the
  "billion laughs" expansion) is refused (:func:`check_tree`);
* a problem raises :class:`DocumentError`, whose ``path`` names the file (or the source given for
  text, or ``None`` for bare text) and whose message is ``"<path>: <reason>"`` on one line. It is both
  a ``yaml.YAMLError`` and a ``ValueError``, so the handlers callers already have keep catching it.

This is an adapter (it reads files): the pure core never imports it (``pyproject.toml``'s contracts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from numaplane import boundedjson
from numaplane.limits import MAX_JSON_DEPTH

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "DocumentError",
    "check_tree",
    "load_json",
    "load_yaml",
    "load_yaml_all",
    "parse_document",
    "parse_documents",
    "read_document",
    "read_documents",
]

#: Largest document read (a 5,000-node simulation workload is a few MiB).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


class DocumentError(yaml.YAMLError, ValueError):
    """A document cannot be read or parsed. ``path``: the file or source (or None); ``reason``: why."""

    def __init__(self, path: str | Path | None, reason: str) -> None:
        reason = _short(" ".join(reason.split()))
        super().__init__(f"{path}: {reason}" if path is not None else reason)
        self.path = str(path) if path is not None else None
        self.reason = reason


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def check_tree(doc: Any, source: str | None) -> Any:
    """``doc`` when it is a tree: no mapping or list reached twice (a YAML alias ``*ref`` to an
    ``&anchor``ed collection), nesting at most :data:`MAX_JSON_DEPTH`; else :class:`DocumentError`.

    Aliases are refused, not expanded: a < 1 KB "billion laughs" document shares subtrees so that any
    walk over it visits 9⁹ nodes. The walk visits each collection once (bounded by the text's size).
    """
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if id(value) in seen:
            raise DocumentError(source, "YAML aliases (*name) to mappings or lists are not accepted")
        seen.add(id(value))
        if depth > MAX_JSON_DEPTH:
            raise DocumentError(source, f"nested deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return doc


def _checked(doc: Any, source: str | None) -> Any:
    return check_tree(doc, source)


def _size(text: str | bytes, source: str | None) -> None:
    if len(text) > MAX_DOCUMENT_BYTES:
        raise DocumentError(source, f"larger than {MAX_DOCUMENT_BYTES} bytes")


def _yaml_documents(text: str | bytes, source: str | None) -> list[Any]:
    _size(text, source)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return [_checked(d, source) for d in yaml.load_all(text, Loader=loader) if d is not None]
    except DocumentError:
        raise
    except yaml.YAMLError as exc:
        raise DocumentError(source, f"not valid YAML/JSON: {exc}") from None
    except RecursionError:
        raise DocumentError(source, f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # an integer over 4,300 digits
        raise DocumentError(source, str(exc)) from None


def _json_reason(exc: boundedjson.JSONInputError) -> str:
    return "invalid JSON: " + str(exc).removeprefix("not JSON: ")


def _json_document(text: str | bytes, source: str | None) -> Any:
    try:
        return boundedjson.loads(text, max_bytes=MAX_DOCUMENT_BYTES)
    except boundedjson.JSONInputError as exc:
        raise DocumentError(source, _json_reason(exc)) from None


# ---- bare text ----------------------------------------------------------------------------------


def load_yaml(text: str | bytes) -> Any:
    """One YAML (or JSON) document of bare text (``None`` when there is none)."""
    docs = _yaml_documents(text, None)
    if len(docs) > 1:
        raise DocumentError(None, f"{len(docs)} documents where one is expected")
    return docs[0] if docs else None


def load_yaml_all(text: str | bytes) -> list[Any]:
    """Every document of a multi-document YAML stream (``None`` documents left out)."""
    return _yaml_documents(text, None)


def load_json(text: str | bytes) -> Any:
    """One JSON document of bare text."""
    return _json_document(text, None)


# ---- named sources and files --------------------------------------------------------------------


def parse_documents(text: str, source: str | Path) -> list[Any]:
    """The non-empty documents in ``text`` (a multi-document YAML stream, or one JSON value).

    ``source`` names the text in errors; its suffix chooses the format as for files (module docstring).
    """
    name = str(source)
    if not text.strip():
        return []
    _size(text, name)
    suffix = Path(name).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _yaml_documents(text, name)
    try:
        doc = boundedjson.loads(text, max_bytes=MAX_DOCUMENT_BYTES)
    except boundedjson.JSONInputError as exc:
        if suffix == ".json":
            raise DocumentError(name, _json_reason(exc)) from None
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
        size = path.stat().st_size
    except OSError as exc:
        raise DocumentError(exc.filename or path, f"cannot read: {exc.strerror or exc}") from None
    if size > MAX_DOCUMENT_BYTES:
        raise DocumentError(path, f"larger than {MAX_DOCUMENT_BYTES} bytes")
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

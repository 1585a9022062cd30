"""YAML/JSON documents from files and flags (untrusted), loaded within bounds.

:func:`load_yaml` / :func:`load_yaml_all` / :func:`load_json` are the loaders of every document a user
or a cluster hands in (workloads, topology files, scheduler and agent configurations, pods). Anything
unusable is a :class:`DocumentError` — malformed text, nesting deeper than
:data:`numaplane.limits.MAX_JSON_DEPTH` (which would otherwise raise ``RecursionError``), an integer over
4,300 digits (a plain ``ValueError`` from ``int()``), text larger than ``max_bytes``. It is both a
``yaml.YAMLError`` and a ``ValueError``, so the handlers callers already have keep catching it. YAML is
loaded with the safe loader only.
"""

from __future__ import annotations

from typing import Any

import yaml

from numaplane import boundedjson
from numaplane.limits import MAX_JSON_DEPTH

__all__ = ["MAX_DOCUMENT_BYTES", "DocumentError", "load_json", "load_yaml", "load_yaml_all"]

#: Largest document file read (a 5,000-node simulation workload is a few MiB).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


class DocumentError(yaml.YAMLError, ValueError):
    """A document that cannot be used; the message says why (bounded in length)."""


def _checked(doc: Any) -> Any:
    try:
        boundedjson.check_depth(doc, MAX_JSON_DEPTH)
    except boundedjson.JSONInputError as exc:
        raise DocumentError(str(exc)) from None
    return doc


def _size(text: str | bytes) -> None:
    if len(text) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"larger than {MAX_DOCUMENT_BYTES} bytes")


def load_yaml(text: str | bytes) -> Any:
    """One YAML (or JSON) document."""
    _size(text)
    try:
        return _checked(yaml.safe_load(text))
    except DocumentError:
        raise
    except yaml.YAMLError as exc:
        raise DocumentError(_short(str(exc))) from None
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # an integer over 4,300 digits
        raise DocumentError(_short(str(exc))) from None


def load_yaml_all(text: str | bytes) -> list[Any]:
    """Every document of a multi-document YAML stream (``None`` documents left out)."""
    _size(text)
    try:
        return [_checked(d) for d in yaml.safe_load_all(text) if d is not None]
    except DocumentError:
        raise
    except yaml.YAMLError as exc:
        raise DocumentError(_short(str(exc))) from None
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise DocumentError(_short(str(exc))) from None


def load_json(text: str | bytes) -> Any:
    """One JSON document."""
    try:
        return boundedjson.loads(text, max_bytes=MAX_DOCUMENT_BYTES)
    except boundedjson.JSONInputError as exc:
        raise DocumentError(str(exc)) from None


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

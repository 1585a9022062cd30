"""JSON document helpers: fast clone, JSON merge patch (RFC 7386), JSON patch (RFC 6902).

Pure functions on JSON-ready values (dicts, lists, str, int, float, bool, None). Malformed patches
raise :class:`numaplane.kube.errors.Invalid`, as an API server answers them with 422.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numaplane.kube.errors import Invalid

__all__ = ["clone", "json_patch", "merge_patch"]


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (several times faster than ``copy.deepcopy``)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, Mapping):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [clone(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch: maps merge recursively, ``None`` deletes, anything else replaces.

    Neither argument is modified; the result shares no mutable parts with them.
    """
    if not isinstance(patch, Mapping):
        return clone(patch)
    result: dict[str, Any] = clone(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = clone(value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise Invalid(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit():
        raise Invalid(f"bad array index {token!r}")
    idx = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if idx > limit:
        raise Invalid(f"array index {idx} out of range")
    return idx


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise Invalid(f"path segment {tok!r} not found")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, allow_end=False)]
        else:
            raise Invalid(f"cannot descend into a scalar at {tok!r}")
    return cur


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise Invalid(f"path {'/'.join(tokens)!r} not found")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise Invalid("cannot index a scalar")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise Invalid("cannot add into a scalar")
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise Invalid("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise Invalid(f"path {'/'.join(tokens)!r} not found")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, allow_end=False))
    raise Invalid("cannot remove from a scalar")


def json_patch(target: Any, operations: Sequence[Mapping[str, Any]]) -> Any:
    """Apply an RFC 6902 JSON patch (add, remove, replace, move, copy, test); returns a new document."""
    doc = clone(target)
    if not isinstance(operations, Sequence) or isinstance(operations, (str, bytes)):
        raise Invalid("a JSON patch must be a list of operations")
    for op in operations:
        if not isinstance(op, Mapping) or "op" not in op or "path" not in op:
            raise Invalid(f"malformed JSON patch operation {op!r}")
        kind = op["op"]
        tokens = _pointer(str(op["path"]))
        if kind == "add":
            doc = _add(doc, tokens, clone(op.get("value")))
        elif kind == "remove":
            doc, _ = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)
            doc, _ = _remove(doc, tokens) if tokens else (doc, None)
            doc = _add(doc, tokens, clone(op.get("value")))
        elif kind == "move":
            src = _pointer(str(op.get("from", "")))
            doc, value = _remove(doc, src)
            doc = _add(doc, tokens, value)
        elif kind == "copy":
            src = _pointer(str(op.get("from", "")))
            doc = _add(doc, tokens, clone(_get(doc, src)))
        elif kind == "test":
            if _get(doc, tokens) != op.get("value"):
                raise Invalid(f"JSON patch test failed at {op['path']!r}")
        else:
            raise Invalid(f"unknown JSON patch op {kind!r}")
    return doc

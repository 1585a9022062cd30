"""JSON from untrusted sources, bounded: size, nesting depth and integer length.

:func:`loads` is the one way the project decodes JSON it did not write itself (pod annotations,
checkpoints, request bodies, files named on the command line). Everything that goes wrong is a
:class:`JSONInputError` (a ``ValueError``): malformed text, a body over its size limit, nesting deeper
than :data:`numaplane.limits.MAX_JSON_DEPTH` (which would otherwise raise ``RecursionError`` here or
later, in code walking the document), or an integer too long to convert. Callers map it to the error
type of their input kind. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from numaplane.limits import MAX_JSON_DEPTH

__all__ = ["JSONInputError", "check_depth", "loads"]


class JSONInputError(ValueError):
    """Untrusted JSON that cannot be used; the message says why."""


def check_depth(doc: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JSONInputError` when ``doc`` nests lists/objects deeper than ``max_depth`` (iterative)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > max_depth:
            raise JSONInputError(f"nested deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, Mapping | list | tuple))


def loads(data: str | bytes, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The document in ``data``; raise :class:`JSONInputError` for anything unusable (module docstring)."""
    if max_bytes is not None and len(data) > max_bytes:
        raise JSONInputError(f"larger than {max_bytes} bytes")
    try:
        doc = json.loads(data)
    except RecursionError:
        raise JSONInputError(f"nested deeper than {max_depth} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, int digit limit, bad UTF-8
        raise JSONInputError(f"not JSON: {_short(str(exc))}") from None
    check_depth(doc, max_depth)
    return doc


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

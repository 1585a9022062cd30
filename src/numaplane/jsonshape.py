"""The shape of a JSON text, measured without decoding it: nesting depth, containers, top-level members.

A decoder that builds Python objects costs one object per two or three bytes of a hostile text
(``[{},{},...]``); the bounds that matter (how deep, how many containers, how many members) must be
known *before* that work is done. :func:`measure` finds them in one pass over the bytes, in fixed-size
chunks with numpy (a few MiB of temporaries whatever the text's size, no Python work per byte or per
token), so a caller refuses a text over its bounds having spent only a scan of it.

Precondition: ``data`` is *valid* JSON (validate it first, e.g. by decoding it with msgspec into an
empty Struct, which skips every member without building anything). On invalid text the figures are
meaningless but finite. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Shape", "measure"]

#: Bytes scanned per step; the temporaries of a step are ~25 bytes per byte scanned.
CHUNK_BYTES = 256 * 1024

_QUOTE, _BACKSLASH = 0x22, 0x5C
# structural characters: +1 opens a container, -1 closes one, 2 separates members
_STRUCTURAL = np.zeros(256, dtype=np.int8)
_STRUCTURAL[[ord("{"), ord("[")]] = 1
_STRUCTURAL[[ord("}"), ord("]")]] = -1
_STRUCTURAL[ord(",")] = 2
_SIGNIFICANT = np.ones(256, dtype=bool)
_SIGNIFICANT[list(b" \t\r\n")] = False


@dataclass(frozen=True, slots=True)
class Shape:
    """What a JSON text expands into.

    ``depth``: deepest nesting of containers (a scalar is 0, ``[]`` is 1, ``[[1]]`` is 2).
    ``containers``: objects and arrays in the whole text. ``members``: entries of the top-level
    object or array (0 for a scalar or an empty container)."""

    depth: int
    containers: int
    members: int


def measure(
    data: bytes | bytearray | memoryview, *, chunk_bytes: int = CHUNK_BYTES, max_members: int | None = None
) -> Shape:
    """The :class:`Shape` of the valid JSON text ``data`` (module docstring); ``chunk_bytes`` >= 1.

    With ``max_members``, the scan stops at the end of the first chunk where the top-level container
    is known to have more members than that: the ``members`` returned then exceeds ``max_members``
    (a lower bound of the true count), and ``depth`` and ``containers`` count only the part scanned.
    A caller that refuses such a text (a list of 16 M items when 15,000 are allowed) thus scans a few
    chunks of it, not all of it."""
    view = memoryview(data).cast("B")
    size = len(view)
    in_string = False
    bs_carry = 0  # length of the run of backslashes that ended the previous chunk
    depth = max_depth = containers = separators = 0
    head = b""  # the first two bytes that are not whitespace
    for start in range(0, size, chunk_bytes):
        chunk = np.frombuffer(view[start : start + chunk_bytes], dtype=np.uint8)
        quotes = _unescaped_quotes(chunk, bs_carry)
        if len(head) < 2:
            head += chunk[np.flatnonzero(_SIGNIFICANT[chunk])[: 2 - len(head)]].tobytes()
        kinds = _STRUCTURAL[chunk]
        marks = np.flatnonzero(kinds)
        if marks.size:
            before = np.searchsorted(quotes, marks)  # unescaped quotes before each mark in this chunk
            outside = (before + int(in_string)) % 2 == 0
            marks = marks[outside]
            kind = kinds[marks]
            steps = np.where(kind == 2, 0, kind).astype(np.int64)
            levels = depth + np.cumsum(steps)
            if levels.size:
                max_depth = max(max_depth, int(levels.max()))
                depth = int(levels[-1])
                containers += int(np.count_nonzero(kind == 1))
                separators += int(np.count_nonzero((kind == 2) & (levels == 1)))
        in_string = in_string ^ bool(quotes.size % 2)
        bs_carry = _trailing_backslashes(chunk, bs_carry)
        if max_members is not None and _members(head, separators) > max_members:
            break
    return Shape(max_depth, containers, _members(head, separators))


def _unescaped_quotes(chunk: np.ndarray, bs_carry: int) -> np.ndarray:
    """Positions of the quotes of ``chunk`` not escaped by an odd run of backslashes before them."""
    quotes = np.flatnonzero(chunk == _QUOTE)
    if not quotes.size:
        return quotes
    prior = quotes - 1
    has_bs = np.zeros(quotes.size, dtype=bool)
    has_bs[prior >= 0] = chunk[prior[prior >= 0]] == _BACKSLASH
    if quotes[0] == 0 and bs_carry:
        has_bs[0] = True
    if not has_bs.any():
        return quotes
    others = np.flatnonzero(chunk != _BACKSLASH)  # the quotes are among them
    index = np.searchsorted(others, quotes[has_bs])
    previous = np.where(index > 0, others[np.maximum(index - 1, 0)], -1)
    runs = quotes[has_bs] - previous - 1 + np.where(previous < 0, bs_carry, 0)
    escaped = np.zeros(quotes.size, dtype=bool)
    escaped[has_bs] = runs % 2 == 1
    return quotes[~escaped]


def _trailing_backslashes(chunk: np.ndarray, bs_carry: int) -> int:
    if not chunk.size or chunk[-1] != _BACKSLASH:
        return 0
    others = np.flatnonzero(chunk != _BACKSLASH)
    if not others.size:
        return bs_carry + int(chunk.size)
    return int(chunk.size) - 1 - int(others[-1])


def _members(head: bytes, separators: int) -> int:
    """Entries of the top-level container: its separators + 1, or 0 when empty or a scalar."""
    if len(head) < 2 or head[:1] not in (b"{", b"[") or head[1:2] in (b"}", b"]"):
        return 0
    return separators + 1

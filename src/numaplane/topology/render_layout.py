"""Box layout for the topology picture: pure geometry, no drawing library.

A :class:`Box` has header lines and either a fixed leaf size or children. :func:`layout` sizes every
box bottom-up — children placed left to right in rows, the number of columns chosen so that the
box's width/height comes closest to its ``target`` aspect ratio — then assigns absolute positions
top-down. All lengths are inches; ``y`` grows downwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Box", "layout", "text_width"]

HEADER_FONT = 7.0
LINE_H = 0.15
# Average advance of DejaVu Sans glyphs, as a fraction of the font size (a little generous).
CHAR_EM = 0.6
BOLD_FACTOR = 1.12


def text_width(text: str, font: float) -> float:
    """Estimated width in inches of ``text`` set at ``font`` points."""
    return len(text) * font * CHAR_EM / 72.0


@dataclass(eq=False)
class Box:
    """A rectangle with header lines, then children in rows (or a fixed-size leaf with a label)."""

    kind: str
    lines: list[str] = field(default_factory=list)
    children: list[Box] = field(default_factory=list)
    leaf: tuple[float, float] | None = None
    label: str = ""
    target: float = 1.6
    max_cols: int | None = None
    pad: float = 0.06
    gap: float = 0.05
    isolated: bool = False
    bold_first: bool = True
    font: float = 6.5
    line_h: float = LINE_H
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0
    _offsets: list[tuple[float, float]] = field(default_factory=list, repr=False)

    def header(self) -> list[tuple[str, float, bool]]:
        """``(text, font size, bold)`` for each header line."""
        return [(line, HEADER_FONT, self.bold_first and i == 0) for i, line in enumerate(self.lines)]

    def walk(self) -> Iterator[Box]:
        """This box, then its descendants, parents before children (drawing order)."""
        yield self
        for child in self.children:
            yield from child.walk()


def layout(root: Box) -> None:
    """Size and place ``root`` and its descendants (root at 0, 0)."""
    _measure(root)
    _place(root, 0.0, 0.0)


def _measure(b: Box) -> None:
    for child in b.children:
        _measure(child)
    head_h = len(b.lines) * b.line_h
    head_w = max(
        (text_width(line, HEADER_FONT) * (BOLD_FACTOR if bold else 1.0) for line, _, bold in b.header()),
        default=0.0,
    )
    if b.leaf is not None:
        b.w = max(b.leaf[0], head_w + 2 * b.pad)
        b.h = b.leaf[1] + head_h
        return
    if not b.children:
        b.w = head_w + 2 * b.pad
        b.h = head_h + 2 * b.pad
        return
    top = b.pad + head_h + (b.gap if b.lines else 0.0)
    best: tuple[float, float, float, list[tuple[float, float]]] | None = None
    n = len(b.children)
    for cols in range(1, min(n, b.max_cols or n) + 1):
        offsets, width, height = _rows(b, cols, top)
        w = max(width + 2 * b.pad, head_w + 2 * b.pad)
        h = height + b.pad
        cost = abs(math.log((w / h) / b.target))
        if best is None or cost < best[0] - 1e-9:
            best = (cost, w, h, offsets)
    assert best is not None
    _, b.w, b.h, b._offsets = best


def _rows(b: Box, cols: int, top: float) -> tuple[list[tuple[float, float]], float, float]:
    """Offsets of the children in rows of ``cols``; returns (offsets, content width, total height)."""
    offsets: list[tuple[float, float]] = []
    y = top
    width = 0.0
    # Columns share one width so that grids of equal boxes line up and rows of unequal ones align.
    col_w = [0.0] * cols
    for i, child in enumerate(b.children):
        col_w[i % cols] = max(col_w[i % cols], child.w)
    for start in range(0, len(b.children), cols):
        row = b.children[start : start + cols]
        x = b.pad
        for j in range(len(row)):
            offsets.append((x, y))
            x += col_w[j] + b.gap
        width = max(width, x - b.gap - b.pad)
        y += max(child.h for child in row) + b.gap
    return offsets, width, y - b.gap


def _place(b: Box, x: float, y: float) -> None:
    b.x, b.y = x, y
    for child, (dx, dy) in zip(b.children, b._offsets, strict=True):
        _place(child, x + dx, y + dy)

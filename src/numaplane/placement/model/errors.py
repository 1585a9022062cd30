"""Errors of the placement package (scheduler filter, score, caches, pipeline).

Exception tree::

    PlacementError                 (base)
    ├── PlacementConfigError       invalid scoring strategy, cache or filter options (also a ValueError)
    ├── TopologyDataError          a NodeResourceTopology object cannot be used (malformed quantities,
    │                              wrong shape); ``node`` names the node, ``detail`` says what is wrong
    │                              (also a ValueError)
    └── NodeDataError              a core/v1 Node object cannot be used (bad allocatable); also a ValueError

The filter and score functions never let these escape for per-node data problems: a node whose data
is unusable is rejected (filter) or scores 0 (score) with the problem in the explanation. They are
raised by constructors and parsers that callers use directly.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Base class of the placement package's errors."""


class PlacementConfigError(PlacementError, ValueError):
    """A placement configuration value is invalid (unknown strategy type, bad weight, bad option)."""


class TopologyDataError(PlacementError, ValueError):
    """A node's NodeResourceTopology data cannot be used."""

    def __init__(self, node: str, detail: str) -> None:
        super().__init__(f"unusable node topology data for node {node!r}: {detail}")
        self.node = node
        self.detail = detail


class NodeDataError(PlacementError, ValueError):
    """A core/v1 Node object cannot be used (e.g. an allocatable quantity does not parse)."""

    def __init__(self, node: str, detail: str) -> None:
        super().__init__(f"unusable node object {node!r}: {detail}")
        self.node = node
        self.detail = detail

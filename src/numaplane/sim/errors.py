"""Errors of the simulator.

Exception tree::

    SimulationError                  (base)
    ├── WorkloadError                invalid workload file: names the file, the entry and the field
    ├── ClusterSpecError             invalid cluster / topology specification
    ├── SnapshotFormatError          invalid cluster snapshot file: names the file and the place
    └── ScenarioError                invalid what-if scenario (file or flags): names the field
"""

from __future__ import annotations


class SimulationError(Exception):
    """Base class of the simulator's errors."""


class WorkloadError(SimulationError, ValueError):
    """An invalid workload entry. ``source`` is the file, ``entry`` the index, ``field`` the field path."""

    def __init__(self, source: str, entry: int | None, field: str, reason: str) -> None:
        where = source
        if entry is not None:
            where += f": pods[{entry}]"
        if field:
            where += f".{field}"
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.source = source
        self.entry = entry
        self.field = field
        self.reason = reason


class ClusterSpecError(SimulationError, ValueError):
    """An invalid cluster specification (unknown topology name, bad count, unreadable file)."""


class SnapshotFormatError(SimulationError, ValueError):
    """An invalid cluster snapshot (``numaplane snapshot`` output): ``source`` is the file, ``where``
    the section / item / field."""

    def __init__(self, source: str, where: str, reason: str) -> None:
        super().__init__(f"{source}: {where}: {reason}" if where else f"{source}: {reason}")
        self.source = source
        self.where = where
        self.reason = reason


class ScenarioError(SimulationError, ValueError):
    """An invalid what-if scenario: ``where`` names the file and field, or the flag."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason

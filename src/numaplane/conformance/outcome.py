"""Values shared by the conformance runner and the per-kind modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from numaplane.topology.load import load_topology_file
from numaplane.topology.model import Topology


@dataclass(frozen=True)
class Outcome:
    """Result of one case: ``passed``, or the first difference (``expected`` vs ``got``).

    ``where`` locates the difference inside the case (e.g. ``"ops[2].expect"``).
    """

    passed: bool
    expected: Any = None
    got: Any = None
    where: str = ""

    @staticmethod
    def ok() -> Outcome:
        return Outcome(passed=True)

    @staticmethod
    def fail(expected: Any, got: Any, where: str = "expect") -> Outcome:
        return Outcome(passed=False, expected=expected, got=got, where=where)


@dataclass
class CaseContext:
    """Where a case came from, to resolve fixture names (SCHEMA §3: next to the file, then the set)."""

    case_file: Path
    set_dirs: list[Path] = field(default_factory=list)

    def topology(self, name: str) -> Topology:
        for folder in [self.case_file.parent, *self.set_dirs]:
            path = folder / "topologies" / f"{name}.json"
            if path.is_file():
                return _load_topology(str(path))
        raise FileNotFoundError(f"topology fixture {name!r} not found next to {self.case_file}")

    def data_file(self, relative: str) -> Path:
        for folder in [self.case_file.parent, *self.set_dirs]:
            path = folder / relative
            if path.is_file():
                return path
        raise FileNotFoundError(f"data file {relative!r} not found next to {self.case_file}")


@cache
def _load_topology(path: str) -> Topology:
    return load_topology_file(path)

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


@dataclass(frozen=True)
class NotApplicable:
    """A runner path that does not apply to a case, and why: tallied as skipped on that path, with the
    reason, never dropped silently."""

    reason: str


#: why the agent's admission path skips a case that checks a policy constructor's error
EXPECT_NEW = "checks a policy constructor's error (expect_new); the agent's node configuration refuses those itself"
#: why the agent's admission path skips a case whose settings no node configuration can hold
NOT_A_NODE_CONFIG = "the case's settings cannot be written as a node configuration (it refuses them)"


class MissingField(KeyError):
    """A case lacks a field its kind reads; ``field`` is its path inside the case (``ops[2].hint``)."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class CaseDict(dict[str, Any]):
    """A case (or a mapping inside it) that names the field's path when a runner reads a missing key."""

    path: str = ""

    def __missing__(self, key: str) -> Any:
        raise MissingField(f"{self.path}.{key}" if self.path else str(key))


def case_tree(value: Any, path: str = "") -> Any:
    """``value`` (a parsed case) with every mapping a :class:`CaseDict` knowing its path."""
    if isinstance(value, dict):
        out = CaseDict((k, case_tree(v, f"{path}.{k}" if path else str(k))) for k, v in value.items())
        out.path = path
        return out
    if isinstance(value, list):
        return [case_tree(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


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

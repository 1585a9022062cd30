"""Errors of the conformance runner.

Exception tree::

    ConformanceError              (base)
    └── CaseFileError             a case file (line) is unusable: not a JSON object, a missing field,
                                  not UTF-8, no case at all; names the file and line
"""

from __future__ import annotations

from pathlib import Path


class ConformanceError(Exception):
    """Base class of the conformance runner's errors."""


class CaseFileError(ConformanceError, ValueError):
    """Line ``line`` of the case file ``path`` is unusable (``line`` None: the whole file, e.g. empty)."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason

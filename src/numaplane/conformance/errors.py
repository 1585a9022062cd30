"""Errors of the conformance runner.

Exception tree::

    ConformanceError              (base)
    └── CaseFileError             a case file line is not a JSON object; names the file and line
"""

from __future__ import annotations

from pathlib import Path


class ConformanceError(Exception):
    """Base class of the conformance runner's errors."""


class CaseFileError(ConformanceError, ValueError):
    """Line ``line`` of the case file ``path`` is unusable."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason

"""Errors of the topology package.

Exception tree::

    TopologyError                    (base of everything raised here)
    ├── CPUSetParseError             malformed cpuset string (also a ValueError)
    ├── TopologyFormatError          malformed topology JSON document (also a ValueError)
    ├── SysfsError                   sysfs tree unreadable or malformed (names the file)
    └── TopologyLoadError            a named topology input cannot be loaded (names the file; also a ValueError)
"""

from __future__ import annotations

import os


class TopologyError(Exception):
    """Base class of the topology package's errors."""


class CPUSetParseError(TopologyError, ValueError):
    """A cpuset string is not in the kubelet / Linux list syntax."""

    def __init__(self, text: str, reason: str) -> None:
        shown = text if len(text) <= 80 else f"{text[:80]}... ({len(text)} characters)"
        super().__init__(f"invalid cpuset {shown!r}: {reason}")
        self.text = text
        self.reason = reason


class TopologyFormatError(TopologyError, ValueError):
    """A topology JSON document is malformed; ``path`` locates the bad field."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid topology document at {path}: {reason}")
        self.path = path
        self.reason = reason


class SysfsError(TopologyError):
    """A sysfs file is unreadable or malformed; ``file`` names it."""

    def __init__(self, file: str, reason: str) -> None:
        super().__init__(f"{file}: {reason}")
        self.file = file
        self.reason = reason


class TopologyLoadError(TopologyError, ValueError):
    """A topology input (name, document, sysfs folder, archive) cannot be loaded; ``path`` names it."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason

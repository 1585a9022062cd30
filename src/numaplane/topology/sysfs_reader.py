"""File access for sysfs discovery: read small text files under a root, fast and with clear errors.

A missing file or directory is ``None`` (callers decide the fallback); any other OS error, and
content that does not parse, raises :class:`SysfsError` naming the full path. Reads use raw file
descriptors because discovery opens thousands of tiny files and ``open()`` costs several times more.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import SysfsError
from numaplane.topology.sysfs_parse import parse_cpulist, parse_cpumask, parse_hex_id, parse_int

__all__ = ["Reader"]

_MISSING = (errno.ENOENT, errno.ENOTDIR)
_MAX_FILE_BYTES = 1 << 20


class Reader:
    """Reads paths relative to ``root`` (``"sys/devices/system/cpu/online"``)."""

    def __init__(self, root: Path) -> None:
        self.root = os.fspath(root).rstrip("/") or ""

    def path(self, rel: str) -> str:
        """The full path of ``rel`` (used in error messages)."""
        return f"{self.root}/{rel}"

    def text(self, rel: str) -> str | None:
        """The file's text, or ``None`` when it does not exist."""
        path = f"{self.root}/{rel}"
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            if exc.errno in _MISSING:
                return None
            raise SysfsError(path, exc.strerror or str(exc)) from None
        try:
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > _MAX_FILE_BYTES:
                    raise SysfsError(path, "file too large for a sysfs attribute")
        except OSError as exc:
            raise SysfsError(path, exc.strerror or str(exc)) from None
        finally:
            os.close(fd)
        try:
            return b"".join(chunks).decode("ascii")
        except UnicodeDecodeError:
            raise SysfsError(path, "not ASCII text") from None

    def listdir(self, rel: str) -> list[str] | None:
        """Entry names of a directory, or ``None`` when it does not exist."""
        path = f"{self.root}/{rel}"
        try:
            return os.listdir(path)
        except OSError as exc:
            if exc.errno in _MISSING:
                return None
            raise SysfsError(path, exc.strerror or str(exc)) from None

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(f"{self.root}/{rel}")

    def integer(self, rel: str) -> int | None:
        text = self.text(rel)
        return None if text is None else parse_int(text, self.path(rel))

    def cpus(self, *rels: str) -> CPUSet | None:
        """The first of ``rels`` that exists, parsed as a list (``0-3,8``)."""
        for rel in rels:
            text = self.text(rel)
            if text is not None:
                return parse_cpulist(text, self.path(rel))
        return None

    def cpus_mask(self, *rels: str) -> CPUSet | None:
        """The first of ``rels`` that exists, parsed as a hex mask (``00000000,000000ff``)."""
        for rel in rels:
            text = self.text(rel)
            if text is not None:
                return parse_cpumask(text, self.path(rel))
        return None

    def hex_id(self, rel: str) -> str:
        """A PCI id without ``0x`` (``""`` when the file is missing)."""
        text = self.text(rel)
        return "" if text is None else parse_hex_id(text, self.path(rel))

    def link_name(self, rel: str) -> str | None:
        """The last component of a symlink's target (the link may dangle), ``None`` if absent."""
        path = f"{self.root}/{rel}"
        try:
            target = os.readlink(path)
        except OSError as exc:
            if exc.errno in (*_MISSING, errno.EINVAL):
                return None
            raise SysfsError(path, exc.strerror or str(exc)) from None
        name = target.rstrip("/").rsplit("/", 1)[-1]
        return name or None

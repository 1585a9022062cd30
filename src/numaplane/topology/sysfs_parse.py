"""Pure parsers for the contents of Linux sysfs topology files (no I/O).

Every function takes the text of one file and the file's name (used only in error messages) and
either returns a value or raises :class:`SysfsError` naming that file — never any other exception,
whatever the input (the fuzz tests hold them to this). ``topology/sysfs.py`` does the reading.

Tolerated, by design: surrounding whitespace and trailing NUL bytes (some captures pad files with
``\\0``). Everything else that the kernel would never print is an error.

Formats (as the kernel prints them):

* *cpulist* / *nodelist*: ``0-3,8,10-11`` (``bitmap_print_to_pagebuf`` list form), possibly empty;
* *cpumask*: comma-separated 32-bit hex words, most significant first (``00000000,000000ff``);
* *meminfo*: ``Node 0 MemTotal:  16769836 kB`` lines (node files) or ``MemTotal: … kB`` (``/proc``);
  values are returned in **bytes**;
* *distance*: space-separated SLIT values for the online nodes in ascending id order;
* hugepage directories: ``hugepages-2048kB`` → page size in **bytes**;
* PCI ids: ``0x8086`` → ``"8086"`` (lower-case hex, no prefix).
"""

from __future__ import annotations

import re

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import CPUSetParseError, SysfsError

__all__ = [
    "clean",
    "parse_bool",
    "parse_cpulist",
    "parse_cpumask",
    "parse_distances",
    "parse_hex_id",
    "parse_hugepage_size",
    "parse_int",
    "parse_meminfo",
]

_INT = re.compile(r"-?[0-9]+\Z")
_HEX_WORD = re.compile(r"[0-9a-fA-F]{1,8}\Z")
_HEX_ID = re.compile(r"(?:0[xX])?([0-9a-fA-F]{1,8})\Z")
_HUGEPAGE_DIR = re.compile(r"hugepages-([0-9]+)kB\Z")
_MEMINFO_LINE = re.compile(r"(?:Node +[0-9]+ +)?([A-Za-z0-9_()]+): *([0-9]+)(?: *(kB))?\Z")
# A sysfs integer never needs more digits than this; it also bounds the work done on junk input.
_MAX_INT_DIGITS = 20
_MAX_CPU_ID = 1 << 20


def clean(text: str) -> str:
    """Strip surrounding whitespace and trailing NUL padding."""
    return text.strip().rstrip("\x00").strip()


def parse_int(text: str, file: str) -> int:
    """A signed decimal integer (``physical_package_id`` may be ``-1``)."""
    value = clean(text)
    if not _INT.match(value) or len(value) > _MAX_INT_DIGITS:
        raise SysfsError(file, f"expected an integer, got {_show(value)}")
    return int(value)


def parse_bool(text: str, file: str) -> bool:
    """``0`` or ``1`` (``cpuN/online``)."""
    value = clean(text)
    if value not in ("0", "1"):
        raise SysfsError(file, f"expected 0 or 1, got {_show(value)}")
    return value == "1"


def parse_cpulist(text: str, file: str) -> CPUSet:
    """A Linux list (``0-3,8``); the empty list is the empty set."""
    value = clean(text)
    try:
        return CPUSet.parse(value)
    except CPUSetParseError as exc:
        raise SysfsError(file, f"malformed list {_show(value)}: {exc.reason}") from None


def parse_cpumask(text: str, file: str) -> CPUSet:
    """A Linux hex mask of comma-separated 32-bit words, most significant word first."""
    value = clean(text)
    if not value:
        raise SysfsError(file, "empty mask")
    words = value.split(",")
    if len(words) * 32 > _MAX_CPU_ID:
        raise SysfsError(file, "mask too long")
    mask = 0
    for word in words:
        if not _HEX_WORD.match(word):
            raise SysfsError(file, f"malformed mask {_show(value)}: bad word {_show(word)}")
        mask = (mask << 32) | int(word, 16)
    return CPUSet.from_mask(mask)


def parse_distances(text: str, file: str) -> list[int]:
    """SLIT distances, one per online node in ascending id order (non-negative integers)."""
    value = clean(text)
    fields = value.split()
    if not fields:
        raise SysfsError(file, "empty distance list")
    out: list[int] = []
    for f in fields:
        if not f.isascii() or not f.isdigit() or len(f) > _MAX_INT_DIGITS:
            raise SysfsError(file, f"malformed distance {_show(f)}")
        out.append(int(f))
    return out


def parse_meminfo(text: str, file: str) -> dict[str, int]:
    """``key → bytes`` for the ``kB`` lines of a (node) meminfo file; unit-less lines are counts.

    Blank lines are skipped; any other line that does not look like ``[Node N] Key: value [kB]`` is
    an error.
    """
    out: dict[str, int] = {}
    for raw in clean(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _MEMINFO_LINE.match(line)
        if m is None or len(m.group(2)) > _MAX_INT_DIGITS:
            raise SysfsError(file, f"malformed meminfo line {_show(line)}")
        number = int(m.group(2))
        out[m.group(1)] = number * 1024 if m.group(3) else number
    return out


def parse_hugepage_size(dirname: str, file: str) -> int:
    """``hugepages-2048kB`` → ``2097152`` (bytes per page)."""
    m = _HUGEPAGE_DIR.match(dirname)
    if m is None or len(m.group(1)) > _MAX_INT_DIGITS or int(m.group(1)) == 0:
        raise SysfsError(file, f"unexpected hugepage directory name {_show(dirname)}")
    return int(m.group(1)) * 1024


def parse_hex_id(text: str, file: str) -> str:
    """A PCI vendor / device / class id (``0x8086``) as lower-case hex without the prefix."""
    value = clean(text)
    m = _HEX_ID.match(value)
    if m is None:
        raise SysfsError(file, f"expected a hex id, got {_show(value)}")
    return m.group(1).lower()


def _show(value: str) -> str:
    """A short printable rendering of untrusted content for error messages."""
    return repr(value if len(value) <= 60 else value[:57] + "...")

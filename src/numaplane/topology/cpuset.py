"""Immutable CPU sets with the kubelet's (``k8s.io/utils/cpuset``) string syntax.

Representation: a non-negative Python ``int`` used as a bitmask (bit *i* set ⇔ CPU *i* in the set).
Set algebra is therefore a single big-int operation, and two sets are equal iff their masks are.

String syntax (identical to ``cpuset.Parse`` / ``CPUSet.String`` upstream, and to Linux cpulists):

* elements separated by ``,``; an element is ``N`` or an inclusive range ``A-B`` with ``A <= B``;
* ids are unsigned decimal integers; the empty string is the empty set;
* formatting is canonical: ascending, every run of two or more consecutive ids written ``A-B``.

Parsing is strict where Go's ``strconv.Atoi`` would be lenient only by accident (a leading ``+``,
whitespace, ``_`` digit separators are rejected), so every accepted string round-trips.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from numaplane.limits import MAX_CPU_ID as _LIMIT_CPU_ID
from numaplane.limits import MAX_CPUSET_CHARS
from numaplane.topology.errors import CPUSetParseError

__all__ = ["CPUSet"]

_DIGITS = re.compile(r"[0-9]+\Z")
# Upper bound on a CPU id: keeps a hostile "0-99999999999" from allocating a gigantic int (and every
# set operation on a parsed set cheap). Linux's NR_CPUS is at most 8192 on every architecture.
MAX_CPU_ID = _LIMIT_CPU_ID


class CPUSet:
    """An immutable set of logical CPU ids.

    Invariant: ``mask >= 0``; instances never change after construction and are hashable.
    """

    __slots__ = ("_mask",)

    _mask: int

    def __init__(self, cpus: Iterable[int] = ()) -> None:
        mask = 0
        for cpu in cpus:
            if cpu < 0:
                raise ValueError(f"negative CPU id {cpu}")
            mask |= 1 << cpu
        object.__setattr__(self, "_mask", mask)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_mask(cls, mask: int) -> CPUSet:
        """Wrap a bitmask (bit *i* ⇔ CPU *i*); ``mask`` must be non-negative."""
        if mask < 0:
            raise ValueError("a CPU mask cannot be negative")
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_mask", mask)
        return obj

    @classmethod
    def range(cls, first: int, last: int) -> CPUSet:
        """The inclusive range ``first..last`` (empty when ``last < first``)."""
        if first < 0:
            raise ValueError(f"negative CPU id {first}")
        if last < first:
            return EMPTY
        return cls.from_mask(((1 << (last - first + 1)) - 1) << first)

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse the kubelet / Linux list syntax; raise :class:`CPUSetParseError` on bad input."""
        if not isinstance(text, str):
            raise CPUSetParseError(type(text).__name__, "expected a string")
        if text == "":
            return EMPTY
        if len(text) > MAX_CPUSET_CHARS:
            raise CPUSetParseError(text, f"longer than {MAX_CPUSET_CHARS} characters")
        mask = 0
        for element in text.split(","):
            bounds = element.split("-", 1)
            if len(bounds) == 1:
                cpu = _parse_id(text, bounds[0])
                mask |= 1 << cpu
            else:
                if bounds[0] == "":
                    raise CPUSetParseError(text, f"invalid element {element!r}: negative or missing start")
                first = _parse_id(text, bounds[0])
                last = _parse_id(text, bounds[1])
                if first > last:
                    raise CPUSetParseError(text, f"invalid range {element!r}: start > end")
                mask |= ((1 << (last - first + 1)) - 1) << first
        return cls.from_mask(mask)

    # -- queries --------------------------------------------------------------------------------
    @property
    def mask(self) -> int:
        """The bitmask (bit *i* set ⇔ CPU *i* in the set)."""
        return self._mask

    def size(self) -> int:
        """Number of CPUs in the set."""
        return self._mask.bit_count()

    def __len__(self) -> int:
        return self._mask.bit_count()

    def is_empty(self) -> bool:
        return self._mask == 0

    def __bool__(self) -> bool:
        return self._mask != 0

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and (self._mask >> cpu) & 1 == 1

    def __iter__(self) -> Iterator[int]:
        mask = self._mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def sorted(self) -> list[int]:
        """The ids in ascending order (``cpuset.List()`` upstream)."""
        return list(self)

    def first(self) -> int:
        """The lowest id; raises ``ValueError`` on the empty set."""
        if not self._mask:
            raise ValueError("empty CPU set has no first element")
        return (self._mask & -self._mask).bit_length() - 1

    def last(self) -> int:
        """The highest id; raises ``ValueError`` on the empty set."""
        if not self._mask:
            raise ValueError("empty CPU set has no last element")
        return self._mask.bit_length() - 1

    def is_subset_of(self, other: CPUSet) -> bool:
        return self._mask & ~other._mask == 0

    def is_superset_of(self, other: CPUSet) -> bool:
        return other._mask & ~self._mask == 0

    def intersects(self, other: CPUSet) -> bool:
        return self._mask & other._mask != 0

    # -- algebra --------------------------------------------------------------------------------
    def union(self, *others: CPUSet) -> CPUSet:
        mask = self._mask
        for other in others:
            mask |= other._mask
        return CPUSet.from_mask(mask)

    def intersection(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & other._mask)

    def difference(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & ~other._mask)

    def symmetric_difference(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask ^ other._mask)

    def __or__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask | other._mask)

    def __and__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & other._mask)

    def __sub__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & ~other._mask)

    def __xor__(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask ^ other._mask)

    def __le__(self, other: CPUSet) -> bool:
        return self.is_subset_of(other)

    def __ge__(self, other: CPUSet) -> bool:
        return self.is_superset_of(other)

    # -- identity -------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUSet) and other._mask == self._mask

    def __hash__(self) -> int:
        return hash(self._mask)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CPUSet is immutable")

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return (CPUSet.from_mask, (self._mask,))

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"CPUSet({self.format()!r})"

    def format(self) -> str:
        """Canonical kubelet string: ascending, runs of two or more as ``A-B``, ``""`` when empty."""
        parts: list[str] = []
        mask = self._mask
        base = 0
        while mask:
            # skip zeros, then measure the run of ones
            low = mask & -mask
            zeros = low.bit_length() - 1
            mask >>= zeros
            base += zeros
            ones = (~mask & (mask + 1)).bit_length() - 1
            start, end = base, base + ones - 1
            parts.append(str(start) if start == end else f"{start}-{end}")
            mask >>= ones
            base += ones
        return ",".join(parts)


def _parse_id(text: str, token: str) -> int:
    if not _DIGITS.match(token):
        what = "empty element" if token == "" else f"{token!r} is not an unsigned integer"
        raise CPUSetParseError(text, what)
    if len(token.lstrip("0")) > len(str(MAX_CPU_ID)):
        # checked before int(): Python refuses to convert over 4300 digits with a plain ValueError
        raise CPUSetParseError(text, f"CPU id {token[:20]}… exceeds the supported maximum {MAX_CPU_ID}")
    value = int(token)
    if value > MAX_CPU_ID:
        raise CPUSetParseError(text, f"CPU id {value} exceeds the supported maximum {MAX_CPU_ID}")
    return value


EMPTY = CPUSet.from_mask(0)

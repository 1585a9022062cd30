"""CPUSet: kubelet / Linux list syntax and set algebra, checked against Python sets with hypothesis."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaplane.topology.cpuset import MAX_CPU_ID, CPUSet
from numaplane.topology.errors import CPUSetParseError

ids = st.integers(min_value=0, max_value=300) | st.integers(min_value=0, max_value=5000)
id_sets = st.frozensets(ids, max_size=60)
ranges = st.tuples(ids, st.integers(min_value=0, max_value=40)).map(lambda t: (t[0], t[0] + t[1]))

# The grammar the kubelet accepts (and Linux prints): elements "N" or "A-B" (A <= B) joined by ",".
_ELEMENT = re.compile(r"[0-9]+(-[0-9]+)?\Z")


def reference_parse(text: str) -> set[int] | None:
    """A deliberately naive reference parser; ``None`` where the text is not valid."""
    if text == "":
        return set()
    out: set[int] = set()
    for element in text.split(","):
        if not _ELEMENT.match(element):
            return None
        first, _, last = element.partition("-")
        lo, hi = int(first), int(last or first)
        if lo > hi or hi > MAX_CPU_ID:
            return None
        out.update(range(lo, hi + 1))
    return out


@given(id_sets)
def test_format_parse_round_trip(cpus: frozenset[int]) -> None:
    s = CPUSet(cpus)
    text = s.format()
    assert CPUSet.parse(text) == s
    assert set(CPUSet.parse(text)) == cpus
    assert str(s) == text


@given(st.lists(ranges, max_size=12))
def test_parse_of_unsorted_overlapping_ranges(parts: list[tuple[int, int]]) -> None:
    text = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts)
    expected = {c for a, b in parts for c in range(a, b + 1)}
    parsed = CPUSet.parse(text)
    assert set(parsed) == expected
    assert parsed.format() == CPUSet(expected).format()


@given(id_sets)
def test_format_is_canonical(cpus: frozenset[int]) -> None:
    text = CPUSet(cpus).format()
    ordered = sorted(cpus)
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    assert text == ",".join(runs)


@given(id_sets, id_sets)
def test_algebra_matches_python_sets(a: frozenset[int], b: frozenset[int]) -> None:
    x, y = CPUSet(a), CPUSet(b)
    assert set(x | y) == a | b and set(x.union(y)) == a | b
    assert set(x & y) == a & b and set(x.intersection(y)) == a & b
    assert set(x - y) == a - b and set(x.difference(y)) == a - b
    assert set(x ^ y) == a ^ b and set(x.symmetric_difference(y)) == a ^ b
    assert (x <= y) == (a <= b) and x.is_subset_of(y) == (a <= b)
    assert (x >= y) == (a >= b) and x.is_superset_of(y) == (a >= b)
    assert x.intersects(y) == bool(a & b)
    assert (x == y) == (a == b)
    assert (hash(x) == hash(y)) or a != b
    assert len(x) == x.size() == len(a)
    assert bool(x) == bool(a) and x.is_empty() == (not a)
    assert x.sorted() == sorted(a)
    for cpu in [*list(a)[:5], max(b, default=0) + 1, -1]:
        assert (cpu in x) == (cpu in a)
    if a:
        assert x.first() == min(a) and x.last() == max(a)
    assert pickle.loads(pickle.dumps(x)) == x


@given(st.lists(ranges, max_size=6))
def test_range_constructor(parts: list[tuple[int, int]]) -> None:
    for a, b in parts:
        assert set(CPUSet.range(a, b)) == set(range(a, b + 1))
        assert CPUSet.range(b + 1, a).is_empty()


@given(st.text(alphabet="0123456789,- +_xa\n", max_size=30) | st.text(max_size=20))
def test_parse_accepts_exactly_the_grammar(text: str) -> None:
    expected = reference_parse(text)
    if expected is None:
        with pytest.raises(CPUSetParseError):
            CPUSet.parse(text)
    else:
        assert set(CPUSet.parse(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "3-1",
        "-1",
        "-",
        "1--2",
        "1-2-3",
        ",",
        "1,",
        ",1",
        "1,,2",
        " 1",
        "1 ",
        "+1",
        "1_0",
        "a",
        "0x1",
        "1-",
        "٣",
        "1" * 5000,
        str(MAX_CPU_ID + 1),
    ],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(CPUSetParseError) as info:
        CPUSet.parse(text)
    assert isinstance(info.value, ValueError)
    assert info.value.text == text


def test_empty_and_edges() -> None:
    assert CPUSet.parse("") == CPUSet() and CPUSet().format() == ""
    assert CPUSet.parse("0-0").format() == "0"
    assert CPUSet.parse("5,3,4").format() == "3-5"
    assert CPUSet.parse(str(MAX_CPU_ID)).last() == MAX_CPU_ID
    with pytest.raises(ValueError):
        CPUSet().first()
    with pytest.raises(ValueError):
        CPUSet([-1])
    with pytest.raises(AttributeError):
        CPUSet([1])._mask = 3  # type: ignore[misc]

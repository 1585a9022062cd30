"""Kubernetes quantities: exact values, upstream rounding, canonical text, clear errors."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaplane.resources import QuantityError, parse_quantity
from numaplane.resources.quantity import Quantity, format_quantity


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("100m", 1, 100),
        ("1Gi", 1 << 30, (1 << 30) * 1000),
        ("1e3", 1000, 1_000_000),
        ("0.5", 1, 500),
        ("977m", 1, 977),
        ("1G", 10**9, 10**12),
        ("2", 2, 2000),
        ("1.5", 2, 1500),
        ("10000m", 10, 10000),
        (".5", 1, 500),
        ("-1", -1, -1000),
        ("1E-3", 1, 1),
        ("1k", 1000, 10**6),
        ("1000Mi", 1000 << 20, (1000 << 20) * 1000),
        ("1n", 1, 1),
        ("5E", 5 * 10**18, 5 * 10**21),
    ],
)
def test_value_and_milli_value_round_up_like_upstream(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("0.5", "500m"),
        ("1e3", "1k"),
        ("2000m", "2"),
        ("0", "0"),
    ],
)
def test_canonical_text(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


@pytest.mark.parametrize("bad", ["", "1.2.3", "Mi", "1 Gi", "1KB", "abc", "1e", "--1", "1e99999", "0x10", "1_000"])
def test_malformed_quantities_raise_a_typed_error_naming_the_text(bad: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(bad)
    assert repr(bad) in str(info.value)


@given(st.text(max_size=12))
def test_any_text_parses_or_raises_quantity_error(text: str) -> None:
    try:
        q = parse_quantity(text)
    except QuantityError:
        return
    assert isinstance(q.amount, Fraction)


@given(st.integers(min_value=0, max_value=1 << 62), st.booleans())
def test_format_parse_round_trip_is_exact(value: int, binary: bool) -> None:
    text = format_quantity(value, binary=binary)
    assert parse_quantity(text).amount == value


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_milli_round_trip(milli: int) -> None:
    q = Quantity.from_milli(milli)
    assert parse_quantity(str(q)).milli_value() == milli


fractions_st = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70).map(Fraction),
    st.fractions(max_denominator=10**9),
)


@given(fractions_st, fractions_st, st.booleans(), st.booleans())
def test_integer_fast_paths_equal_fraction_arithmetic(a: Fraction, b: Fraction, ba: bool, bb: bool) -> None:
    qa, qb = Quantity(a, ba), Quantity(b, bb)
    for got, want in ((qa + qb, Quantity(a + b, ba and bb)), (qa - qb, Quantity(a - b, ba and bb))):
        assert got == want and got.binary == want.binary and type(got.amount) is Fraction
        assert str(got) == str(want)
    assert qa.value() == math.ceil(a)
    assert qa.milli_value() == math.ceil(a * 1000)
    assert qa.is_zero() == (a == 0)
    assert (qa < qb, qa <= qb) == (a < b, a <= b)

"""Go durations: ``time.ParseDuration``'s grammar and arithmetic, typed errors, bounded input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaplane.resources.duration import MAX_DURATION_LENGTH, format_duration, parse_duration, parse_duration_nanos
from numaplane.resources.errors import DurationError, ResourceError

S = 1_000_000_000
MINUTE = 60 * S
HOUR = 60 * MINUTE


# Cases from Go's src/time/time_test.go (parseDurationTests), plus the ones the issue names.
@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("0", 0),
        ("-0", 0),
        ("+0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0s", 0),
        ("1.5s", 3 * S // 2),
        (".5s", S // 2),
        ("1.s", S),
        ("1.0s", S),
        ("1.004s", 1004 * 1_000_000),
        ("100.00100s", 100_001 * 1_000_000),
        ("10ns", 10),
        ("11us", 11_000),
        ("12µs", 12_000),  # U+00B5
        ("12μs", 12_000),  # U+03BC
        ("2us", 2_000),
        ("2µs", 2_000),
        ("13ms", 13_000_000),
        ("300ms", 300_000_000),
        ("14s", 14 * S),
        ("15m", 15 * MINUTE),
        ("16h", 16 * HOUR),
        ("1h30m", 90 * MINUTE),
        ("3h30m", 3 * HOUR + 30 * MINUTE),
        ("10.5s4m", 4 * MINUTE + 10 * S + S // 2),
        ("-2m3.4s", -(2 * MINUTE + 3 * S + 4 * S // 10)),
        ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * S + 4_000_000 + 5_000 + 6),
        ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * S + 425_000_000),
        ("52763797000ns", 52_763_797_000),
        ("0.3333333333333333333h", 20 * MINUTE),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", (1 << 63) - 1),
        ("9223372036854775.807us", (1 << 63) - 1),
        ("9223372036s854ms775us807ns", (1 << 63) - 1),
        ("-9223372036854775808ns", -(1 << 63)),
        ("-9223372036854775807ns", -((1 << 63) - 1)),
        ("0.100000000000000000000h", 6 * MINUTE),
        ("0.830103483285477580700h", 49 * MINUTE + 48 * S + 372_539_827),
    ],
)
def test_go_durations(text: str, nanos: int) -> None:
    assert parse_duration_nanos(text) == nanos
    assert parse_duration(text) == nanos / 1e9


@pytest.mark.parametrize(
    "text",
    [
        "",
        "3",
        "90",  # a number without a unit is a duration only when it is "0"
        "00",
        "-",
        "s",
        ".",
        "-.",
        ".s",
        "+.s",
        "1d",
        "1 s",
        " 1s",
        "1s ",
        "1S",
        "\x85\x85",
        "hello \xff world",
        "9223372036854775808ns",
        "9223372036854775808h",
        "3000000h",
        "9223372036854775.808us",
        "9223372036854ms775us808ns",
        "--1s",
        "1s-1s",
    ],
)
def test_not_go_durations(text: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration_nanos(text)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ResourceError)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("text", "non_negative", "reason"),
    [("90", False, "missing unit"), ("1d", False, "unknown unit 'd'"), ("-1s", True, "negative"), ("", False, "empty")],
)
def test_error_says_why(text: str, non_negative: bool, reason: str) -> None:
    with pytest.raises(DurationError, match=reason):
        parse_duration(text, non_negative=non_negative)


def test_negative_zero_is_not_negative() -> None:
    assert parse_duration("-0s", non_negative=True) == 0.0


def test_bounded_length() -> None:
    long = "1" * MAX_DURATION_LENGTH + "s"
    with pytest.raises(DurationError, match=f"longer than {MAX_DURATION_LENGTH}") as info:
        parse_duration_nanos(long)
    assert len(str(info.value)) < 200
    assert parse_duration_nanos("0" * (MAX_DURATION_LENGTH - 1) + "s") == 0


def test_not_a_string() -> None:
    with pytest.raises(DurationError):
        parse_duration_nanos(5)  # type: ignore[arg-type]


_UNITS = {"h": HOUR, "m": MINUTE, "s": S, "ms": 1_000_000, "us": 1_000, "µs": 1_000, "μs": 1_000, "ns": 1}


@given(
    st.lists(st.tuples(st.integers(0, 10**5), st.sampled_from(sorted(_UNITS))), min_size=1, max_size=6),
    st.sampled_from(["", "+", "-"]),
)
def test_whole_parts_add_up(parts: list[tuple[int, str]], sign: str) -> None:
    text = sign + "".join(f"{n}{unit}" for n, unit in parts)
    total = sum(n * _UNITS[unit] for n, unit in parts)
    assert parse_duration_nanos(text) == (-total if sign == "-" else total)


@given(st.text(alphabet="0123456789.+-nsuµμmh d", max_size=24))
def test_any_text_parses_or_raises_duration_error(text: str) -> None:
    try:
        nanos = parse_duration_nanos(text)
    except DurationError:
        return
    assert -(1 << 63) <= nanos < (1 << 63)
    if text[:1] not in ("-", "+"):
        assert parse_duration_nanos("-" + text) == -nanos


@given(st.integers(min_value=0, max_value=10**7))
def test_format_round_trip(millis: int) -> None:
    assert parse_duration_nanos(format_duration(millis / 1000)) == millis * 1_000_000

"""Go durations (``time.ParseDuration``, as Kubernetes APIs and flags accept them), exactly.

Grammar: ``[-+]?`` then ``0`` alone, or one or more ``<number><unit>`` where the number is
``[0-9]*(\\.[0-9]*)?`` with at least one digit and the unit is one of ``ns us µs μs ms s m h``.
So ``"1h30m"``, ``"1.5s"``, ``".5s"``, ``"1.s"``, ``"-1s"``, ``"2µs"`` and ``"0"`` are durations; ``"90"``
(no unit), ``""``, ``"1d"`` and ``"1 s"`` are not. Values are integer nanoseconds as in Go, computed
with Go's arithmetic (the fraction of a part is scaled in floating point and truncated) and bounded
by Go's ``int64`` range; :func:`parse_duration` gives them in seconds. Inputs longer than
:data:`MAX_DURATION_LENGTH` characters are refused before parsing.
"""

from __future__ import annotations

import re

from numaplane.resources.errors import DurationError

__all__ = ["MAX_DURATION_LENGTH", "format_duration", "parse_duration", "parse_duration_nanos", "parse_seconds"]

#: Longest duration text accepted (Go has no bound; ours keeps hostile inputs cheap).
MAX_DURATION_LENGTH = 128

_UNIT_NANOS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NANOS = 1 << 63
_DIGITS = frozenset("0123456789")


def _leading_int(text: str, orig: str) -> tuple[int, str]:
    """Go ``leadingInt``: the leading digits' value (overflow above 2**63 is an error) and the rest."""
    i = 0
    value = 0
    while i < len(text) and text[i] in _DIGITS:
        value = value * 10 + ord(text[i]) - 48
        if value > _MAX_NANOS:
            raise DurationError(orig, "out of range")
        i += 1
    return value, text[i:]


def _leading_fraction(text: str) -> tuple[int, float, str]:
    """Go ``leadingFraction``: digits after the point as (value, scale); precision stops at overflow."""
    i = 0
    value = 0
    scale = 1.0
    overflow = False
    while i < len(text) and text[i] in _DIGITS:
        if not overflow:
            digit = value * 10 + ord(text[i]) - 48
            if value > (_MAX_NANOS - 1) // 10 or digit > _MAX_NANOS:
                overflow = True
            else:
                value = digit
                scale *= 10
        i += 1
    return value, scale, text[i:]


def parse_duration_nanos(text: str) -> int:
    """Integer nanoseconds of a Go duration string; :class:`DurationError` when Go would refuse it."""
    if not isinstance(text, str):
        raise DurationError(text, "not a string")
    if len(text) > MAX_DURATION_LENGTH:
        raise DurationError(text[:32] + "...", f"longer than {MAX_DURATION_LENGTH} characters")
    orig = text
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise DurationError(orig, "empty")
    total = 0
    while text:
        if text[0] != "." and text[0] not in _DIGITS:
            raise DurationError(orig, "each part is a number and a unit")
        before = len(text)
        whole, text = _leading_int(text, orig)
        has_int = len(text) != before
        fraction, scale, has_fraction = 0, 1.0, False
        if text[:1] == ".":
            text = text[1:]
            before = len(text)
            fraction, scale, text = _leading_fraction(text)
            has_fraction = len(text) != before
        if not has_int and not has_fraction:
            raise DurationError(orig, "a number needs at least one digit")
        end = 0
        while end < len(text) and text[end] != "." and text[end] not in _DIGITS:
            end += 1
        if end == 0:
            raise DurationError(orig, "missing unit: ns, us, ms, s, m or h")
        unit_text, text = text[:end], text[end:]
        unit = _UNIT_NANOS.get(unit_text)
        if unit is None:
            raise DurationError(orig, f"unknown unit {unit_text!r}: ns, us, ms, s, m or h")
        if whole > _MAX_NANOS // unit:
            raise DurationError(orig, "out of range")
        part = whole * unit
        if fraction > 0:
            # As Go: float64 keeps fractions of hours nanosecond-accurate; the result is truncated.
            part += int(float(fraction) * (float(unit) / scale))
            if part > _MAX_NANOS:
                raise DurationError(orig, "out of range")
        total += part
        if total > _MAX_NANOS:
            raise DurationError(orig, "out of range")
    if negative:
        return -total
    if total > _MAX_NANOS - 1:
        raise DurationError(orig, "out of range")
    return total


def parse_duration(text: str, *, non_negative: bool = False) -> float:
    """Seconds of a Go duration string (``"1m30s"`` → 90.0); ``non_negative`` also refuses ``"-1s"``."""
    nanos = parse_duration_nanos(text)
    if non_negative and nanos < 0:
        raise DurationError(text, "negative")
    return nanos / 1e9


_PLAIN_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")


def parse_seconds(text: str) -> float:
    """Non-negative seconds from a Go duration (``5s``, ``1m30s``, ``250ms``, ``0``) or a plain number of
    seconds (``5``, ``0.5``): what every period flag accepts. Raises :class:`DurationError`."""
    body = text.strip()
    if _PLAIN_SECONDS.fullmatch(body):
        return float(body)
    return parse_duration(body, non_negative=True)


def format_duration(seconds: float) -> str:
    """Canonical short form of a non-negative duration: ``90.0`` → ``"1m30s"``, ``0.25`` → ``"250ms"``.

    Milliseconds are the finest unit written; :func:`parse_duration` reads every output back.
    """
    if seconds < 0:
        raise ValueError("durations are non-negative")
    if seconds == 0:
        return "0s"
    millis = round(seconds * 1000)
    if millis % 1000:
        return f"{millis}ms"
    whole = millis // 1000
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")

"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``), exactly.

Syntax: ``<sign?><digits>[.<digits>]<suffix?>`` where the suffix is a binary SI suffix
(``Ki Mi Gi Ti Pi Ei``), a decimal SI suffix (``n u m k M G T P E``) or a decimal exponent
(``e3``, ``E-2``). Values are kept exact as :class:`fractions.Fraction`; :meth:`Quantity.value` and
:meth:`Quantity.milli_value` round *up* to an integer exactly as upstream ``Value()`` /
``MilliValue()`` do. Formatting follows upstream canonical form for the common cases: binary SI when
the value was written in binary SI and is a whole multiple of 1024 (or an integer < 1024), otherwise
decimal SI with the largest suffix that keeps an integer mantissa.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from numaplane.limits import MAX_QUANTITY_CHARS, MAX_QUANTITY_EXPONENT, MAX_QUANTITY_VALUE
from numaplane.resources.errors import QuantityError

__all__ = ["ZERO", "Quantity", "format_quantity", "parse_quantity"]

_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SYNTAX = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?\Z"
)


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity. ``binary`` records that it was written with a binary SI suffix (for formatting)."""

    amount: Fraction
    binary: bool = False

    # Integer amounts (denominator 1: nearly every real quantity) take exact int arithmetic; the
    # results are the same values as the Fraction operations give.

    def value(self) -> int:
        """The value rounded up to an integer (upstream ``Value()``)."""
        amount = self.amount
        return amount.numerator if amount.denominator == 1 else math.ceil(amount)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (upstream ``MilliValue()``)."""
        amount = self.amount
        return amount.numerator * 1000 if amount.denominator == 1 else math.ceil(amount * 1000)

    def is_zero(self) -> bool:
        return not self.amount.numerator

    def __add__(self, other: Quantity) -> Quantity:
        a, b = self.amount, other.amount
        if a.denominator == 1 and b.denominator == 1:
            return _from_int(a.numerator + b.numerator, self.binary and other.binary)
        return Quantity(a + b, self.binary and other.binary)

    def __sub__(self, other: Quantity) -> Quantity:
        a, b = self.amount, other.amount
        if a.denominator == 1 and b.denominator == 1:
            return _from_int(a.numerator - b.numerator, self.binary and other.binary)
        return Quantity(a - b, self.binary and other.binary)

    def __lt__(self, other: Quantity) -> bool:
        return self.amount < other.amount

    def __le__(self, other: Quantity) -> bool:
        return self.amount <= other.amount

    def __str__(self) -> str:
        return format_quantity(self.amount, binary=self.binary)

    def __repr__(self) -> str:
        return f"Quantity({format_quantity(self.amount, binary=self.binary)!r})"

    @staticmethod
    def from_int(value: int, *, binary: bool = False) -> Quantity:
        return _from_int(value, binary)

    @staticmethod
    def from_milli(milli: int) -> Quantity:
        return Quantity(Fraction(milli, 1000))


ZERO = Quantity(Fraction(0))


@lru_cache(maxsize=65536)
def _from_int(value: int, binary: bool) -> Quantity:
    # quantities are immutable: sharing instances of the many repeated counts and sizes is safe
    return Quantity(Fraction(value), binary)


def parse_quantity(text: object) -> Quantity:
    """Parse a quantity string (ints are accepted as plain numbers); raise :class:`QuantityError`.

    Bounded as the API server bounds quantities (:mod:`numaplane.limits`): at most
    ``MAX_QUANTITY_CHARS`` characters and an exponent of at most ``MAX_QUANTITY_EXPONENT`` (else a
    :class:`QuantityError`), and the magnitude capped to int64 (2^63-1) as upstream caps it. Any other
    value (a list, ``None``, a bool) is a :class:`QuantityError` too.
    """
    if isinstance(text, bool):
        raise QuantityError(text, "a boolean is not a quantity")
    if isinstance(text, int):
        return _checked(text, Quantity(Fraction(text)))
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(text, "not a finite number")
        return _checked(text, Quantity(Fraction(str(text))))
    if not isinstance(text, str):
        raise QuantityError(_short(text), f"expected a string, got {type(text).__name__}")
    if len(text) > MAX_QUANTITY_CHARS:
        raise QuantityError(_short(text), f"longer than {MAX_QUANTITY_CHARS} characters")
    return _parse_text(text)


def _short(value: object) -> object:
    """``value`` for an error message: long texts are cut (a message must stay small)."""
    if isinstance(value, str) and len(value) > MAX_QUANTITY_CHARS:
        return value[:MAX_QUANTITY_CHARS] + "..."
    if not isinstance(value, (str, int, float)):
        return type(value).__name__
    return value


def _checked(text: object, quantity: Quantity) -> Quantity:
    """``quantity`` capped to the int64 range, as the API server caps it ("no quantity may represent a
    number greater than 2^63-1 in magnitude ... larger numbers will be capped")."""
    if quantity.amount > MAX_QUANTITY_VALUE:
        return Quantity(Fraction(MAX_QUANTITY_VALUE), quantity.binary)
    if quantity.amount < -MAX_QUANTITY_VALUE:
        return Quantity(Fraction(-MAX_QUANTITY_VALUE), quantity.binary)
    return quantity


@lru_cache(maxsize=8192)
def _parse_text(text: str) -> Quantity:
    if text == "":
        raise QuantityError(text, "empty string")
    match = _SYNTAX.match(text)
    if match is None:
        raise QuantityError(
            text, "expected <number><suffix>, suffix one of Ki Mi Gi Ti Pi Ei n u m k M G T P E or e<exp>"
        )
    number = Fraction(match["num"])
    if match["sign"] == "-":
        number = -number
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return _checked(text, Quantity(number * _BINARY[suffix], binary=True))
    if suffix in _DECIMAL_EXP:
        exponent = _DECIMAL_EXP[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > MAX_QUANTITY_EXPONENT:
            raise QuantityError(text, f"exponent {exponent} out of range")
    return _checked(text, Quantity(number * Fraction(10) ** exponent))


def format_quantity(amount: Fraction | int, *, binary: bool = False) -> str:
    """Canonical text of a value (see module docstring)."""
    return _format(Fraction(amount), binary)


@lru_cache(maxsize=16384)
def _format(amount: Fraction, binary: bool) -> str:
    # a pure function of the value: memoised (nodes publish the same few quantities again and again)
    if amount == 0:
        return "0"
    sign = "-" if amount < 0 else ""
    magnitude = -amount if amount < 0 else amount
    if binary and magnitude.denominator == 1:
        whole = magnitude.numerator
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            factor = _BINARY[suffix]
            if whole >= factor and whole % factor == 0:
                return f"{sign}{whole // factor}{suffix}"
        if whole < 1024:
            return f"{sign}{whole}"
    # decimal SI: the largest power of 1000 keeping an integer mantissa; fractions below 1n round up
    for suffix, exponent in (
        ("E", 18),
        ("P", 15),
        ("T", 12),
        ("G", 9),
        ("M", 6),
        ("k", 3),
        ("", 0),
        ("m", -3),
        ("u", -6),
    ):
        mantissa = magnitude / Fraction(10) ** exponent
        if mantissa.denominator == 1:
            return f"{sign}{mantissa.numerator}{suffix}"
    nano = math.ceil(magnitude * 10**9)
    return f"{sign}{nano}n"

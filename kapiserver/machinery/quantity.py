"""Resource quantities ("500m", "1Gi", "2e3") as upstream's ``resource.Quantity`` reads and prints them.

:func:`parse_quantity` follows ``ParseQuantity``: the same accepted syntax and
errors, rounding up to the nano unit, binary values capped at 2^63-1, and
the original text kept when upstream keeps it.  :meth:`Quantity.canonical`
is ``Quantity.String()``: "1000m" prints "1", "1.5" prints "1500m", "1024Mi"
prints "1Gi".  Values are exact decimals (``decimal.Decimal``) so an exponent
like ``1e999999999`` costs nothing: no arithmetic here expands it.

:func:`parse` keeps the older interface (a ``Fraction``, None when not a
quantity or too large to compute with) for pod QoS and CEL's quantity().
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from fractions import Fraction

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NUMERIC_ERROR = "unable to parse numeric part of quantity"
SUFFIX_ERROR = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {v: k for k, v in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = set("eEinumkKMGTP")
_MAX_INT64 = 2 ** 63 - 1
_MAX_INT64_FACTORS = 18
# a context in which every operation used here is exact
_CTX = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                       rounding=decimal.ROUND_UP, traps=[decimal.InvalidOperation])
_NANO = decimal.Decimal("1e-9")
_ZERO = decimal.Decimal(0)


class QuantityError(ValueError):
    """The text is not a quantity; ``str()`` is upstream's error message."""


@dataclass(frozen=True)
class Quantity:
    value: decimal.Decimal
    format: str = DECIMAL_SI
    text: str = ""  # the original text, when upstream keeps it (its cached string)
    # (value, scale) of the int64Amount upstream's fast path stores; None when it stores an inf.Dec
    amount: Optional[tuple[int, int]] = None

    # ------------------------------------------------------------ comparisons

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_zero(self) -> bool:
        return self.value == 0

    def cmp(self, other: "Quantity") -> int:
        return _CTX.compare(self.value, other.value).__int__()

    def __lt__(self, other: "Quantity") -> bool:
        return self.cmp(other) < 0

    def __gt__(self, other: "Quantity") -> bool:
        return self.cmp(other) > 0

    def __le__(self, other: "Quantity") -> bool:
        return self.cmp(other) <= 0

    def __ge__(self, other: "Quantity") -> bool:
        return self.cmp(other) >= 0

    def equals(self, other: "Quantity") -> bool:
        return self.cmp(other) == 0

    # ------------------------------------------------------------ integer views

    def scaled_value(self, scale: int) -> int:
        """The value in units of 10^scale, rounded away from zero (upstream's ScaledValue).

        Values far outside int64 come back as ±(2^63-1)·10 so that sign and
        "is it a multiple" tests stay meaningful without huge arithmetic.
        """
        if self.value == 0:
            return 0
        exponent = self.value.adjusted() - scale
        if exponent > 30:
            return (_MAX_INT64 * 10) * self.sign()
        shifted = _CTX.scaleb(self.value, -scale)
        integral = shifted.to_integral_value(rounding=decimal.ROUND_UP, context=_CTX)
        return int(integral)

    def int_value(self) -> int:
        """upstream's Value()."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        return self.scaled_value(-3)

    def is_integer(self) -> bool:
        """MilliValue() % 1000 == 0 (upstream's integer-resource test)."""
        if self.value == 0 or self.value.adjusted() > 30:
            return True
        return self.milli_value() % 1000 == 0

    def to_fraction(self) -> Optional[Fraction]:
        """The exact value, or None when its exponent is too large to compute with."""
        from fractions import Fraction  # (with the first quantity compared or computed with: not at start)

        if self.value != 0 and abs(self.value.adjusted()) > 400:
            return None
        return Fraction(self.value)

    # ------------------------------------------------------------ printing

    def canonical(self) -> str:
        """upstream's Quantity.String()."""
        if self.text:
            return self.text
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI:
            if -1024 < self.value < 1024:
                fmt = DECIMAL_SI
            elif self.value != self.value.to_integral_value(context=_CTX):
                fmt = DECIMAL_SI
        if fmt == BINARY_SI:
            number, power = _base1024(int(self.value))
            return str(number) + _BINARY_BY_EXPONENT.get(power * 10, "")
        digits, exponent = _canonical_decimal(self.value)
        if fmt == DECIMAL_EXPONENT:
            return digits + (f"e{exponent}" if exponent else "")
        # upstream prints no suffix when the exponent has none (e.g. 1000E)
        return digits + _DECIMAL_BY_EXPONENT.get(exponent, "")

    def __str__(self) -> str:
        return self.canonical()


def _canonical_decimal(value: decimal.Decimal) -> tuple[str, int]:
    """(mantissa text, exponent) with the exponent a multiple of 3, the mantissa an integer."""
    sign, digits, exponent = value.normalize(_CTX).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    extra = exponent % 3
    if extra:
        text += "0" * extra
        exponent -= extra
    return ("-" if sign else "") + text, exponent


def _base1024(value: int) -> tuple[int, int]:
    negative = value < 0
    value = -value if negative else value
    times = 0
    while value >= 1024 and value % 1024 == 0:
        value //= 1024
        times += 1
    return (-value if negative else value), times


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """upstream's parseQuantityString: (positive, value, numerator, denominator, suffix)."""
    positive = True
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and "0" <= text[pos] <= "9":
        pos += 1
    num = text[start:pos]
    if pos >= end:
        return positive, text, num or "0", "", ""
    num = num or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and "0" <= text[pos] <= "9":
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and "0" <= text[pos] <= "9":
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_ERROR)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix; QuantityError when it is none."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in "+-" else digits
        if not body or not body.isdigit():
            raise QuantityError(SUFFIX_ERROR)
        parsed = int(digits)
        if not -2 ** 63 <= parsed < 2 ** 63:
            raise QuantityError(SUFFIX_ERROR)
        wrapped = (parsed + 2 ** 31) % 2 ** 32 - 2 ** 31  # Go's int32(parsed)
        return 10, wrapped, DECIMAL_EXPONENT
    raise QuantityError(SUFFIX_ERROR)


def parse_quantity(text: str) -> Quantity:
    """upstream's ParseQuantity; raises QuantityError with its message."""
    if not text:
        raise QuantityError(FORMAT_ERROR)
    if text == "0":
        return Quantity(_ZERO, DECIMAL_SI, "0", (0, 0))
    positive, value_text, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    fast = _fast_path(text, positive, num, denom, exponent, fmt)
    try:
        number = _CTX.create_decimal(value_text.rstrip(".") if value_text.rstrip(".") not in ("", "+", "-")
                                     else "0")
    except decimal.InvalidOperation:
        raise QuantityError(NUMERIC_ERROR) from None
    if not positive:
        number = abs(number)
    magnitude = abs(number)
    if base == 10:
        magnitude = _CTX.scaleb(magnitude, exponent)
    else:
        magnitude = _CTX.multiply(magnitude, decimal.Decimal(2 ** exponent))
    if magnitude != 0 and magnitude.as_tuple().exponent < -9:  # type: ignore[operator]
        magnitude = magnitude.quantize(_NANO, rounding=decimal.ROUND_UP, context=_CTX)
    if fmt == BINARY_SI:
        if magnitude > _MAX_INT64:
            magnitude = decimal.Decimal(_MAX_INT64)
        if 0 < magnitude < 1:
            fmt = DECIMAL_SI
    value = magnitude if positive else -magnitude
    if fast is not None:
        return Quantity(value, fmt, fast[2], (fast[0], fast[1]))
    return Quantity(value, fmt)


def _fast_path(text: str, positive: bool, num: str, denom: str, exponent: int,
               fmt: str) -> Optional[tuple[int, int, str]]:
    """What upstream's fast path stores, when it applies: the int64Amount's value and scale, and the
    string it keeps to print back as given ("" when it keeps none)."""
    if fmt == BINARY_SI:
        if not (exponent >= 0 and not denom):
            return None
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        scale = 0
    else:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
        scale = exponent
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < -9:
        return None
    shifted = num + denom
    value = int(shifted)
    if value > _MAX_INT64:
        return None
    mantissa = 1 << exponent if fmt == BINARY_SI else 1
    result = value * mantissa
    if result > _MAX_INT64:
        return None
    if not positive:
        result = -result
    if fmt == BINARY_SI:
        kept = text if exponent % 10 == 0 and (value & 0x07) != 0 else ""
    else:
        kept = text if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0" else ""
    return result, scale, kept


def quantity_of(value: Any) -> Optional[Quantity]:
    """A JSON value (string or number) as a Quantity, None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        value = str(value)
    elif isinstance(value, float):
        value = repr(value) if value == value and value not in (float("inf"), float("-inf")) else ""
    if not isinstance(value, str):
        return None
    try:
        return parse_quantity(value.strip())
    except QuantityError:
        return None


def canonical(value: Any) -> Any:
    """The canonical text of a quantity value; anything else unchanged."""
    q = quantity_of(value)
    return value if q is None else q.canonical()


def parse(value: Any) -> Optional[Fraction]:
    """The exact value of a quantity, None when it is not one (or too large to compute with)."""
    q = quantity_of(value)
    return None if q is None else q.to_fraction()

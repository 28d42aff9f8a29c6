"""Resource quantities ("500m", "1Gi", "2e3") as exact numbers.

Pod validation compares requests with limits; CEL's quantity() library
(apiextensions/cel/library.py) computes with them.  Kept free of heavy
imports: the CEL runtime is loaded lazily and pod validation must not pull
it in.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Optional

_SUFFIXES = {
    "Ki": Fraction(2 ** 10), "Mi": Fraction(2 ** 20), "Gi": Fraction(2 ** 30), "Ti": Fraction(2 ** 40),
    "Pi": Fraction(2 ** 50), "Ei": Fraction(2 ** 60),
    "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10 ** 3), "M": Fraction(10 ** 6), "G": Fraction(10 ** 9), "T": Fraction(10 ** 12),
    "P": Fraction(10 ** 15), "E": Fraction(10 ** 18),
}
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)")


def parse(value: Any) -> Optional[Fraction]:
    """The value of a quantity (a string or a JSON number), None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Fraction(value)
    if not isinstance(value, str):
        return None
    m = _QUANTITY.fullmatch(value.strip())
    if not m:
        return None
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIXES[m.group(3) or ""]

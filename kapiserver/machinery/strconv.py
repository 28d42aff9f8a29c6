"""Go's ``strconv`` parsing of query parameters and flags, with Go's error messages.

Upstream decodes connect options (``follow=true``, ``tailLines=10``) with
``strconv.ParseBool`` and ``ParseInt``; a value they refuse is a 400 whose
message is Go's error text, so the same text is produced here.
"""
from __future__ import annotations

import re

from kapiserver.machinery import gorepr

TRUE_VALUES = ("1", "t", "T", "true", "TRUE", "True")
FALSE_VALUES = ("0", "f", "F", "false", "FALSE", "False")


def parse_bool(value: str) -> bool:
    """``strconv.ParseBool``; ValueError with Go's message for anything else."""
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise ValueError(f"strconv.ParseBool: parsing {gorepr.quote(value)}: invalid syntax")


_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_int(value: str, bits: int = 64) -> int:
    """``strconv.ParseInt(value, 10, bits)``: an optional sign and ASCII digits, in range (Python's
    int() would also take spaces, underscores and non-ASCII digits)."""
    if _DECIMAL.fullmatch(value) is None:
        raise ValueError(f"strconv.ParseInt: parsing {gorepr.quote(value)}: invalid syntax")
    number = int(value)
    if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
        raise ValueError(f"strconv.ParseInt: parsing {gorepr.quote(value)}: value out of range")
    return number


_UNSIGNED = re.compile(r"[0-9]+")


def parse_uint(value: str, bits: int = 64) -> int:
    """``strconv.ParseUint(value, 10, bits)``: ASCII digits only, no sign, in range."""
    if _UNSIGNED.fullmatch(value) is None:
        raise ValueError(f"strconv.ParseUint: parsing {gorepr.quote(value)}: invalid syntax")
    number = int(value)
    if number >= 1 << bits:
        raise ValueError(f"strconv.ParseUint: parsing {gorepr.quote(value)}: value out of range")
    return number

"""String formats a CRD schema may use, checked the way kube-openapi's strfmt does.

Only the formats upstream keeps for CRDs are checked; any other format is
ignored (upstream strips unsupported formats before validating).
"""
from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import re
from typing import Callable

_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}"
    r"[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$".replace(r"\p{S}", "").replace(r"\p{L}", ""))
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)
_UUID3 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)
_UUID4 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I)
_UUID5 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I)
_MAC = re.compile(r"^([0-9A-Fa-f]{2}([:-]))([0-9A-Fa-f]{2}\2){4}[0-9A-Fa-f]{2}$"
                  r"|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
                       r"\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$")
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$")
_DURATION = re.compile(r"^(-?(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w))+$|^0$")
_URI_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _ipv4(v: str) -> bool:
    try:
        ipaddress.IPv4Address(v)
        return True
    except ValueError:
        return False


def _ipv6(v: str) -> bool:
    try:
        ipaddress.IPv6Address(v)
        return True
    except ValueError:
        return False


def _cidr(v: str) -> bool:
    if "/" not in v:
        return False
    try:
        ipaddress.ip_network(v, strict=False)
        return True
    except ValueError:
        return False


def _byte(v: str) -> bool:
    try:
        base64.b64decode(v, validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


def _date(v: str) -> bool:
    try:
        datetime.date.fromisoformat(v)
        return len(v) == 10
    except ValueError:
        return False


def _date_time(v: str) -> bool:
    if not _DATE_TIME.match(v):
        return False
    try:
        datetime.datetime.fromisoformat(v[:19].replace("t", "T").replace(" ", "T"))
        return True
    except ValueError:
        return False


def _uri(v: str) -> bool:
    return bool(_URI_SCHEME.match(v)) and " " not in v


def _isbn10(v: str) -> bool:
    d = v.replace("-", "").replace(" ", "")
    if not re.match(r"^\d{9}[\dX]$", d):
        return False
    total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(d))
    return total % 11 == 0


def _isbn13(v: str) -> bool:
    d = v.replace("-", "").replace(" ", "")
    if not re.match(r"^\d{13}$", d):
        return False
    return sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(d)) % 10 == 0


def _creditcard(v: str) -> bool:
    d = re.sub(r"[ -]", "", v)
    if not re.match(r"^\d{12,19}$", d):
        return False
    total = 0
    for i, c in enumerate(reversed(d)):
        n = int(c)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _re(pattern: re.Pattern) -> Callable[[str], bool]:
    return lambda v: bool(pattern.match(v))


CHECKERS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": _re(_BSON),
    "uri": _uri,
    "email": _re(_EMAIL),
    "hostname": lambda v: len(v) <= 255 and bool(_HOSTNAME.match(v)),
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "cidr": _cidr,
    "mac": _re(_MAC),
    "uuid": _re(_UUID),
    "uuid3": _re(_UUID3),
    "uuid4": _re(_UUID4),
    "uuid5": _re(_UUID5),
    "isbn": lambda v: _isbn10(v) or _isbn13(v),
    "isbn10": _isbn10,
    "isbn13": _isbn13,
    "creditcard": _creditcard,
    "ssn": _re(_SSN),
    "hexcolor": _re(_HEXCOLOR),
    "rgbcolor": _re(_RGBCOLOR),
    "byte": _byte,
    "password": lambda v: True,
    "date": _date,
    "duration": _re(_DURATION),
    "datetime": _date_time,
    "date-time": _date_time,
}


def check(fmt: str, value: str) -> bool:
    """True when ``value`` is valid for ``fmt`` (unknown formats always pass)."""
    checker = CHECKERS.get(fmt)
    return True if checker is None else checker(value)

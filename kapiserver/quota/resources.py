"""Resource lists (``{"pods": "2", "requests.cpu": "500m"}``) and upstream's quota arithmetic on them.

A ``ResourceList`` here maps a resource name to a :class:`Quantity`; the
functions mirror ``k8s.io/apiserver/pkg/quota/v1``'s helpers (Add,
SubtractWithNonNegativeResult, Mask, LessThanOrEqual, Equals...), including
how a sum keeps its format (a zero takes the other operand's), so the
values written to ``status.used`` and printed in errors read as upstream's.
"""
from __future__ import annotations

import decimal
from typing import Any, Iterable, Mapping

from kapiserver.machinery.quantity import DECIMAL_SI, Quantity, quantity_of

ResourceList = dict[str, Quantity]
ZERO = Quantity(decimal.Decimal(0), DECIMAL_SI)


def quantity(n: int) -> Quantity:
    return Quantity(decimal.Decimal(n), DECIMAL_SI)


def parse_list(values: Any) -> ResourceList:
    """A JSON ResourceList as Quantities (values that are not quantities are left out)."""
    out: ResourceList = {}
    if isinstance(values, dict):
        for name, value in values.items():
            q = quantity_of(value)
            if q is not None:
                out[str(name)] = q
    return out


def to_json(values: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: values[name].canonical() for name in sorted(values)}


def _plus(x: Quantity, y: Quantity, sign: int = 1) -> Quantity:
    fmt = y.format if x.is_zero() else x.format
    return Quantity(x.value + sign * y.value, fmt)


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    result = dict(a)
    for name, value in b.items():
        result[name] = _plus(result[name], value) if name in result else value
    return result


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    result = dict(a)
    for name, value in b.items():
        result[name] = _plus(result.get(name, ZERO), value, -1)
    return result


def subtract_non_negative(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """upstream's SubtractWithNonNegativeResult: a - b, negative results (and names only in b) zero."""
    result: ResourceList = {}
    for name, value in a.items():
        diff = _plus(value, b[name], -1) if name in b else value
        result[name] = diff if diff.sign() > 0 else ZERO
    for name in b:
        result.setdefault(name, ZERO)
    return result


def maximum(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    result = dict(a)
    for name, value in b.items():
        if name not in result or value > result[name]:
            result[name] = value
    return result


def mask(values: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    keep = set(names)
    return {name: value for name, value in values.items() if name in keep}


def remove_zeros(values: Mapping[str, Quantity]) -> ResourceList:
    return {name: value for name, value in values.items() if not value.is_zero()}


def negative(values: Mapping[str, Quantity]) -> list[str]:
    return [name for name, value in values.items() if value.sign() < 0]


def equals(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    return set(a) == set(b) and all(a[name].equals(b[name]) for name in a)


def less_than_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> tuple[bool, list[str]]:
    """Whether every value of ``a`` named in ``b`` is at most ``b``'s, and the names that are over."""
    exceeded = sorted(name for name, limit in b.items() if name in a and a[name] > limit)
    return not exceeded, exceeded


def pretty(values: Mapping[str, Quantity]) -> str:
    """upstream's prettyPrint: ``cpu=1,pods=2`` in name order."""
    return ",".join(f"{name}={values[name].canonical()}" for name in sorted(values))

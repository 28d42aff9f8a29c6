"""Field paths (upstream's field.Path) and Go-style value rendering shared by the schema walkers:
the CRD schema checks, pruning and CEL rules (apiextensions) and fieldValidation (machinery)."""
from __future__ import annotations

import math
from typing import Any


def child(path: str, key: str) -> str:
    """``spec`` + ``replicas`` -> ``spec.replicas`` (field.Path.Child)."""
    return f"{path}.{key}" if path else key


def index(path: str, i: int) -> str:
    """``spec.items`` + 3 -> ``spec.items[3]`` (field.Path.Index)."""
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    """``properties`` + ``spec`` -> ``properties[spec]`` (field.Path.Key)."""
    return f"{path}[{k}]"


def go_number(value: Any) -> str:
    """A number as Go's ``%v`` prints a float64 (``1``, ``1.5``, ``1e+21``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exp = text.split("e")
        sign = "-" if exp.startswith("-") else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mantissa}e{sign}{digits}"
    return text


def json_type(value: Any) -> str:
    """The OpenAPI type name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def go_value(value: Any) -> str:
    """A decoded JSON value as Go's ``%#v`` shows it in Duplicate-value errors."""
    if isinstance(value, dict):
        inner = ", ".join(f'"{k}":{go_value(value[k])}' for k in sorted(value))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_value(v) for v in value) + "}"
    if isinstance(value, str):
        import json
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "<nil>"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return go_number(value)
    return "true" if value else "false"

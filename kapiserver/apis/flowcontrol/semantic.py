"""Upstream's ``apiequality.Semantic.DeepEqual`` on JSON values: Go's zero values
(absent, null, "", 0, false, empty lists and maps) are all the same."""
from __future__ import annotations

from typing import Any


def without_zero_values(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = without_zero_values(item)
            if item not in (None, "", 0, False, [], {}) or item is True:
                out[key] = item
        return out
    if isinstance(value, list):
        return [without_zero_values(v) for v in value]
    return value


def semantically_equal(a: Any, b: Any) -> bool:
    return without_zero_values(a) == without_zero_values(b)

"""Typed reads of decoded JSON values: a field that is absent or of another type reads as empty.

Objects arrive as plain dicts whose members may hold anything a client sent, so a reader checks the
type before using a member; these helpers do that check once and tell the type checker its result.
"""
from __future__ import annotations

from typing import Any


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def go_json_type(value: Any) -> str:
    """The word Go's encoding/json names a JSON value's type with in its UnmarshalTypeError
    (``json: cannot unmarshal array into ...``)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"

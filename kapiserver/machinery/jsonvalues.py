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

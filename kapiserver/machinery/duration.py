"""Go's duration syntax, as clients send it (``?timeout=30s``, ``1m0s``, ``500ms``)."""
from __future__ import annotations

from typing import Optional

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_TWO_LETTER = ("ms", "us", "µs", "ns")


def parse_go_duration(text: str) -> Optional[float]:
    """Seconds, or None when ``text`` is not a Go duration."""
    total, number = 0.0, ""
    i = 0
    if not text:
        return None
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = text[i:i + 2] if text[i:i + 2] in _TWO_LETTER else ch
        if unit not in _UNITS or not number:
            return None
        try:
            total += float(number) * _UNITS[unit]
        except ValueError:  # "1.2.3s"
            return None
        number = ""
        i += len(unit)
    if number:
        return None
    return total


def format_go_duration(seconds: float) -> str:
    """``seconds`` as the short Go duration webhook clients put in ``?timeout=`` (``30s``, ``1500ms``)."""
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{int(seconds * 1000)}ms"

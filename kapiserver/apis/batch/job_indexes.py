"""Job index lists (``1,3-5,7``) as upstream parses them (``validateIndexesFormat``):
a Job's ``spec.successPolicy`` names them, its ``status`` counts completed and failed ones."""
from __future__ import annotations

import re
from typing import Optional

from kapiserver.machinery import gorepr


def parse_interval(text: str, completions: int) -> tuple[int, int, str]:
    """One interval (``3`` or ``3-5``): (first, last, the problem or "")."""
    parts = text.split("-")
    if len(parts) > 2:
        return 0, 0, (f"the fragment {gorepr.quote(text)} violates the requirement that an index interval can have "
                      "at most two parts separated by '-'")
    numbers = []
    for part in parts:
        if not re.fullmatch(r"[+-]?[0-9]+", part):
            return 0, 0, f"cannot convert string to integer for index: {gorepr.quote(part)}"
        number = int(part)
        if number >= completions:
            return 0, 0, f"too large index: {gorepr.quote(part)}"
        numbers.append(number)
    if len(numbers) == 2 and numbers[0] >= numbers[1]:
        return 0, 0, f"non-increasing order, previous: {numbers[0]}, current: {numbers[1]}"
    return numbers[0], numbers[-1], ""


def parse_indexes(text: str, completions: int) -> tuple[int, str]:
    """upstream's validateIndexesFormat: (how many indexes, the problem or "")."""
    if not text:
        return 0, ""
    last: Optional[int] = None
    total = 0
    for interval in text.split(","):
        low, high, problem = parse_interval(interval, completions)
        if problem:
            return 0, problem
        if last is not None and last >= low:
            return 0, f"non-increasing order, previous: {last}, current: {low}"
        total += high - low + 1
        last = high
    return total, ""

"""The limits every decoder keeps, stated once (docs/architecture.md lists them).

Upstream's JSON decoder refuses more than 10,000 levels of nesting.  The
code paths of a Python server that walk objects (``copy.deepcopy``,
structural validation, YAML output) recurse in Python, CPython stops at
1,000 frames, and orjson refuses to encode more than 254 levels; so objects
and arrays nest at most :data:`MAX_DEPTH` levels here, which keeps every
recursive walk over a decoded body far from those ceilings (a watch event or
a list adds two levels around an object, a Table three).
"""
from __future__ import annotations

from typing import Any

from kapiserver.machinery import errors

# Levels of objects/arrays in a decoded body, patch, or stored object.
MAX_DEPTH = 100

# YAML aliases may add at most this much to a document (weights: one per node
# plus the length of each scalar), and at most ALIAS_EXPANSION_RATIO times the
# document's own size when that is more: a 400-byte alias bomb cannot become a
# 100 MB object, and the request body limit cannot be bypassed with aliases.
ALIAS_EXPANSION_MIN = 1 << 20
ALIAS_EXPANSION_RATIO = 4

# A CEL expression may carry at most this many operators and calls (cel-rust
# recurses over the expression tree; tens of thousands of chained ``+``
# overflow its stack), and at most MAX_CEL_RULE_LENGTH characters (as cel-go).
MAX_CEL_OPERATORS = 1000
MAX_CEL_RULE_LENGTH = 100_000


class TooDeep(ValueError):
    """A value nests deeper than :data:`MAX_DEPTH`."""


def depth_message(limit: int = MAX_DEPTH) -> str:
    return f"exceeded max depth of {limit} levels of nesting"


def check_depth(value: Any, limit: int = MAX_DEPTH, start: int = 0) -> None:
    """Raise :class:`TooDeep` when ``value`` nests more than ``limit`` levels (iterative)."""
    if not isinstance(value, (dict, list)):
        return
    stack: list[tuple[Any, int]] = [(value, start + 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise TooDeep(depth_message(limit))
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


def check_body_depth(value: Any, what: str = "body") -> None:
    """:func:`check_depth` as a 400 BadRequest."""
    try:
        check_depth(value)
    except TooDeep as e:
        raise errors.bad_request(f"the {what} of the request {e}") from None

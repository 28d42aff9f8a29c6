"""A structural bound on what a CEL rule may cost, since the engine has no cost limit.

cel-rust evaluates holding the GIL and cannot be interrupted, so a rule that
nests comprehensions over large collections would stall the whole server.
Cost is bounded the way upstream words it, from the rule's shape: its number
of operations and how deeply its comprehensions (all, exists, exists_one,
map, filter) nest, multiplied by collection sizes: at compile time the
schema's maxItems/maxProperties (or what fits in a 3 MiB request), at run
time the actual sizes.
"""
from __future__ import annotations

import re
from typing import Any

# Upstream's celconfig limits.
PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024

_MACROS = frozenset(("all", "exists", "exists_one", "map", "filter"))
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def comprehension_depth(rule: str) -> int:
    """How deeply the rule's comprehension macros nest (0: none)."""
    stack: list[bool] = []
    depth = best = 0
    i, n = 0, len(rule)
    while i < n:
        c = rule[i]
        if c in "'\"":
            quote = rule[i:i + 3] if rule[i:i + 3] in ("'''", '"""') else c
            i += len(quote)
            while i < n and rule[i:i + len(quote)] != quote:
                i += 2 if rule[i] == "\\" else 1
            i += len(quote)
            continue
        m = _IDENT.match(rule, i)
        if m:
            j = m.end()
            while j < n and rule[j].isspace():
                j += 1
            is_macro = m.group(0) in _MACROS and j < n and rule[j] == "(" and i > 0 and rule[i - 1] == "."
            if j < n and rule[j] == "(":
                stack.append(is_macro)
                if is_macro:
                    depth += 1
                    best = max(best, depth)
                i = j + 1
            else:
                i = m.end()
            continue
        if c == "(":
            stack.append(False)
        elif c == ")" and stack:
            if stack.pop():
                depth -= 1
        i += 1
    return best


def max_cardinality(schema: dict) -> int:
    """The largest collection the schema subtree can hold (bounded by maxItems/maxProperties or request size)."""
    best = 1
    typ = schema.get("type")
    if typ == "array":
        best = schema.get("maxItems", MAX_REQUEST_SIZE_BYTES // 2)
    elif typ == "object" and isinstance(schema.get("additionalProperties"), dict):
        best = schema.get("maxProperties", MAX_REQUEST_SIZE_BYTES // 4)
    elif schema.get("x-kubernetes-preserve-unknown-fields"):
        best = MAX_REQUEST_SIZE_BYTES // 2
    children = list((schema.get("properties") or {}).values())
    for extra in (schema.get("items"), schema.get("additionalProperties")):
        if isinstance(extra, dict):
            children.append(extra)
    for sub in children:
        best = max(best, max_cardinality(sub))
    return best


def max_actual_size(value: Any, limit: int) -> int:
    """The largest list/map inside ``value`` (stops counting past ``limit``)."""
    best = 1
    stack = [value]
    seen = 0
    while stack and best <= limit and seen <= limit:
        v = stack.pop()
        seen += 1
        if isinstance(v, (list, dict)):
            best = max(best, len(v))
            stack.extend(v.values() if isinstance(v, dict) else v)
    return best


def estimate(ops: int, depth: int, cardinality: int) -> int:
    """Cost of a rule with ``ops`` operations, ``depth`` nested comprehensions over ``cardinality`` items."""
    return max(1, ops) * (max(1, cardinality) + 1) ** depth if depth else max(1, ops)

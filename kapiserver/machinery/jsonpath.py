"""The subset of kubectl-style JSONPath used by CRD printer columns and scale paths.

Supported: ``.field`` steps (optionally wrapped in ``{}`` and/or starting
with ``$``), ``['name.with.dots']``, ``[n]`` (negative from the end),
``[a:b]`` slices, ``[*]`` / ``.*`` wildcards and filters
``[?(@.path OP literal)]`` or ``[?(@.path)]`` with ``== != < <= > >=``.
``evaluate`` returns every match (none when a field is missing), the way
kubectl prints columns with missing keys allowed.
"""
from __future__ import annotations

import json
import re
from typing import Any

from kapiserver.machinery import errors

_FILTER_RE = re.compile(r"^\?\(\s*@((?:\.[^\s=!<>]+|\[[^\]]*\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)$")
_NUMBER_RE = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")


class JSONPathError(ValueError):
    """The expression is not valid (callers validating CRDs turn it into a field error)."""


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if _NUMBER_RE.fullmatch(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    raise JSONPathError(f"unrecognized literal {text!r}")


def parse(path: str) -> list[tuple]:
    """The steps of a path expression; raises JSONPathError when it is not understood."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[tuple] = []
    i, n = 0, len(text)
    if n == 0:
        raise JSONPathError("empty path")
    while i < n:
        c = text[i]
        if c == ".":
            if text.startswith("..", i):
                raise JSONPathError("recursive descent is not supported")
            j = i + 1
            while j < n and text[j] not in ".[":
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                j += 1
            name = text[i + 1:j].replace("\\.", ".")
            if not name:
                raise JSONPathError(f"empty field name at {i} in {path!r}")
            steps.append(("wildcard",) if name == "*" else ("field", name))
            i = j
        elif c == "[":
            depth, j = 0, i
            quote = ""
            while j < n:
                ch = text[j]
                if quote:
                    if ch == quote:
                        quote = ""
                elif ch in "'\"":
                    quote = ch
                elif ch == "[":
                    depth += 1
                elif ch == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= n:
                raise JSONPathError(f"unterminated [ in {path!r}")
            steps.append(_bracket(text[i + 1:j].strip(), path))
            i = j + 1
        else:
            raise JSONPathError(f"unexpected {c!r} at {i} in {path!r}: paths start with '.'")
    return steps


def _bracket(inner: str, path: str) -> tuple:
    if inner == "*":
        return ("wildcard",)
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return ("field", inner[1:-1])
    if inner.startswith("?"):
        m = _FILTER_RE.match(inner)
        if not m:
            raise JSONPathError(f"invalid filter {inner!r} in {path!r}")
        sub = parse(m.group(1)) if m.group(1) else []
        if m.group(2):
            return ("filter", sub, m.group(2), _literal(m.group(3)))
        return ("filter", sub, None, None)
    if ":" in inner:
        parts = inner.split(":")
        if len(parts) > 3:
            raise JSONPathError(f"invalid slice {inner!r} in {path!r}")
        try:
            bounds = [int(p) if p.strip() else None for p in parts] + [None] * (3 - len(parts))
        except ValueError:
            raise JSONPathError(f"invalid slice {inner!r} in {path!r}") from None
        return ("slice", bounds[0], bounds[1], bounds[2])
    try:
        return ("index", int(inner))
    except ValueError:
        raise JSONPathError(f"invalid array index {inner!r} in {path!r}") from None


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "==":
        return left == right and isinstance(left, bool) == isinstance(right, bool)
    if op == "!=":
        return not _compare(left, "==", right)
    numeric = (int, float)
    if isinstance(left, numeric) and isinstance(right, numeric) and not isinstance(left, bool):
        pass
    elif not (isinstance(left, str) and isinstance(right, str)):
        return False
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def _walk(values: list, steps: list[tuple]) -> list:
    for step in steps:
        out: list = []
        kind = step[0]
        for value in values:
            if kind == "field":
                if isinstance(value, dict) and step[1] in value:
                    out.append(value[step[1]])
            elif kind == "index":
                if isinstance(value, list) and -len(value) <= step[1] < len(value):
                    out.append(value[step[1]])
            elif kind == "slice":
                if isinstance(value, list):
                    out.extend(value[step[1]:step[2]:step[3]])
            elif kind == "wildcard":
                if isinstance(value, list):
                    out.extend(value)
                elif isinstance(value, dict):
                    out.extend(value[k] for k in sorted(value))
            elif kind == "filter":
                _, sub, op, literal = step
                items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
                for item in items:
                    found = _walk([item], sub)
                    if op is None:
                        if found:
                            out.append(item)
                    elif any(_compare(f, op, literal) for f in found):
                        out.append(item)
        values = out
    return values


def evaluate(obj: Any, path: str) -> list:
    """Every value ``path`` selects in ``obj`` (an empty list when nothing matches)."""
    return _walk([obj], parse(path))


def format_value(value: Any) -> str:
    """A result as kubectl prints it in a column: strings bare, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def set_path(obj: dict, path: str, value: Any) -> None:
    """Set the value at a simple path (fields and indices), creating missing maps.

    Used for scale subresources (``.spec.replicas``); wildcards and filters
    are rejected with a 400 because they do not name one place.
    """
    try:
        steps = parse(path)
    except JSONPathError as e:
        raise errors.bad_request(f"invalid JSONPath {path!r}: {e}") from None
    if any(s[0] not in ("field", "index") for s in steps):
        raise errors.bad_request(f"invalid JSONPath {path!r}: only field names and indices can be set")
    node: Any = obj
    for step, following in zip(steps, [*steps[1:], None]):
        last = following is None
        if step[0] == "field":
            if not isinstance(node, dict):
                raise errors.bad_request(f"cannot set {path}: {step[1]!r} is not inside an object")
            if last:
                node[step[1]] = value
                return
            child = node.get(step[1])
            if not isinstance(child, (dict, list)):
                child = [] if following is not None and following[0] == "index" else {}
                node[step[1]] = child
            node = child
        else:
            if not isinstance(node, list) or not -len(node) <= step[1] < len(node):
                raise errors.bad_request(f"cannot set {path}: index {step[1]} is out of range")
            if last:
                node[step[1]] = value
                return
            node = node[step[1]]

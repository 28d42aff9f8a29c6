"""Values printed the way Go's fmt prints them in upstream's field errors.

Upstream's ``field.Invalid(path, value, detail)`` renders ``value`` with
``%q`` (strings), ``%v`` (numbers, booleans) or ``%#v`` (everything else:
slices, maps, structs).  Messages users and tools match on therefore carry
Go syntax such as ``[]string{"a", "b"}`` or ``v1.LabelSelector{...}``; the
helpers here produce that text from the JSON values this server holds.
A :class:`GoRepr` is text already rendered: :func:`kapiserver.machinery.errors.render_value`
prints it as is.
"""
from __future__ import annotations

import math
from typing import Any, Iterable


class GoRepr(str):
    """A value already rendered in Go syntax (printed verbatim in messages)."""


def quote(text: Any) -> str:
    """Go's ``strconv.Quote``: printable runes kept, the rest escaped.  Bytes (or text decoded
    with ``surrogateescape``) that are no UTF-8 are written ``\\x..``, as Go writes invalid bytes."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    out = ['"']
    for ch in "" if text is None else str(text):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is no UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ch == " " or (ch.isprintable() and not 0xD800 <= code <= 0xDFFF):
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def float_text(value: float) -> str:
    """Go's ``%v`` of a float64: strconv 'g' with the shortest digits (exponent form from 1e+06 on)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    # the shortest digits that round-trip, as repr() finds them
    shortest = repr(abs(value))
    digits_text, _, short_exp = shortest.partition("e")
    int_part, _, frac_part = digits_text.partition(".")
    exp10 = int(short_exp) if short_exp else 0
    raw = (int_part + frac_part)
    stripped = raw.lstrip("0")
    point = len(int_part) - (len(raw) - len(stripped)) + exp10  # decimal point position in `digits`
    digits = stripped.rstrip("0") or "0"
    exp = point - 1
    if exp < -4 or exp >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def int_text(value: Any) -> str:
    return str(int(value))


def scalar(value: Any) -> str:
    """``%v``/``%q`` of a JSON scalar as its Go field would print."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_text(value)
    if value is None:
        return "null"
    return quote(value)


def string_slice(values: Any, type_name: str = "string") -> GoRepr:
    """``[]string{"a", "b"}`` (``[]string(nil)`` for an absent slice)."""
    if values is None:
        return GoRepr(f"[]{type_name}(nil)")
    return GoRepr(f"[]{type_name}{{" + ", ".join(quote(v) for v in values) + "}")


def quoted_list(values: Any) -> str:
    """``%q`` of a ``[]string`` (as in ``fmt.Sprintf("valid values: %q", ...)``): ``["a" "b"]``."""
    return "[" + " ".join(quote(v) for v in values or ()) + "]"


def int_slice(values: Any, type_name: str = "int32") -> GoRepr:
    if values is None:
        return GoRepr(f"[]{type_name}(nil)")
    return GoRepr(f"[]{type_name}{{" + ", ".join(str(v) for v in values) + "}")


def string_map(value: Any, type_name: str = "map[string]string") -> GoRepr:
    """A ``map[string]string`` as ``%#v`` prints it (keys sorted, as Go's fmt sorts them)."""
    if not isinstance(value, dict):
        return GoRepr(f"{type_name}(nil)")
    body = ", ".join(f"{quote(k)}:{quote(v)}" for k, v in sorted(value.items()))
    return GoRepr(f"{type_name}{{{body}}}")


def pointer(value: Any, type_name: str) -> str:
    """A pointer field inside a ``%#v`` struct: Go prints the address, or ``(*T)(nil)``."""
    if value is None:
        return f"(*{type_name})(nil)"
    return f"(*{type_name})(0xc000000000)"


def struct(type_name: str, fields: Iterable[tuple[str, str]]) -> GoRepr:
    """``pkg.Type{A:..., B:...}`` from already rendered field values."""
    return GoRepr(type_name + "{" + ", ".join(f"{k}:{v}" for k, v in fields) + "}")


def label_selector(selector: Any, type_name: str = "v1.LabelSelector") -> GoRepr:
    """A ``metav1.LabelSelector`` as ``%#v`` prints it."""
    sel = selector if isinstance(selector, dict) else {}
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list):
        items = []
        for e in exprs:
            e = e if isinstance(e, dict) else {}
            items.append(struct("v1.LabelSelectorRequirement", (
                ("Key", quote(e.get("key"))), ("Operator", quote(e.get("operator"))),
                ("Values", string_slice(e.get("values"))))))
        expr_text = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        expr_text = "[]v1.LabelSelectorRequirement(nil)"
    return struct(type_name, (("MatchLabels", string_map(sel.get("matchLabels"))), ("MatchExpressions", expr_text)))

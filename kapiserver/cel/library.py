"""The Kubernetes CEL function library on top of the ``cel`` (cel-rust) package.

Registers cel-python's extended standard library (strings, lists, math,
sets, base64) and the Kubernetes additions CRD rules and admission
expressions use: list helpers
(``isSorted``, ``indexOf`` on lists...), regex ``find``/``findAll``,
``url()`` and its getters, ``quantity()``/``isQuantity()`` and their
comparisons, ``ip()``/``cidr()`` (network.py), ``'...'.format([...])`` and ``format.<name>().validate(s)``.

Quantities, URLs and formats are carried through CEL as small marker maps
because the engine cannot hold opaque Python values.

The engine itself (~6 MiB resident) is imported on first use, not with this
module: a server whose CRDs and admission policies use no CEL never loads it.
"""
from __future__ import annotations

import functools
import re
import urllib.parse
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable

from kapiserver.cel import network
from kapiserver.machinery import quantity, regex, validation

if TYPE_CHECKING:
    from kapiserver.machinery.cel_runtime import cel

_Q = "__kapiserver_quantity__"
_URL = "__kapiserver_url__"
_FMT = "__kapiserver_format__"

# ------------------------------------------------------------------ lists / strings


def _index_of(target: Any, item: Any, offset: int = 0) -> int:
    if isinstance(target, str):
        from kapiserver.machinery.cel_runtime import stdlib
        return stdlib.index_of(target, item, offset)
    for i, v in enumerate(target):
        if v == item and type(v) is type(item):
            return i
    return -1


def _last_index_of(target: Any, item: Any, offset: int | None = None) -> int:
    if isinstance(target, str):
        from kapiserver.machinery.cel_runtime import stdlib
        return stdlib.last_index_of(target, item, offset)
    for i in range(len(target) - 1, -1, -1):
        if target[i] == item and type(target[i]) is type(item):
            return i
    return -1


def _is_sorted(items: list) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _find(s: str, pattern: str) -> str:
    compiled = regex.compile_or_none(pattern)
    if compiled is None:
        raise ValueError(f"invalid regex: {pattern}")
    m = compiled.search(s)
    return m.group(0) if m else ""


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    compiled = regex.compile_or_none(pattern)
    if compiled is None:
        raise ValueError(f"invalid regex: {pattern}")
    found = [m.group(0) for m in compiled.finditer(s)]
    return found if limit < 0 else found[:limit]


def _matches(s: str, pattern: str) -> bool:
    """``matches(s, re)`` with RE2 semantics (the receiver form is cel-rust's own, also linear-time)."""
    try:
        return regex.search(pattern, s)
    except regex.RegexError as e:
        raise ValueError(f"invalid regex: {pattern}: {e}") from None


def _format(template: str, args: list) -> str:
    """cel-go's ``string.format``: %s %d %f %e %x %X %o %b with optional precision."""
    out, i, arg = [], 0, 0
    while i < len(template):
        c = template[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        m = re.match(r"%(\.\d+)?([sdfeExXob%])", template[i:])
        if not m:
            raise ValueError(f"could not parse formatting clause: {template[i:]}")
        i += m.end()
        verb, precision = m.group(2), m.group(1)
        if verb == "%":
            out.append("%")
            continue
        if arg >= len(args):
            raise ValueError(f"index {arg} out of range")
        value = args[arg]
        arg += 1
        if verb == "s":
            out.append(_to_string(value))
        elif verb == "d":
            out.append(str(int(value)))
        elif verb in "fe":
            out.append(("%" + (precision or ".6") + verb) % float(value))
        elif verb == "E":
            out.append(("%" + (precision or ".6") + "E") % float(value))
        elif verb in "xX":
            text = value.encode().hex() if isinstance(value, str) else format(int(value), "x")
            out.append(text.upper() if verb == "X" else text)
        elif verb == "o":
            out.append(format(int(value), "o"))
        elif verb == "b":
            out.append(format(int(value), "b"))
    return "".join(out)


def _to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_to_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_to_string(k)}:{_to_string(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    return str(value)


# ------------------------------------------------------------------ quantities

def parse_quantity(text: str) -> Fraction:
    """The exact value of a Kubernetes quantity string (ValueError if malformed)."""
    value = quantity.parse(text) if isinstance(text, str) else None
    if value is None:
        raise ValueError("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    return value


def _quantity(text: str) -> dict:
    parse_quantity(text)
    return {_Q: text}


def _qv(q: Any) -> Fraction:
    if isinstance(q, dict) and _Q in q:
        return parse_quantity(q[_Q])
    raise TypeError("no such overload")


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
        return True
    except ValueError:
        return False


def _q_add(a: Any, b: Any) -> dict:
    total = _qv(a) + (Fraction(b) if isinstance(b, int) else _qv(b))
    return {_Q: _fraction_text(total)}


def _q_sub(a: Any, b: Any) -> dict:
    total = _qv(a) - (Fraction(b) if isinstance(b, int) else _qv(b))
    return {_Q: _fraction_text(total)}


def _fraction_text(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    for suffix, scale in (("m", 1000), ("u", 10 ** 6), ("n", 10 ** 9)):
        scaled = value * scale
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return str(float(value))


def _as_integer(q: Any) -> int:
    value = _qv(q)
    if value.denominator != 1:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _cmp(a: Any, b: Any) -> int:
    x, y = _qv(a), _qv(b)
    return (x > y) - (x < y)


# ------------------------------------------------------------------ URLs


def _url(text: str) -> dict:
    parsed = urllib.parse.urlsplit(text)
    if not parsed.scheme and not text.startswith("/"):
        raise ValueError(f"URL is invalid: {text}")
    return {_URL: text}


def _is_url(text: str) -> bool:
    try:
        _url(text)
        return True
    except ValueError:
        return False


def _u(u: Any) -> urllib.parse.SplitResult:
    if isinstance(u, dict) and _URL in u:
        return urllib.parse.urlsplit(u[_URL])
    raise TypeError("no such overload")


def _host(u: Any) -> str:
    return _u(u).netloc.rsplit("@", 1)[-1]


def _hostname(u: Any) -> str:
    return _u(u).hostname or ""


def _port(u: Any) -> str:
    netloc = _host(u)
    if netloc.endswith("]"):
        return ""
    return netloc.rsplit(":", 1)[1] if ":" in netloc else ""


def _query(u: Any) -> dict:
    return {k: v for k, v in urllib.parse.parse_qs(_u(u).query, keep_blank_values=True).items()}


# ------------------------------------------------------------------ format library


def _format_checker(name: str, check: Callable[[str], list[str]]) -> Callable[[], dict]:
    _FORMATS[name] = check
    return lambda: {_FMT: name}


_FORMATS: dict[str, Callable[[str], list[str]]] = {}


def _format_validate(fmt: Any, value: str) -> Any:
    if not (isinstance(fmt, dict) and _FMT in fmt):
        raise TypeError("no such overload")
    problems = _FORMATS[fmt[_FMT]](value)
    from kapiserver.machinery.cel_runtime import cel
    return cel.OptionalValue.of(problems) if problems else cel.OptionalValue.none()


_K8S_FUNCTIONS: dict[str, Callable] = {
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "isSorted": _is_sorted,
    "find": _find,
    "findAll": _find_all,
    "format": _format,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "compareTo": _cmp,
    "add": _q_add,
    "sub": _q_sub,
    "asInteger": _as_integer,
    "isInteger": lambda q: _qv(q).denominator == 1,
    "asApproximateFloat": lambda q: float(_qv(q)),
    "sign": lambda q: (_qv(q) > 0) - (_qv(q) < 0),
    "url": _url,
    "isURL": _is_url,
    "getScheme": lambda u: _u(u).scheme,
    "getHost": _host,
    "getHostname": _hostname,
    "getPort": _port,
    "getEscapedPath": lambda u: _u(u).path,
    "getQuery": _query,
    "format.dns1123Label": _format_checker("dns1123Label", validation.is_dns1123_label),
    "format.dns1123Subdomain": _format_checker("dns1123Subdomain", validation.is_dns1123_subdomain),
    "format.dns1035Label": _format_checker("dns1035Label", validation.is_dns1035_label),
    "format.qualifiedName": _format_checker(
        "qualifiedName", lambda v: [] if re.match(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", v)
        else ["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
              "alphanumeric character"]),
    "format.uuid": _format_checker(
        "uuid", lambda v: [] if re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", v)
        else ["invalid UUID"]),
    "validate": _format_validate,
    "matches": _matches,
}
_K8S_FUNCTIONS.update(network.FUNCTIONS)


def _format_named(name: str) -> Any:
    from kapiserver.machinery.cel_runtime import cel
    return cel.OptionalValue.of({_FMT: name}) if name in _FORMATS else cel.OptionalValue.none()


_K8S_FUNCTIONS["format.named"] = _format_named

# Names the engine handles natively (beyond operators, which start with _ @ ! or -).
NATIVE_FUNCTIONS = frozenset((
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string", "bytes",
    "bool", "timestamp", "duration", "type", "dyn", "getFullYear", "getMonth", "getDate", "getDayOfMonth",
    "getDayOfWeek", "getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds", "hasValue",
    "value", "orValue", "or", "of", "none", "optMap", "optFlatMap", "max", "min",
))
# Identifiers that are namespaces or type names, not variables.
NAMESPACES = frozenset(("optional", "format", "ip", "math", "strings", "sets", "base64", "lists",
                        "int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type",
                        "type", "timestamp", "duration", "dyn"))


@functools.cache
def functions() -> dict[str, Callable]:
    """Every custom function, by the name CEL calls it (built once; do not modify)."""
    from kapiserver.machinery.cel_runtime import cel, stdlib
    ctx = cel.Context()
    stdlib.add_stdlib_to_context(ctx)
    out = dict(ctx.functions)
    out.update(_K8S_FUNCTIONS)
    return out


@functools.cache
def known_functions() -> frozenset[str]:
    """Function names a rule may reference; dotted names count by their last segment too."""
    names = functions()
    return frozenset(NATIVE_FUNCTIONS | set(names) | {n.rsplit(".", 1)[-1] for n in names})


def new_context(variables: dict[str, Any]) -> cel.Context:
    """A fresh evaluation context (one per evaluation: contexts are not shared across threads)."""
    from kapiserver.machinery.cel_runtime import cel
    return cel.Context(variables=variables, functions=functions())

"""YAML as Kubernetes reads it: ``sigs.k8s.io/yaml``'s YAML → JSON, bounded.

Upstream converts a YAML body to JSON (go-yaml v2 into ``interface{}``, then
``json.Marshal``) and decodes that JSON like any other.  That fixes what a
scalar means, whatever the target field: YAML 1.1 words (``yes``, ``on``,
``n``) are booleans, ``0x10`` and ``010`` are integers, ``.nan`` is a float
that JSON cannot carry (an error), a timestamp-looking plain scalar stays a
string, ``!!binary`` is decoded to its bytes, and map keys that are numbers
or booleans become strings.

The document is composed here from libyaml's events (its C parser keeps its
own stacks; PyYAML's C composer recurses and overflows the C stack on deep
documents), with the limits of :mod:`kapiserver.machinery.limits`: nesting
depth, and a budget for what aliases may add (an alias shares the Python
object it names, so composing is cheap; the budget bounds what a later copy
would expand).
"""
from __future__ import annotations

import base64
import binascii
import math
import re
from typing import TYPE_CHECKING, Any, Optional

import yaml

from kapiserver.machinery import limits

if TYPE_CHECKING:  # (the C loader's stubs do not say it is a SafeLoader; it parses as one)
    from yaml import SafeLoader as _Parser
else:
    try:  # the C parser when libyaml is present
        from yaml import CSafeLoader as _Parser
    except ImportError:  # pragma: no cover
        from yaml import SafeLoader as _Parser

_TAG = "tag:yaml.org,2002:"
STR, BINARY, BOOL, INT, FLOAT, NULL, TIMESTAMP, MERGE = (
    _TAG + t for t in ("str", "binary", "bool", "int", "float", "null", "timestamp", "merge"))
_RESOLVABLE = {STR, BOOL, INT, FLOAT, NULL, TIMESTAMP}

# go-yaml v2's resolve table
_WORDS: dict[str, tuple[str, Any]] = {}
for _value, _tag, _words in (
        (True, BOOL, "y Y yes Yes YES true True TRUE on On ON"),
        (False, BOOL, "n N no No NO false False FALSE off Off OFF"),
        (None, NULL, "~ null Null NULL"),
        (math.nan, FLOAT, ".nan .NaN .NAN"),
        (math.inf, FLOAT, ".inf .Inf .INF +.inf +.Inf +.INF"),
        (-math.inf, FLOAT, "-.inf -.Inf -.INF"),
        ("<<", MERGE, "<<")):
    for _w in _words.split():
        _WORDS[_w] = (_tag, _value)
_WORDS[""] = (NULL, None)
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
# go-yaml v2's timestamp formats (a plain scalar like this stays a string in interface{})
_TIMESTAMP = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}(([Tt]|\s+)\d{1,2}:\d{2}:\d{2}(\.\d*)?(\s*(Z|[-+]\d{1,2}(:\d{2})?))?)?$")
_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


class YAMLError(ValueError):
    """A body that is not YAML Kubernetes can convert to JSON (message in upstream's words)."""


def _parse_go_int(text: str, signed: bool) -> Optional[int]:
    """Go's ``strconv.ParseInt(text, 0, 64)`` / ``ParseUint``: None when it fails."""
    s, negative = text, False
    if s[:1] in "+-":
        if not signed:
            return None
        negative, s = s[0] == "-", s[1:]
    base = 10
    if len(s) > 1 and s[0] == "0":
        prefix = s[1].lower()
        if prefix == "x":
            base, s = 16, s[2:]
        elif prefix == "o":
            base, s = 8, s[2:]
        elif prefix == "b":
            base, s = 2, s[2:]
        else:
            base, s = 8, s[1:]
    if not s or any(c not in _DIGITS[base] for c in s):
        return None
    value = int(s, base)
    if negative:
        value = -value
    if signed:
        return value if _INT64_MIN <= value <= _INT64_MAX else None
    return value if value <= _UINT64_MAX else None


def _resolve_number(plain: str) -> tuple[str, Any]:
    stripped = plain.replace("_", "")
    for signed in (True, False):
        value = _parse_go_int(stripped, signed)
        if value is not None:
            return INT, value
    if _YAML_FLOAT.match(stripped):
        return FLOAT, float(stripped)
    return STR, plain


def resolve(tag: Optional[str], value: str) -> tuple[str, Any]:
    """go-yaml v2's ``resolve``: the tag a scalar resolves to and its value."""
    if tag is not None and tag not in _RESOLVABLE:
        return tag, value
    if tag == STR:
        return STR, value
    first = value[:1]
    if not first or first in "yYnNtTfFoO~" or first == "<":
        found = _WORDS.get(value)
        if found is not None:
            return found
    elif first == ".":
        found = _WORDS.get(value)
        if found is not None:
            return found
        if "_" not in value:
            try:
                return FLOAT, float(value)  # Go's ParseFloat: ".5", ".5e3"
            except ValueError:
                pass
    elif first in "+-0123456789":
        found = _WORDS.get(value)
        if found is not None:
            return found
        if (tag is None or tag == TIMESTAMP) and _TIMESTAMP.match(value):
            return TIMESTAMP, value
        return _resolve_number(value)
    return STR, value


def _scalar(event: Any) -> Any:
    """A scalar event's value in the JSON that sigs.k8s.io/yaml would produce."""
    tag, value = event.tag, event.value
    plain = event.implicit[0]
    if tag == "!":
        tag = None
    if tag is None and not plain:
        return value  # quoted: a string
    if tag == BINARY:
        try:
            return base64.b64decode(value.encode("ascii", "strict"), validate=False).decode("utf-8", "replace")
        except (binascii.Error, UnicodeEncodeError):
            raise YAMLError("yaml: !!binary value contains invalid base64 data") from None
    rtag, out = resolve(tag, value)
    if tag is not None and tag in _RESOLVABLE and rtag != tag and tag != STR:
        if tag == FLOAT and rtag == INT:
            rtag, out = FLOAT, float(out)
        elif tag == TIMESTAMP and rtag == STR:
            raise YAMLError(f"yaml: cannot decode !!str `{value}` as a !!timestamp")
        elif not (tag == TIMESTAMP and rtag == TIMESTAMP):
            short = lambda t: "!!" + t[len(_TAG):] if t.startswith(_TAG) else t  # noqa: E731
            raise YAMLError(f"yaml: cannot decode {short(rtag)} `{value}` as a {short(tag)}")
    if rtag == FLOAT:
        if math.isnan(out) or math.isinf(out):
            raise YAMLError(f"json: unsupported value: {_go_float(out)}")
        if out == int(out) and _INT64_MIN <= out < _UINT64_MAX:
            return int(out)  # Go's json.Marshal writes 1.0 as 1 (kept a float past 64 bits, as orjson reads it)
        return out
    if rtag == MERGE:
        return _MERGE_KEY
    return out


def _go_float(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


class _MergeKey:
    """The ``<<`` key of a merge."""


_MERGE_KEY = _MergeKey()


def _key_string(key: Any, line: int) -> str:
    """sigs.k8s.io/yaml's conversion of a map key to a JSON object key."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return _format_float32(key)
    if key is None:
        raise YAMLError("unsupported map key of type: %!s(<nil>), key: <nil>")
    raise YAMLError(f"yaml: line {line + 1}: invalid map key: a map or list cannot be a key")


def _format_float32(value: float) -> str:
    """``strconv.FormatFloat(v, 'g', -1, 32)``."""
    import struct

    single = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, _, exponent = text.partition("e")
    if exponent:
        sign, number = exponent[0], exponent[1:].lstrip("0")
        text = f"{mantissa}e{sign}{number.zfill(2)}"
    return text


class _Frame:
    __slots__ = ("container", "key", "key_line", "have_key", "anchor", "weight", "height", "line", "merges", "explicit")

    def __init__(self, container: Any, anchor: Optional[str], line: int) -> None:
        self.container = container
        self.key: Any = None
        self.key_line = line
        self.have_key = False
        self.anchor = anchor
        self.weight = 1
        self.height = 1
        self.line = line
        self.merges: list[Any] = []
        self.explicit: set[str] = set()


def yaml_to_json(body: bytes | str, duplicates: Optional[list[str]] = None) -> Any:
    """The first document of a YAML body as JSON-shaped Python values.

    Raises :class:`YAMLError` with upstream's message for what cannot be
    converted and :class:`limits.TooDeep` for documents that nest too deep.
    ``duplicates`` (when given) collects ``line N: key "k" already set in map``
    for keys given twice (the last value wins, as in go-yaml v2).
    """
    size = len(body)
    alias_budget = max(limits.ALIAS_EXPANSION_MIN, limits.ALIAS_EXPANSION_RATIO * size)
    alias_weight = 0
    anchors: dict[str, tuple[Any, int, int]] = {}  # name -> (value, weight, height)
    stack: list[_Frame] = []
    result: Any = None
    done = False
    parser = _Parser(body)
    try:
        while not done:
            try:
                event = parser.get_event()
            except yaml.MarkedYAMLError as e:
                if "nesting depth" in (e.problem or ""):
                    # libyaml (PyYAML >= 6.0.4) stops deep flow collections while
                    # scanning ahead, before our own count sees them.
                    raise limits.TooDeep(limits.depth_message()) from None
                mark = e.problem_mark or e.context_mark
                line = f"line {mark.line + 1}: " if mark is not None else ""
                raise YAMLError(f"yaml: {line}{e.problem or e.context}") from None
            except yaml.YAMLError as e:
                raise YAMLError(f"yaml: {e}") from None
            if event is None:
                break
            if isinstance(event, yaml.ScalarEvent):
                value: Any = _scalar(event)
                weight, height = 1 + len(event.value), 0
                if event.anchor:
                    anchors[event.anchor] = (value, weight, height)
            elif isinstance(event, yaml.AliasEvent):
                found = anchors.get(event.anchor or "")
                if found is None:
                    raise YAMLError(f'yaml: unknown anchor \'{event.anchor}\' referenced')
                value, weight, height = found
                alias_weight += weight
                if alias_weight > alias_budget:
                    raise YAMLError("yaml: document contains excessive aliasing")
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= limits.MAX_DEPTH:
                    raise limits.TooDeep(limits.depth_message())
                start_line = event.start_mark.line if event.start_mark is not None else 0
                stack.append(_Frame({} if isinstance(event, yaml.MappingStartEvent) else [], event.anchor,
                                    start_line))
                continue
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                frame = stack.pop()
                value, weight, height = frame.container, frame.weight, frame.height
                if frame.merges:
                    value = _apply_merges(value, frame)
                if frame.anchor:
                    anchors[frame.anchor] = (value, weight, height)
            elif isinstance(event, yaml.DocumentEndEvent):
                done = True
                continue
            else:  # stream/document start
                continue
            if not stack:
                result = value
                continue
            parent = stack[-1]
            if len(stack) + height > limits.MAX_DEPTH:
                raise limits.TooDeep(limits.depth_message())
            parent.weight += weight
            parent.height = max(parent.height, height + 1)
            container = parent.container
            if isinstance(container, list):
                container.append(value)
            elif not parent.have_key:
                if isinstance(value, (dict, list)) and value is not _MERGE_KEY:
                    raise YAMLError(f"yaml: line {parent.line + 1}: invalid map key: a map or list cannot be a key")
                parent.key, parent.have_key = value, True
                parent.key_line = event.start_mark.line if event.start_mark is not None else parent.line
            else:
                key = parent.key
                parent.have_key = False
                if key is _MERGE_KEY:
                    parent.merges.append(value)
                    continue
                name = _key_string(key, parent.line)
                if name in parent.explicit and duplicates is not None:
                    duplicates.append(f'line {parent.key_line + 1}: key "{name}" already set in map')
                parent.explicit.add(name)
                container[name] = value
    finally:
        parser.dispose()
    return result


def _apply_merges(mapping: Any, frame: _Frame) -> Any:
    """``<<: *base`` (or a list of them): keys not set explicitly come from the merged maps."""
    if not isinstance(mapping, dict):
        return mapping
    merged: dict[str, Any] = {}
    for source in frame.merges:
        sources = source if isinstance(source, list) else [source]
        for item in sources:
            if not isinstance(item, dict):
                raise YAMLError(f"yaml: line {frame.line + 1}: map merge requires map or sequence of maps "
                                f"as the value")
            merged.update(item)
    merged.update(mapping)
    return merged

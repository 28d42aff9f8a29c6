"""Typed decoding of built-in kinds: Go's ``encoding/json`` into the kind's struct, from its schema.

kube-apiserver decodes a request body into the Go type of the kind before
anything else sees it.  A value of the wrong JSON type fails the request
(400, ``json: cannot unmarshal array into Go struct field
ObjectMeta.metadata.labels of type map[string]string``), a field the struct
does not have is dropped (and reported per ``fieldValidation``), and what is
stored is therefore always well-typed.  kapiserver keeps objects as plain
dicts, so this module does the same check and cleaning on the dict, driven by
the OpenAPI definitions of the built-in types (``machinery/openapi_definitions.py``).

A definition is compiled once into a tree of small decoder objects
(:func:`decoder_for`), shared by every request for that kind; decoding
builds a fresh copy of the value (YAML aliases share objects, the copy does
not), so its cost is one walk over the body.

Null follows Go: ``null`` for a struct field leaves it unset (the field is
dropped), ``null`` as a map value or list item is the element's zero value.
Nesting is bounded by :data:`kapiserver.machinery.limits.MAX_DEPTH`.
"""
from __future__ import annotations

import base64
import binascii
import functools
import re
from datetime import datetime, timezone
from typing import Any, Callable, Optional

import orjson

from kapiserver.machinery import limits, quantity

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
FIELDS_V1 = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_APIEXT = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
JSON_ANY = _APIEXT + "JSON"
SCHEMA_PROPS = _APIEXT + "JSONSchemaProps"
SCHEMA_OR_BOOL = _APIEXT + "JSONSchemaPropsOrBool"
SCHEMA_OR_ARRAY = _APIEXT + "JSONSchemaPropsOrArray"
SCHEMA_OR_STRINGS = _APIEXT + "JSONSchemaPropsOrStringArray"

QUANTITY_FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
RFC3339 = "2006-01-02T15:04:05Z07:00"
_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_INT_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}
_NUMERIC_GO_TYPES = frozenset(("int", "int32", "int64", "float64"))
_B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

# ------------------------------------------------------------------ errors and paths


class DecodeError(ValueError):
    """A value that Go's decoder would refuse; ``str()`` is upstream's message."""


# A path is a chain of (parent, key, struct) tuples: ``struct`` is the struct
# decoder whose field ``key`` is (None for list indices and map keys).
Path = Optional[tuple]


def render_path(path: Path) -> str:
    """``spec.containers[0].name``: the field path as upstream's strict decoding reports it."""
    parts: list[str] = []
    while path is not None:
        path, key, _ = path
        parts.append(f"[{key}]" if isinstance(key, int) else "." + key)
    return "".join(reversed(parts)).lstrip(".")


def _go_context(path: Path) -> tuple[str, str]:
    """(innermost struct name, dotted JSON field names from the root): Go's error context."""
    names: list[str] = []
    struct = ""
    while path is not None:
        path, key, owner = path
        if owner is not None:
            names.append(key)
            if not struct:
                struct = owner.go_name
    return struct, ".".join(reversed(names))


def _json_kind(value: Any) -> str:
    """How Go's UnmarshalTypeError names a JSON value: ``string``, ``number 1.5``, ``bool``..."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return f"number {value}"
    if isinstance(value, float):
        text = repr(value)
        return f"number {text}"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def type_error(value: Any, go_type: str, path: Path) -> DecodeError:
    struct, field = _go_context(path)
    kind = _json_kind(value)
    if kind.startswith("number ") and go_type not in _NUMERIC_GO_TYPES:
        kind = "number"  # Go names the literal only when the target is numeric
    if struct or field:
        return DecodeError(f"json: cannot unmarshal {kind} into Go struct field {struct}.{field} of type {go_type}")
    return DecodeError(f"json: cannot unmarshal {kind} into Go value of type {go_type}")


class Context:
    """What one decode found besides the value: unknown field paths and the number of object keys seen."""

    __slots__ = ("unknown", "keys")

    def __init__(self) -> None:
        self.unknown: list[str] = []
        self.keys = 0


# ------------------------------------------------------------------ decoders


class Decoder:
    go_type = ""
    # A Python type whose values pass unchanged (the struct loop's fast path).
    plain: Optional[type] = None

    def decode(self, value: Any, path: Path, depth: int, ctx: Context) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        return None


class _String(Decoder):
    go_type = "string"
    plain = str

    def decode(self, value, path, depth, ctx):
        if type(value) is str:
            return value
        raise type_error(value, self.go_type, path)

    def zero(self):
        return ""


class _Bool(Decoder):
    go_type = "bool"
    plain = bool

    def decode(self, value, path, depth, ctx):
        if type(value) is bool:
            return value
        raise type_error(value, self.go_type, path)

    def zero(self):
        return False


class _Int(Decoder):
    def __init__(self, go_type: str) -> None:
        self.go_type = go_type
        self.low, self.high = _INT_RANGES.get(go_type, _INT_RANGES["int64"])

    def decode(self, value, path, depth, ctx):
        if type(value) is int and self.low <= value <= self.high:
            return value
        raise type_error(value, self.go_type, path)

    def zero(self):
        return 0


class _Float(Decoder):
    go_type = "float64"

    def decode(self, value, path, depth, ctx):
        if type(value) in (int, float):
            return value
        raise type_error(value, self.go_type, path)

    def zero(self):
        return 0


class _Bytes(Decoder):
    """``[]byte``: a base64 string (standard alphabet, padded; newlines ignored).

    Go keeps the decoded bytes and writes them back canonically, so the value is
    kept in that form: ``aGVsbG8=\r\n`` is stored as ``aGVsbG8=``, which every
    reader (the protobuf encoder among them) decodes strictly.
    """

    go_type = "[]uint8"

    def decode(self, value, path, depth, ctx):
        if type(value) is not str:
            raise type_error(value, self.go_type, path)
        problem = base64_problem(value)
        if problem is not None:
            raise DecodeError(f"illegal base64 data at input byte {problem}")
        return canonical_base64(value)

    def zero(self):
        return ""


def canonical_base64(text: str) -> str:
    """``text`` (valid for :func:`base64_problem`) as Go re-encodes its bytes: no CR/LF, zero pad bits."""
    data = text.encode("ascii")
    if b"\n" in data or b"\r" in data:
        data = data.replace(b"\n", b"").replace(b"\r", b"")
    canonical = base64.b64encode(base64.b64decode(data))
    return text if canonical == data and len(data) == len(text) else canonical.decode("ascii")


def base64_problem(text: str) -> Optional[int]:
    """The input offset Go's ``base64.StdEncoding`` reports for malformed data, None when it decodes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) % 4 == 0 and all(c in _B64 for c in data):
        return None
    kept = bytes(c for c in data if c not in (10, 13))
    try:
        base64.b64decode(kept, validate=True)
        if len(kept) % 4 == 0:
            return None
    except (binascii.Error, ValueError):
        pass
    seen = 0
    for i, c in enumerate(data):
        if c in (10, 13):
            continue
        if c not in _B64 and not (c == 0x3D and seen >= len(kept) - 2 and seen % 4 >= 2):
            return i
        seen += 1
    return len(data) - len(data) % 4 if len(data) % 4 else len(data)


class _Time(Decoder):
    """metav1.Time (RFC 3339, stored in UTC to the second) or MicroTime (microseconds)."""

    def __init__(self, micro: bool) -> None:
        self.micro = micro
        self.go_type = "v1.MicroTime" if micro else "v1.Time"

    def decode(self, value, path, depth, ctx):
        if type(value) is not str:
            raise DecodeError(f"json: cannot unmarshal {_json_kind(value).split(' ')[0]} into Go value of type string")
        moment = parse_rfc3339(value)
        if moment is None:
            raise DecodeError(f'parsing time "{value}" as "{RFC3339}": cannot parse "{value}" as "2006"')
        moment = moment.astimezone(timezone.utc)
        if self.micro:
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> Optional[datetime]:
    m = _RFC3339.match(text)
    if m is None:
        return None
    try:
        fraction = (m.group(7) or ".0")[1:7].ljust(6, "0")
        zone = m.group(8)
        tz = timezone.utc
        if zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            from datetime import timedelta
            tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
        return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                        int(m.group(6)), int(fraction), tzinfo=tz)
    except ValueError:
        return None


class _Quantity(Decoder):
    go_type = "resource.Quantity"

    def decode(self, value, path, depth, ctx):
        if type(value) is str:
            if quantity.parse(value) is None:
                raise DecodeError(QUANTITY_FORMAT_ERROR)
            return value
        if type(value) in (int, float):
            return str(value) if type(value) is int else repr(value)
        raise DecodeError(QUANTITY_FORMAT_ERROR)


class _IntOrString(Decoder):
    go_type = "intstr.IntOrString"

    def decode(self, value, path, depth, ctx):
        if type(value) is str:
            return value
        if type(value) is int and -(1 << 31) <= value < (1 << 31):
            return value
        raise type_error(value, "int32", None)


class _Any(Decoder):
    """Free-form JSON (RawExtension, FieldsV1, apiextensions JSON): anything, copied, depth-checked."""

    def __init__(self, go_type: str) -> None:
        self.go_type = go_type

    def decode(self, value, path, depth, ctx):
        return copy_json(value, depth, ctx)


def copy_json(value: Any, depth: int, ctx: Optional[Context] = None) -> Any:
    """A fresh copy of a JSON value, refusing more than MAX_DEPTH levels (from ``depth``)."""
    if isinstance(value, dict):
        if depth >= limits.MAX_DEPTH:
            raise limits.TooDeep(limits.depth_message())
        if ctx is not None:
            ctx.keys += len(value)
        return {k: copy_json(v, depth + 1, ctx) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= limits.MAX_DEPTH:
            raise limits.TooDeep(limits.depth_message())
        return [copy_json(v, depth + 1, ctx) for v in value]
    return value


class _Map(Decoder):
    def __init__(self, elem: Decoder) -> None:
        self.elem = elem
        self.go_type = "map[string]" + elem.go_type

    def decode(self, value, path, depth, ctx):
        if type(value) is not dict:
            raise type_error(value, self.go_type, path)
        if depth >= limits.MAX_DEPTH:
            raise limits.TooDeep(limits.depth_message())
        ctx.keys += len(value)
        elem = self.elem
        plain = elem.plain
        if plain is not None:
            for v in value.values():
                if type(v) is not plain:
                    break
            else:
                return dict(value)
        out = {}
        for k, v in value.items():
            out[k] = elem.zero() if v is None else elem.decode(v, (path, k, None), depth + 1, ctx)
        return out

    def zero(self):
        return {}


class _List(Decoder):
    def __init__(self, elem: Decoder) -> None:
        self.elem = elem
        self.go_type = "[]" + elem.go_type

    def decode(self, value, path, depth, ctx):
        if type(value) is not list:
            raise type_error(value, self.go_type, path)
        if depth >= limits.MAX_DEPTH:
            raise limits.TooDeep(limits.depth_message())
        elem = self.elem
        plain = elem.plain
        if plain is not None:
            for v in value:
                if type(v) is not plain:
                    break
            else:
                return list(value)
        return [elem.zero() if v is None else elem.decode(v, (path, i, None), depth + 1, ctx)
                for i, v in enumerate(value)]

    def zero(self):
        return []


class Struct(Decoder):
    """A Go struct: known fields decoded, unknown ones dropped (their paths noted)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.go_name = name.rsplit(".", 1)[-1]
        package = name.rsplit(".", 2)[-2] if name.count(".") >= 2 else ""
        self.go_type = f"{package}.{self.go_name}" if package else self.go_name
        self.fields: dict[str, Decoder] = {}

    def decode(self, value, path, depth, ctx):
        if type(value) is not dict:
            raise type_error(value, self.go_type, path)
        if depth >= limits.MAX_DEPTH:
            raise limits.TooDeep(limits.depth_message())
        ctx.keys += len(value)
        fields = self.fields
        out = {}
        for k, v in value.items():
            field = fields.get(k)
            if field is None:
                ctx.unknown.append(render_path((path, k, self)))
                continue
            if v is None:
                continue
            if type(v) is field.plain:
                out[k] = v
            else:
                out[k] = field.decode(v, (path, k, self), depth + 1, ctx)
        return out

    def zero(self):
        return {}

    def decode_against(self, value: Any, known: Any, ctx: Context,
                       changed: Optional[frozenset[str]] = None) -> Any:
        """``value`` decoded, except its fields whose JSON is byte for byte ``known``'s: ``known``
        was decoded before (the stored object a patch was applied to), so they are kept as they
        are.  Their keys are not counted in ``ctx.keys``.  ``changed``: the fields the patch can
        have changed (None: any); the others are copies of ``known``'s, not compared again."""
        if type(value) is not dict or type(known) is not dict:
            return self.decode(value, None, 0, ctx)
        same = {k for k, v in value.items() if v is not None and k in known
                and ((changed is not None and k not in changed) or _same_json(v, known[k]))}
        if not same:
            return self.decode(value, None, 0, ctx)
        decoded = self.decode({k: v for k, v in value.items() if k not in same}, None, 0, ctx)
        return {k: value[k] if k in same else decoded[k] for k in value if k in same or k in decoded}


def _same_json(a: Any, b: Any) -> bool:
    """Whether two values encode to the same JSON, types included (``1``, ``1.0`` and ``true``
    differ; so do values that are not plain JSON, which raise instead of encoding)."""
    strict = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
    try:
        return orjson.dumps(a, option=strict) == orjson.dumps(b, option=strict)
    except (TypeError, orjson.JSONEncodeError):
        return False


class _Either(Decoder):
    """The apiextensions "or" types: a schema or a bool / an array of schemas / of strings."""

    def __init__(self, go_type: str, on_object: Callable[[], Decoder], on_list: Optional[Callable[[], Decoder]],
                 allow_bool: bool) -> None:
        self.go_type = go_type
        self._on_object = on_object
        self._on_list = on_list
        self.allow_bool = allow_bool

    def decode(self, value, path, depth, ctx):
        if isinstance(value, dict):
            return self._on_object().decode(value, path, depth, ctx)
        if isinstance(value, list) and self._on_list is not None:
            return self._on_list().decode(value, path, depth, ctx)
        if isinstance(value, bool) and self.allow_bool:
            return value
        # Go's UnmarshalJSON of these types decodes the value again, from a fresh root
        raise type_error(value, "v1.JSONSchemaProps", None)


# ------------------------------------------------------------------ compiling


class Compiler:
    """Builds decoders from a definitions source (name → swagger schema), one per name."""

    def __init__(self, lookup: Callable[[str], dict]) -> None:
        self._lookup = lookup
        self._named: dict[str, Decoder] = {}

    def named(self, name: str) -> Decoder:
        found = self._named.get(name)
        if found is not None:
            return found
        special = self._special(name)
        if special is not None:
            self._named[name] = special
            return special
        schema = self._lookup(name)
        if schema.get("properties"):
            struct = Struct(name)
            self._named[name] = struct  # before the fields: definitions are recursive
            for field_name, sub in schema["properties"].items():
                struct.fields[field_name] = self.compile(sub)
            return struct
        compiled = self.compile(schema, name)
        self._named[name] = compiled
        return compiled

    def _special(self, name: str) -> Optional[Decoder]:
        if name == INT_OR_STRING:
            return _IntOrString()
        if name == QUANTITY:
            return _Quantity()
        if name == TIME:
            return _Time(False)
        if name == MICRO_TIME:
            return _Time(True)
        if name == RAW_EXTENSION:
            return _Any("runtime.RawExtension")
        if name == FIELDS_V1:
            return _Any("v1.FieldsV1")
        if name == JSON_ANY:
            return _Any("v1.JSON")
        if name == SCHEMA_OR_BOOL:
            return _Either("v1.JSONSchemaPropsOrBool", lambda: self.named(SCHEMA_PROPS), None, True)
        if name == SCHEMA_OR_ARRAY:
            return _Either("v1.JSONSchemaPropsOrArray", lambda: self.named(SCHEMA_PROPS),
                           lambda: _List(self.named(SCHEMA_PROPS)), False)
        if name == SCHEMA_OR_STRINGS:
            return _Either("v1.JSONSchemaPropsOrStringArray", lambda: self.named(SCHEMA_PROPS),
                           lambda: _List(_STRING), False)
        return None

    def compile(self, schema: dict, name: str = "") -> Decoder:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self.named(ref.rsplit("/", 1)[-1])
        kind = schema.get("type")
        fmt = schema.get("format")
        if kind == "string":
            if fmt == "byte":
                return _BYTES
            if fmt == "date-time":
                return _Time(False)
            if fmt == "int-or-string":
                return _IntOrString()
            return _STRING
        if kind == "integer":
            return _Int(fmt if fmt in _INT_RANGES else "int64")
        if kind == "number":
            return _FLOAT
        if kind == "boolean":
            return _BOOL
        if kind == "array":
            items = schema.get("items")
            return _List(self.compile(items) if isinstance(items, dict) else _Any("interface {}"))
        if kind == "object":
            additional = schema.get("additionalProperties")
            if isinstance(additional, dict):
                return _Map(self.compile(additional))
            if schema.get("properties"):
                struct = Struct(name or "object")
                for field_name, sub in schema["properties"].items():
                    struct.fields[field_name] = self.compile(sub)
                return struct
            return _Any("map[string]interface {}")
        return _Any("interface {}")


_STRING = _String()
_BOOL = _Bool()
_FLOAT = _Float()
_BYTES = _Bytes()


@functools.lru_cache(maxsize=1)
def _builtin_compiler() -> Compiler:
    from kapiserver.machinery.openapi_definitions import load_definitions

    return Compiler(load_definitions().get)


def decoder_for(definition: str) -> Decoder:
    """The decoder of a built-in definition (``io.k8s.api.core.v1.ConfigMap``), compiled once."""
    return _builtin_compiler().named(definition)


def decode(decoder: Decoder, value: Any, ctx: Optional[Context] = None, depth: int = 0) -> Any:
    """``value`` decoded as Go would: a fresh, well-typed copy (raises DecodeError or TooDeep)."""
    return decoder.decode(value, None, depth, ctx or Context())

"""Kubernetes' protobuf wire format (``application/vnd.kubernetes.protobuf``).

A body is the magic prefix ``k8s\\x00`` followed by a ``runtime.Unknown``
envelope: ``typeMeta {apiVersion, kind}``, ``raw`` (the object's own message,
without type meta), ``contentEncoding`` and ``contentType``.  Objects inside
kapiserver are JSON-shaped dicts, so decoding turns a message into exactly
the dict upstream's JSON encoding of the same Go object would give, and
encoding does the reverse, driven by the field tables of
:mod:`kapiserver.machinery.protobuf_types`.
"""
from __future__ import annotations

import base64
import binascii
import functools
import struct
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator, Optional

import orjson

from kapiserver.machinery import errors
from kapiserver.machinery.protobuf_tables import all_messages, message_for
from kapiserver.machinery.protobuf_types import (
    BOOL, BYTES, DOUBLE, FIELDS_V1, INT32, INT64, INT_OR_STRING, MAP_BYTES, MAP_MESSAGE, MAP_QUANTITY, MAP_STRING,
    MAP_STRING_LIST, MAP_TIME, MESSAGE, MICRO_TIME, QUANTITY, STRING, TIME, Field, split_api_version)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ProtobufError(ValueError):
    """Malformed protobuf data."""


@dataclass
class Unknown:
    """The ``runtime.Unknown`` envelope of a protobuf body."""

    api_version: str = ""
    kind: str = ""
    raw: bytes = b""
    content_encoding: str = ""
    content_type: str = ""


@dataclass
class Decoded:
    """A decoded object and the fields the tables did not know (``metadata.#42``)."""

    obj: dict
    unknown_fields: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ wire level

def write_varint(out: bytearray, value: int) -> None:
    """Append a base-128 varint; negative numbers as 64-bit two's complement (10 bytes)."""
    value &= 0xFFFFFFFFFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    if pos < len(data) and data[pos] < 0x80:  # the common one-byte case
        return data[pos], pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint too long")


def write_tag(out: bytearray, number: int, wire_type: int) -> None:
    write_varint(out, (number << 3) | wire_type)


def write_bytes_field(out: bytearray, number: int, payload: bytes) -> None:
    out += _varint_bytes((number << 3) | LENGTH_DELIMITED)
    out += _varint_bytes(len(payload))
    out += payload


def write_varint_field(out: bytearray, number: int, value: int) -> None:
    write_tag(out, number, VARINT)
    write_varint(out, value)


def iter_fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """``(number, wire type, value)`` for each field: an int for varints and fixed, bytes for the rest."""
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if _signed(number, 32) <= 0:  # Go's generated Unmarshal: fieldNum := int32(wire >> 3)
            raise IllegalTag(f"illegal tag {_signed(number, 32)} (wire type {key})")
        value: int | bytes
        if wire_type == VARINT:
            value, pos = read_varint(data, pos)
        elif wire_type == LENGTH_DELIMITED:
            length, pos = read_varint(data, pos)
            if pos + length > end:
                raise ProtobufError("truncated length-delimited field")
            value = bytes(data[pos:pos + length])
            pos += length
        elif wire_type == FIXED64:
            if pos + 8 > end:
                raise ProtobufError("truncated fixed64")
            value = int.from_bytes(data[pos:pos + 8], "little")
            pos += 8
        elif wire_type == FIXED32:
            if pos + 4 > end:
                raise ProtobufError("truncated fixed32")
            value = int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
        else:
            raise IllegalWireType(f"illegal wireType {wire_type}")
        yield number, wire_type, value


class IllegalTag(ProtobufError):
    """A field key whose number, as Go's int32, is not positive."""


class IllegalWireType(ProtobufError):
    """A field key of a wire type protobuf does not have (or groups, which Kubernetes never uses)."""


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# ------------------------------------------------------------------ envelope

def unwrap(body: bytes) -> Unknown:
    """Parse the magic prefix and the ``runtime.Unknown`` envelope."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the protobuf magic prefix k8s\\x00")
    env = Unknown()
    try:
        fields = list(iter_fields(body[len(MAGIC):]))
    except IllegalTag as e:  # (the envelope's fields are read before any is used, as Go's Unmarshal does)
        raise EnvelopeError(f"proto: Unknown: {e}") from None
    except IllegalWireType as e:
        raise EnvelopeError(f"proto: {e}") from None
    for number, wire_type, value in fields:
        if number not in _ENVELOPE_FIELDS:
            continue  # unknown fields are skipped, as Go's generated Unmarshal skips them
        _envelope_wire(wire_type, _ENVELOPE_FIELDS[number])
        if number == 1:
            for n, wt, v in iter_fields(value):
                if n in _TYPE_META_FIELDS:
                    _envelope_wire(wt, _TYPE_META_FIELDS[n])
                if n == 1:
                    env.api_version = _text(v)
                elif n == 2:
                    env.kind = _text(v)
        elif number == 2:
            env.raw = value
        elif number == 3:
            env.content_encoding = _text(value)
        elif number == 4:
            env.content_type = _text(value)
    return env


_ENVELOPE_FIELDS = {1: "TypeMeta", 2: "Raw", 3: "ContentEncoding", 4: "ContentType"}
_TYPE_META_FIELDS = {1: "APIVersion", 2: "Kind"}


class EnvelopeError(ProtobufError):
    """The ``runtime.Unknown`` envelope itself does not decode (upstream: the object is unrecognized)."""


def _envelope_wire(wire_type: int, name: str) -> None:
    """Every field of the envelope is length-delimited; another wire type is Go's error."""
    if wire_type != LENGTH_DELIMITED:
        raise EnvelopeError(f"proto: wrong wireType = {wire_type} for field {name}")


def wrap(api_version: str, kind: str, raw: bytes) -> bytes:
    """The magic prefix and an envelope around ``raw`` (all four fields written, as Go does)."""
    type_meta = bytearray()
    write_bytes_field(type_meta, 1, api_version.encode())
    write_bytes_field(type_meta, 2, kind.encode())
    out = bytearray(MAGIC)
    write_bytes_field(out, 1, bytes(type_meta))
    write_bytes_field(out, 2, raw)
    write_bytes_field(out, 3, b"")
    write_bytes_field(out, 4, b"")
    return bytes(out)


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError("invalid UTF-8 in a string field") from None


# ------------------------------------------------------------------ times

def format_time(seconds: int) -> str:
    """metav1.Time's JSON: RFC 3339 in UTC, whole seconds."""
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(seconds: int, nanos: int) -> str:
    """metav1.MicroTime's JSON: RFC 3339 in UTC with six fractional digits."""
    moment = _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> tuple[int, int]:
    """``(seconds, nanos)`` of an RFC 3339 timestamp."""
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ProtobufError(f"invalid timestamp {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    return seconds, delta.microseconds * 1000


# ------------------------------------------------------------------ tables

_BY_NUMBER: dict[str, dict[int, Field]] = {}
_NUMBER_ORDER: dict[str, tuple[Field, ...]] = {}


def _by_number(name: str) -> dict[int, Field]:
    found = _BY_NUMBER.get(name)
    if found is None:
        found = _BY_NUMBER[name] = {f.number: f for f in all_messages()[name]}
    return found


def _in_number_order(name: str) -> tuple[Field, ...]:
    found = _NUMBER_ORDER.get(name)
    if found is None:
        found = _NUMBER_ORDER[name] = tuple(sorted(all_messages()[name], key=lambda f: f.number))
    return found


# ------------------------------------------------------------------ decoding

def decode_object(body: bytes) -> Decoded:
    """A protobuf request body as the JSON-shaped dict of the object.

    Raises :class:`ProtobufError` for malformed data and ``LookupError`` when
    no table exists for the envelope's kind.
    """
    env = unwrap(body)
    if env.content_encoding:
        raise ProtobufError(f"unsupported content encoding {env.content_encoding!r}")
    group, version = split_api_version(env.api_version)
    name = message_for(group, version, env.kind)
    if name is None:
        raise LookupError(env.kind)
    unknown: list[str] = []
    obj: dict = {"kind": env.kind, "apiVersion": env.api_version}
    obj.update(decode_message(name, env.raw, "", unknown))
    return Decoded(obj, unknown)


def decode_message(name: str, data: bytes, path: str, unknown: list[str]) -> dict:
    """One message as a dict; numbers missing from the table are appended to ``unknown``."""
    fields = all_messages()[name]
    by_number = _by_number(name)
    seen: dict[int, list[Any]] = {}
    for number, wire_type, value in iter_fields(data):
        f = by_number.get(number)
        if f is None:
            where = f"{path}.#{number}" if path else f"#{number}"
            if where not in unknown:
                unknown.append(where)
            continue
        seen.setdefault(number, []).append(_check_wire(f, wire_type, value))
    out: dict = {}
    for f in fields:
        values = seen.get(f.number)
        where = f"{path}.{f.name}" if path else f.name
        present, value = _field_value(f, values, path if f.inline else where, unknown)
        if f.inline:
            out.update(value or {})
        elif present:
            out[f.name] = value
    return out


def _check_wire(f: Field, wire_type: int, value: Any) -> Any:
    expected = VARINT if f.kind in (BOOL, INT32, INT64) else FIXED64 if f.kind == DOUBLE else LENGTH_DELIMITED
    if wire_type != expected:
        raise ProtobufError(f"field {f.name} (number {f.number}) has wire type {wire_type}, expected {expected}")
    return value


def _field_value(f: Field, values: Optional[list], where: str, unknown: list[str]) -> tuple[bool, Any]:
    """Whether the field appears in the JSON form, and its JSON value."""
    # An empty list or map is nil in Go after decoding: left out with omitempty, else null.
    if f.kind == MAP_MESSAGE:
        result = {}
        for entry in values or ():
            key, raw = _map_entry_bytes(entry)
            result[key] = decode_embedded(f.message, raw, f"{where}[{key}]", unknown)
        return (bool(result) or not f.omitempty), result or None
    if f.kind in _MAP_KINDS:
        result = {}
        for entry in values or ():
            key, val = _map_entry(entry, f.kind)
            result[key] = val
        return (bool(result) or not f.omitempty), result or None
    if f.repeated:
        items = [_single(f, v, f"{where}[{i}]", unknown) for i, v in enumerate(values or ())]
        return (bool(items) or not f.omitempty), items or None
    if values is None:
        if f.pointer:
            return False, None
        value = _zero(f)
    else:
        value = _single(f, values[-1], where, unknown)  # last one wins
    if f.pointer:
        return True, value
    if f.kind == MESSAGE:
        return True, value
    if f.kind in (TIME, MICRO_TIME):
        return not (value is None and f.omitzero), value
    return (not f.omitempty or bool(value)), value


def _zero(f: Field) -> Any:
    if f.kind == MESSAGE:
        return decode_embedded(f.message, b"", "", [])
    if f.kind in (TIME, MICRO_TIME, FIELDS_V1):
        return None
    if f.kind in (INT32, INT64, INT_OR_STRING):
        return 0
    if f.kind == DOUBLE:
        return 0
    if f.kind == BOOL:
        return False
    return ""


def _single(f: Field, value: Any, where: str, unknown: list[str]) -> Any:
    kind = f.kind
    if kind == STRING:
        return _text(value)
    if kind == BOOL:
        return value != 0
    if kind == INT32:
        return _signed(value, 32)
    if kind == INT64:
        return _signed(value, 64)
    if kind == BYTES:
        return base64.b64encode(value).decode("ascii")
    if kind == MESSAGE:
        return decode_embedded(f.message, value, where, unknown)
    if kind == DOUBLE:
        return json_number(struct.unpack("<d", value.to_bytes(8, "little"))[0])
    if kind in (TIME, MICRO_TIME):
        if not value:
            return None  # a zero time is written as an empty message
        seconds = nanos = 0
        for n, wt, v in iter_fields(value):
            if n == 1 and wt == VARINT:
                seconds = _signed(v, 64)
            elif n == 2 and wt == VARINT:
                nanos = _signed(v, 32)
        return format_time(seconds) if kind == TIME else format_micro_time(seconds, nanos)
    if kind == FIELDS_V1:
        raw = b""
        for n, wt, v in iter_fields(value):
            if n == 1 and wt == LENGTH_DELIMITED:
                raw = v
        if not raw:
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ProtobufError(f"{where}: FieldsV1 does not hold JSON") from None
    if kind == INT_OR_STRING:
        typ, int_val, str_val = 0, 0, ""
        for n, wt, v in iter_fields(value):
            if n == 1 and wt == VARINT:
                typ = _signed(v, 64)
            elif n == 2 and wt == VARINT:
                int_val = _signed(v, 32)
            elif n == 3 and wt == LENGTH_DELIMITED:
                str_val = _text(v)
        return str_val if typ == 1 else int_val
    if kind == QUANTITY:
        text = ""
        for n, wt, v in iter_fields(value):
            if n == 1 and wt == LENGTH_DELIMITED:
                text = _text(v)
        return text
    raise ProtobufError(f"no decoder for field kind {kind}")  # pragma: no cover - tables are fixed


def _map_entry_bytes(entry: bytes) -> tuple[str, bytes]:
    key = ""
    val = b""
    for n, wt, v in iter_fields(entry):
        if n == 1 and wt == LENGTH_DELIMITED:
            key = _text(v)
        elif n == 2 and wt == LENGTH_DELIMITED:
            val = v
    return key, val


def json_number(value: float) -> Any:
    """A float64 as Go's JSON writes it: whole numbers without a fraction (``5``, not ``5.0``)."""
    if value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _map_entry(entry: bytes, kind: str) -> tuple[str, Any]:
    key = ""
    val = b""
    for n, wt, v in iter_fields(entry):
        if n == 1 and wt == LENGTH_DELIMITED:
            key = _text(v)
        elif n == 2 and wt == LENGTH_DELIMITED:
            val = v
    if kind == MAP_BYTES:
        return key, base64.b64encode(val).decode("ascii")
    if kind in _MAP_VALUES:
        return key, _single(_MAP_VALUES[kind], val, key, [])
    if kind == MAP_STRING_LIST:
        return key, [_text(v) for n, wt, v in iter_fields(val) if n == 1 and wt == LENGTH_DELIMITED]
    return key, _text(val)


# map kinds whose values are messages with a JSON form of their own
_MAP_VALUES = {MAP_QUANTITY: Field("value", 2, QUANTITY), MAP_TIME: Field("value", 2, TIME)}
_MAP_KINDS = (MAP_STRING, MAP_BYTES, MAP_QUANTITY, MAP_TIME, MAP_STRING_LIST)


# ------------------------------------------------------------------ encoding

def can_encode(api_version: str, kind: str) -> bool:
    """Whether a table exists for this top-level kind."""
    group, version = split_api_version(api_version)
    return message_for(group, version, kind) is not None


def encode_object(obj: dict) -> bytes:
    """The protobuf body (magic + envelope) of a JSON-shaped object with a known kind.

    Fields without a table entry are dropped, as a typed Go object would drop them.
    """
    api_version = obj.get("apiVersion") or ""
    kind = obj.get("kind") or ""
    group, version = split_api_version(api_version)
    name = message_for(group, version, kind)
    if name is None:
        raise LookupError(kind)
    return wrap(api_version, kind, encode_message(name, obj))


def encode_message(name: str, obj: Optional[dict]) -> bytes:
    """One message, fields in number order like Go's generated marshallers.

    Non-pointer fields are always written (zero when absent), pointer fields
    only when present, so the bytes match what a Go client would send.
    """
    into = _ENCODERS.get(name)
    if into is None:
        into = _compile_encoder(name)
    out = bytearray()
    into(obj, out)
    return bytes(out)


# Each message's encoder appends the message to a bytearray: Python source made once per message
# from its fields (:func:`_encoder_source`), with each field's tag, and its bytes when absent,
# as constants. A message field is written in place: its length first as one byte, replaced once
# the field is written when it is 128 bytes or more. Encoders call each other through the
# globals of _ENCODER_NAMESPACE (a message's first call compiles it), so a message holding
# itself (JSONSchemaProps) works. Names in that namespace are numbered by its size, so encoders are
# made under one lock: a Status encoded on a thread (an audited 422) while the reactor encodes a
# Pod must not number two encoders or constants alike. (Re-entrant: making one makes those it holds.)
_ENCODERS: dict[str, Callable[[Any, bytearray], None]] = {}
_ENCODER_IDS: dict[str, str] = {}
_ENCODER_NAMESPACE: dict[str, Any] = {}
_MAKING_ENCODERS = threading.RLock()


def _encoder_id(name: str) -> str:
    """The global name of a message's encoder; until compiled, one that compiles it on its first call."""
    with _MAKING_ENCODERS:
        ident = _ENCODER_IDS.get(name)
        if ident is None:
            ident = _ENCODER_IDS[name] = f"m{len(_ENCODER_IDS)}"

            def compile_on_first_call(obj: Any, out: bytearray) -> None:
                _compile_encoder(name)(obj, out)
            _ENCODER_NAMESPACE[ident] = compile_on_first_call
        return ident


def _compile_encoder(name: str) -> Callable[[Any, bytearray], None]:
    into = _ENCODERS.get(name)
    if into is not None:
        return into
    with _MAKING_ENCODERS:
        into = _ENCODERS.get(name)
        if into is None:
            ident = _encoder_id(name)
            source = _encoder_source(name, ident)
            exec(compile(source, f"<protobuf encoder of {name}>", "exec"), _ENCODER_NAMESPACE)
            into = _ENCODERS[name] = _ENCODER_NAMESPACE[ident]
        return into


# Parts of a pod template, which the pods of a workload (and each pod's successive versions) share
# whole: its volumes (the service-account token's projected volume, whose name is random per pod, by
# its source), volume mounts, probes, affinity, security contexts, the default tolerations, resources,
# ports, the owner reference; and their labels and annotations (_SHARED_STRING_MAPS). A nested part
# is written from its framed encoding (length and message), remembered by the part's JSON: orjson's
# dump of a small part takes a fraction of a microsecond, encoding it one to ten. So a first protobuf
# list of a workload's pods, or a watch event of one, encodes each shared part once (issue 34: 61 ->
# 35 µs per realistic pod, bench/README.md). A part whose JSON is over _REMEMBERED_BYTES is encoded
# each time. (Environment variables are not among them: bench/scale.py's pods have their own values.)
_TEMPLATE_PARTS = frozenset({
    "core.Volume", "core.ProjectedVolumeSource", "core.Probe", "core.Affinity", "core.PodSecurityContext",
    "core.SecurityContext", "core.Toleration", "core.ResourceRequirements", "core.ContainerPort",
    "core.VolumeMount", "meta.OwnerReference",
})
_REMEMBERED_PER_PART = 256
_REMEMBERED_BYTES = 1024


def _framed_part_id(name: str) -> str:
    """The global name of a template part's framed encoder: ``f(obj) -> bytes``, the part's length
    and message, remembered by the part's JSON (bounded: emptied when full).

    The encoding is a function of that JSON: it tells strings, integers, floats and booleans apart,
    and a value it cannot dump (a key that is not a string, an integer past 64 bits) is encoded afresh.
    """
    with _MAKING_ENCODERS:
        ident = _encoder_id(name) + "_framed"
        if ident in _ENCODER_NAMESPACE:
            return ident
        remembered: dict[bytes, bytes] = {}
        recall = remembered.get  # (a dict's get and set are atomic: encoders also run on threads)
        dumps = orjson.dumps

        def framed(obj: Any) -> bytes:
            try:
                key = dumps(obj)
            except TypeError:
                return _framed_afresh(name, obj)
            data = recall(key)
            if data is None:
                data = _framed_afresh(name, obj)
                _remember(remembered, key, data)
            return data
        _ENCODER_NAMESPACE[ident] = framed
        return ident


def _framed_afresh(name: str, obj: Any) -> bytes:
    out = bytearray()
    _compile_encoder(name)(obj, out)  # (made once: then found at once)
    return _varint_bytes(len(out)) + out


def _remember(remembered: dict[bytes, bytes], key: bytes, data: bytes) -> None:
    """Keep ``data`` under ``key``, unless the key is too large."""
    if len(key) <= _REMEMBERED_BYTES:
        if len(remembered) >= _REMEMBERED_PER_PART:
            remembered.clear()
        remembered[key] = data


_WRITE_LENGTH_AFTER = """{i}s = len(out)
{i}out.append(0)
{i}{call}
{i}n = len(out) - s - 1
{i}if n < 128:
{i}    out[s] = n
{i}else:
{i}    out[s:s + 1] = _varint_bytes(n)
"""


def _encoder_source(name: str, ident: str) -> str:
    """The source of ``def <ident>(obj, out)``, which appends message ``name`` of ``obj`` to ``out``
    (a value that is not a non-empty dict: every field absent)."""
    absent: list[bytes] = []
    # each field's JSON name ("" for an inline field), bytes when absent, and code
    blocks: list[tuple[str, bytes, str]] = []

    def constant(value: Any) -> str:
        key = f"{ident}_{len(_ENCODER_NAMESPACE)}"
        _ENCODER_NAMESPACE[key] = value
        return key

    def nested(indent: str, message: str, value: str) -> str:
        if message in _TEMPLATE_PARTS:
            return f"{indent}out += {_framed_part_id(message)}({value})\n"
        return _WRITE_LENGTH_AFTER.format(i=indent, call=f"{_encoder_id(message)}({value}, out)")

    for f, tag, fast in _encoding_plan(name):
        t = constant(tag)
        if f.inline:
            inner = encode_message(f.message, {})
            absent.append(tag + _varint_bytes(len(inner)) + inner)
            blocks.append(("", absent[-1], f"out += {t}\n" + nested("", f.message, "obj")))
            continue
        when_absent = _absent_field_bytes(f, tag, fast)
        absent.append(when_absent)
        lines = [f"v = get({f.name!r})"]
        if when_absent:
            lines.append(f"if v is None:\n    out += {constant(when_absent)}\nelse:")
        else:
            lines.append("if v is not None:")
        if fast == _FAST_STRING:
            lines.append(f"    b = v.encode() if type(v) is str else _str(v).encode()\n"
                         f"    out += {t}\n    n = len(b)\n"
                         f"    out += _SMALL_VARINTS[n] if n < 128 else _varint_bytes(n)\n    out += b")
        elif fast == _FAST_MESSAGE:
            lines.append(f"    out += {t}\n" + nested("    ", f.message, "v"))
        elif fast == _FAST_MESSAGES:
            lines.append(f"    for item in v:\n        out += {t}\n" + nested("        ", f.message, "item"))
        elif fast == _FAST_VARINT:
            lines.append(f"    x = int(v or 0) & 0xFFFFFFFFFFFFFFFF\n    out += {t}\n"
                         f"    out += _SMALL_VARINTS[x] if x < 128 else _varint_bytes(x)")
        elif f.kind == STRING and f.repeated:
            lines.append(f"    for item in v or ():\n"
                         f"        b = item.encode() if type(item) is str else _str(item).encode()\n"
                         f"        out += {t}\n        n = len(b)\n"
                         f"        out += _SMALL_VARINTS[n] if n < 128 else _varint_bytes(n)\n        out += b")
        elif f.kind == MAP_STRING:
            writer = "_write_shared_string_map" if f.name in _SHARED_STRING_MAPS else "_write_string_map"
            lines.append(f"    {writer}(out, {t}, v)")
        elif f.kind == MAP_QUANTITY:
            lines.append(f"    _write_quantity_map(out, {t}, v)")
        elif f.kind in (TIME, MICRO_TIME) and not f.repeated:
            lines.append(f"    b = _time_message(str(v), {f.kind == MICRO_TIME}) if v else b''\n"
                         f"    out += {t}\n    out += _SMALL_VARINTS[len(b)] if len(b) < 128 else _varint_bytes(len(b))\n"
                         f"    out += b")
        else:
            lines.append(f"    _write_field(out, {constant(f)}, v)")
        blocks.append((f.name, when_absent, "\n".join(lines)))
    # A run of fields is written as absent at once when the object has none of their keys (most of
    # a PodSpec's or a VolumeSource's fields): one set operation instead of a get each.
    code: list[str] = []
    run: list[tuple[str, bytes, str]] = []
    for block in blocks + [("", b"", "")]:
        if block[0] and len(run) < _SKIPPED_TOGETHER:
            run.append(block)
            continue
        if len(run) > 1:
            names = constant(frozenset(n for n, _, _ in run))
            present = "\n".join(c for _, _, c in run).replace("\n", "\n    ")
            when_absent = b"".join(a for _, a, _ in run)
            if when_absent:
                code.append(f"if keys.isdisjoint({names}):\n    out += {constant(when_absent)}\nelse:\n    {present}")
            else:
                code.append(f"if not keys.isdisjoint({names}):\n    {present}")
        else:
            code.extend(c for _, _, c in run)
        run = [block] if block[0] else []
        if block[2] and not block[0]:
            code.append(block[2])
    header = (f"def {ident}(obj, out):\n"
              f"    if not obj or not isinstance(obj, dict):\n"
              f"        out += {constant(b''.join(absent))}\n"
              f"        return\n"
              f"    get = obj.get\n")
    body = "\n".join(code)
    if "keys.isdisjoint" in body:
        header += "    keys = obj.keys()\n"
    return header + "    " + body.replace("\n", "\n    ") + "\n"


_SKIPPED_TOGETHER = 8


def _absent_field_bytes(f: Field, tag: bytes, fast: int) -> bytes:
    """The bytes of field ``f`` (not inline) when the object does not have it."""
    if fast in (_FAST_STRING, _FAST_VARINT):
        return b"" if f.pointer else tag + b"\x00"
    if fast == _FAST_MESSAGE:
        if f.pointer:
            return b""
        data = encode_message(f.message, None)
        return tag + _varint_bytes(len(data)) + data
    if fast == _FAST_MESSAGES:
        return b""
    out = bytearray()
    _write_field(out, f, None)
    return bytes(out)


def _write_string_map(out: bytearray, tag: bytes, value: Any) -> None:
    """A map of strings (labels, annotations, selectors): each entry a message of key and value."""
    for key in sorted(value or {}):
        name = str(key).encode()
        text = _str(value[key]).encode()
        pair = b"\n" + _varint_bytes(len(name)) + name + b"\x12" + _varint_bytes(len(text)) + text
        out += tag
        out += _varint_bytes(len(pair))
        out += pair


# Maps of strings that the objects of a workload share (their labels and annotations, a template's
# node selector and label selectors), written once per JSON as the template parts are (a ConfigMap's
# data is not one of them).
_SHARED_STRING_MAPS = frozenset({"labels", "annotations", "matchLabels", "nodeSelector", "selector"})
_shared_string_maps: dict[bytes, bytes] = {}


def _write_shared_string_map(out: bytearray, tag: bytes, value: Any) -> None:
    try:
        key = tag + orjson.dumps(value)
    except TypeError:
        _write_string_map(out, tag, value)
        return
    data = _shared_string_maps.get(key)
    if data is not None:
        out += data
        return
    start = len(out)
    _write_string_map(out, tag, value)
    _remember(_shared_string_maps, key, bytes(out[start:]))


def _write_quantity_map(out: bytearray, tag: bytes, value: Any) -> None:
    """A ResourceList: each entry a message of the key and a Quantity message of the value's string."""
    for key in sorted(value or {}):
        entry = _resource_entry(str(key), _str(value[key]))  # (requests and limits repeat across pods)
        out += tag
        out += _varint_bytes(len(entry))
        out += entry


def _write_field(out: bytearray, f: Field, value: Any) -> None:
    """One field without a fast path (maps, repeated scalars, times, quantities...); None is absent."""
    if f.kind == MAP_STRING:
        _write_string_map(out, _varint_bytes((f.number << 3) | LENGTH_DELIMITED), value)
        return
    if f.kind == MAP_QUANTITY:
        _write_quantity_map(out, _varint_bytes((f.number << 3) | LENGTH_DELIMITED), value)
        return
    if f.kind == MAP_MESSAGE:
        for key in sorted(value or {}):
            entry = bytearray()
            write_bytes_field(entry, 1, str(key).encode())
            write_bytes_field(entry, 2, encode_embedded(f.message, value[key]))
            write_bytes_field(out, f.number, bytes(entry))
        return
    if f.kind in _MAP_KINDS:
        for key in sorted(value or {}):
            entry = bytearray()
            write_bytes_field(entry, 1, str(key).encode())
            raw = value[key]
            if f.kind in _MAP_VALUES:
                _write_single(entry, _MAP_VALUES[f.kind], raw)
            elif f.kind == MAP_STRING_LIST:
                items = bytearray()
                for item in raw or ():
                    write_bytes_field(items, 1, _str(item).encode())
                write_bytes_field(entry, 2, bytes(items))
            else:
                write_bytes_field(entry, 2, _b64decode(raw) if f.kind == MAP_BYTES else _str(raw).encode())
            write_bytes_field(out, f.number, bytes(entry))
        return
    if f.repeated:
        for item in value or ():
            _write_single(out, f, item)
        return
    # absent pointers, and nil []byte (Go writes only a non-nil slice, even an empty one)
    if value is None and (f.pointer or f.kind in (FIELDS_V1, BYTES)):
        return
    _write_single(out, f, value)


_FAST_STRING, _FAST_MESSAGE, _FAST_MESSAGES, _FAST_VARINT = 1, 2, 3, 4
_SMALL_VARINTS = [bytes([i]) for i in range(128)]
_PLANS: dict[str, tuple[tuple[Field, bytes, int], ...]] = {}


def _varint_bytes(value: int) -> bytes:
    if value < 128:
        return _SMALL_VARINTS[value]
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def _encoding_plan(name: str) -> tuple[tuple[Field, bytes, int], ...]:
    """Each field of a message in number order, with its tag's bytes and its fast path (0: none)."""
    plan = _PLANS.get(name)
    if plan is None:
        steps = []
        for f in _in_number_order(name):
            fast = 0
            if f.kind == STRING and not f.repeated:
                fast = _FAST_STRING
            elif f.kind == MESSAGE and f.message not in _RAW_JSON_FORMS and f.message not in _UNION_FORMS:
                fast = _FAST_MESSAGES if f.repeated else _FAST_MESSAGE
            elif f.kind in (INT32, INT64, BOOL) and not f.repeated:
                fast = _FAST_VARINT
            wire = VARINT if fast == _FAST_VARINT else LENGTH_DELIMITED
            steps.append((f, _varint_bytes((f.number << 3) | wire), fast))
        plan = _PLANS[name] = tuple(steps)
    return plan


def _write_single(out: bytearray, f: Field, value: Any) -> None:
    kind = f.kind
    n = f.number
    if kind == STRING:
        write_bytes_field(out, n, _str(value).encode())
    elif kind == BOOL:
        write_varint_field(out, n, 1 if value else 0)
    elif kind in (INT32, INT64):
        write_varint_field(out, n, int(value or 0))
    elif kind == BYTES:
        write_bytes_field(out, n, _b64decode(value))
    elif kind == MESSAGE:
        write_bytes_field(out, n, encode_embedded(f.message, value))
    elif kind == DOUBLE:
        write_tag(out, n, FIXED64)
        try:
            out += struct.pack("<d", float(value or 0))
        except (TypeError, ValueError):
            raise ProtobufError(f"field {f.name} is not a number: {value!r}") from None
    elif kind in (TIME, MICRO_TIME):
        write_bytes_field(out, n, _time_message(str(value), kind == MICRO_TIME) if value else b"")
    elif kind == FIELDS_V1:
        inner = bytearray()
        write_bytes_field(inner, 1, orjson.dumps(value))
        write_bytes_field(out, n, bytes(inner))
    elif kind == INT_OR_STRING:
        if type(value) is str or type(value) is int:
            write_bytes_field(out, n, _int_or_string_message(value))
        else:
            write_bytes_field(out, n, _int_or_string_message.__wrapped__(value))
    elif kind == QUANTITY:
        inner = bytearray()
        write_bytes_field(inner, 1, _str(value).encode())
        write_bytes_field(out, n, bytes(inner))
    else:  # pragma: no cover - tables are fixed
        raise ProtobufError(f"no encoder for field kind {kind}")


@functools.lru_cache(maxsize=1024, typed=True)
def _int_or_string_message(value: Any) -> bytes:
    """The IntOrString message of a port or a percentage (pods share theirs: a list encodes each once)."""
    inner = bytearray()
    is_str = isinstance(value, str)
    write_varint_field(inner, 1, 1 if is_str else 0)
    write_varint_field(inner, 2, 0 if is_str else int(value or 0))
    write_bytes_field(inner, 3, value.encode() if is_str else b"")
    return bytes(inner)


@functools.lru_cache(maxsize=4096)
def _resource_entry(name: str, quantity: str) -> bytes:
    """A ResourceList's entry: the resource's name and the Quantity message of its string."""
    key = name.encode()
    text = quantity.encode()
    message = b"\n" + _varint_bytes(len(text)) + text
    return b"\n" + _varint_bytes(len(key)) + key + b"\x12" + _varint_bytes(len(message)) + message


def _str(value: Any) -> str:
    return "" if value is None else str(value)


@functools.lru_cache(maxsize=4096)
def _time_message(text: str, micro: bool) -> bytes:
    """The Time (``micro``: MicroTime) message of an RFC 3339 timestamp (objects written in the
    same second share theirs: a list of them parses each once)."""
    inner = bytearray()
    seconds, nanos = parse_time(text)
    write_varint_field(inner, 1, seconds)
    # Time keeps whole seconds; MicroTime microseconds
    write_varint_field(inner, 2, nanos - nanos % 1000 if micro else 0)
    return bytes(inner)


def _b64decode(value: Any) -> bytes:
    if not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        pass
    try:  # stored before the decoder kept bytes canonically: Go's decoding ignores CR and LF
        return base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
    except (AttributeError, TypeError, binascii.Error, ValueError):
        raise ProtobufError("illegal base64 data in a bytes field") from None


# what the encoders' source calls
_ENCODER_NAMESPACE.update(_SMALL_VARINTS=_SMALL_VARINTS, _varint_bytes=_varint_bytes, _str=_str,
                          _time_message=_time_message, _write_string_map=_write_string_map,
                          _write_shared_string_map=_write_shared_string_map,
                          _write_quantity_map=_write_quantity_map, _write_field=_write_field)


# ------------------------------------------------------------------ messages with a JSON form of their own
#
# A few Go types implement MarshalJSON, so their JSON is not the object of
# their protobuf fields.  Their wire shape is still the generated table (the
# field numbers below come from it); only the mapping to and from JSON is
# written here:
#
# * runtime.RawExtension (ControllerRevision ``data``, WatchEvent ``object``)
#   and apiextensions JSON (JSONSchemaProps ``default``, ``example``,
#   ``enum`` items): ``raw`` holds the JSON text of the value, which is the
#   JSON form itself (nothing held: ``null``);
# * JSONSchemaPropsOrBool: a schema object, or ``allows`` as a JSON boolean;
# * JSONSchemaPropsOrArray: the list ``jSONSchemas`` when it has items, else
#   the one ``schema``;
# * JSONSchemaPropsOrStringArray (``dependencies`` values): the string list
#   ``property`` when it has items, else the ``schema``.

RAW_EXTENSION = "runtime.RawExtension"
APIEXTENSIONS_JSON = "apiextensions.JSON"
SCHEMA_OR_BOOL = "apiextensions.JSONSchemaPropsOrBool"
SCHEMA_OR_ARRAY = "apiextensions.JSONSchemaPropsOrArray"
SCHEMA_OR_STRING_ARRAY = "apiextensions.JSONSchemaPropsOrStringArray"


def _raw_number(name: str) -> int:
    (f,) = [f for f in all_messages()[name] if f.name == "raw"]
    return f.number


def _decode_raw_json(name: str, data: bytes, where: str) -> Any:
    number = _raw_number(name)
    raw = b""
    for n, wt, v in iter_fields(data):
        if n == number and wt == LENGTH_DELIMITED:
            raw = v
    if not raw:
        return None
    if name == RAW_EXTENSION and raw.startswith(MAGIC):
        return decode_object(raw).obj  # an embedded object a client wrote as protobuf
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ProtobufError(f"{where or name}: the raw value is not JSON") from None


def _encode_raw_json(name: str, value: Any) -> bytes:
    out = bytearray()
    if value is not None:
        write_bytes_field(out, _raw_number(name), orjson.dumps(value))
    return bytes(out)


def _or_bool_to_json(d: dict) -> Any:
    return d["schema"] if d.get("schema") is not None else bool(d.get("allows"))


def _or_bool_from_json(value: Any) -> dict:
    if isinstance(value, dict):
        return {"allows": True, "schema": value}
    if isinstance(value, bool):
        return {"allows": value}
    raise ProtobufError(f"boolean or JSON schema expected, got {value!r}")


def _or_array_to_json(d: dict) -> Any:
    return d["jSONSchemas"] if d.get("jSONSchemas") else d.get("schema")


def _or_array_from_json(value: Any) -> dict:
    if isinstance(value, list):
        return {"jSONSchemas": value}
    return {"schema": value} if isinstance(value, dict) else {}


def _or_string_array_to_json(d: dict) -> Any:
    return d["property"] if d.get("property") else d.get("schema")


def _or_string_array_from_json(value: Any) -> dict:
    if isinstance(value, list):
        return {"property": value}
    return {"schema": value} if isinstance(value, dict) else {}


# message -> (its fields' dict -> JSON form, JSON form -> its fields' dict)
_UNION_FORMS = {
    SCHEMA_OR_BOOL: (_or_bool_to_json, _or_bool_from_json),
    SCHEMA_OR_ARRAY: (_or_array_to_json, _or_array_from_json),
    SCHEMA_OR_STRING_ARRAY: (_or_string_array_to_json, _or_string_array_from_json),
}
_RAW_JSON_FORMS = (RAW_EXTENSION, APIEXTENSIONS_JSON)


def decode_embedded(name: str, data: bytes, where: str, unknown: list[str]) -> Any:
    """A message field's JSON value: its fields' object, or the type's own JSON form."""
    if name in _RAW_JSON_FORMS:
        return _decode_raw_json(name, data, where)
    union = _UNION_FORMS.get(name)
    if union is not None:
        return union[0](decode_message(name, data, where, unknown))
    return decode_message(name, data, where, unknown)


def encode_embedded(name: str, value: Any) -> bytes:
    """The message bytes of a message field's JSON value (see :func:`decode_embedded`)."""
    if name in _RAW_JSON_FORMS:
        return _encode_raw_json(name, value)
    union = _UNION_FORMS.get(name)
    if union is not None:
        return encode_message(name, union[1](value))
    return encode_message(name, value)


# ------------------------------------------------------------------ watch streams
#
# ``application/vnd.kubernetes.protobuf;stream=watch``: each event is a frame
# of a 4-byte big-endian length and a meta/v1 WatchEvent message written
# without the ``k8s\x00`` envelope (upstream's stream serializer for protobuf
# is the raw one); its ``object`` RawExtension holds the object's complete
# protobuf body (magic and envelope included), as a GET would answer it.

WATCH_MEDIA_TYPE = MEDIA_TYPE + ";stream=watch"
WATCH_EVENT = "meta.WatchEvent"
_FRAME_LIMIT = 0xFFFFFFFF


def encode_watch_frame(event_type: str, object_body: bytes) -> bytes:
    """One frame of a protobuf watch: length prefix and WatchEvent holding ``object_body``."""
    by_name = {f.name: f.number for f in all_messages()[WATCH_EVENT]}
    raw = bytearray()
    write_bytes_field(raw, _raw_number(RAW_EXTENSION), object_body)
    event = bytearray()
    write_bytes_field(event, by_name["type"], event_type.encode())
    write_bytes_field(event, by_name["object"], bytes(raw))
    if len(event) > _FRAME_LIMIT:
        raise ProtobufError("watch event too large for one frame")
    return len(event).to_bytes(4, "big") + bytes(event)


def split_watch_frames(data: bytes) -> tuple[list[bytes], bytes]:
    """The complete frames (WatchEvent messages) at the start of ``data``, and the bytes left over."""
    frames = []
    pos = 0
    while len(data) - pos >= 4:
        length = int.from_bytes(data[pos:pos + 4], "big")
        if len(data) - pos - 4 < length:
            break
        frames.append(data[pos + 4:pos + 4 + length])
        pos += 4 + length
    return frames, data[pos:]


def decode_watch_event(frame: bytes) -> tuple[str, Unknown, dict]:
    """A WatchEvent message: its type, the object's envelope, and the object as JSON."""
    by_number = {f.number: f.name for f in all_messages()[WATCH_EVENT]}
    event_type = ""
    body = b""
    for n, wt, v in iter_fields(frame):
        if wt != LENGTH_DELIMITED:
            continue
        if by_number.get(n) == "type":
            event_type = _text(v)
        elif by_number.get(n) == "object":
            for rn, rwt, rv in iter_fields(v):
                if rn == _raw_number(RAW_EXTENSION) and rwt == LENGTH_DELIMITED:
                    body = rv
    return event_type, unwrap(body), decode_object(body).obj


# ------------------------------------------------------------------ errors

def decode_request_body(body: bytes, expected_kind: str = "") -> Decoded:
    """:func:`decode_object` with failures as the Status errors a client sees (upstream's
    decode errors: 400 BadRequest)."""
    try:
        return decode_object(body)
    except LookupError:
        env = unwrap(body)
        group, version = split_api_version(env.api_version)
        raise errors.bad_request(
            f'{env.kind} in version "{version}" cannot be handled as a {expected_kind or "protobuf object"}: '
            f'no kind "{env.kind}" is registered for version "{env.api_version}"') from None
    except EnvelopeError:
        raise  # the caller's "unrecognized" 400 names the kind it expected
    except ProtobufError as e:
        raise errors.bad_request(f"unable to decode protobuf body: {e}") from None

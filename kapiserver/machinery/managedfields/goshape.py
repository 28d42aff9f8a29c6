"""A built-in object as its Go type holds it, for field ownership.

Upstream computes managedFields on typed objects: a struct field is always
there (``spec.template`` of an empty Deployment is ``{}``), a nil pointer,
an empty ``omitempty`` field or an unknown key is not.  Comparing the JSON a
client sent would instead see ``spec`` appear on create and record ``.``
(the node itself) for every struct an update fills.  This projects a
built-in object onto that shape, using the Go field facts of the protobuf
tables (pointer, ``omitempty``, inline structs); kinds without a table are
compared as they are, like upstream's custom resources.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from kapiserver.machinery.protobuf_tables import all_messages, message_for
from kapiserver.machinery.protobuf_types import (BOOL, BYTES, FIELDS_V1, INT32, INT64, INT_OR_STRING, MESSAGE,
                                                 MICRO_TIME, QUANTITY, STRING, TIME, split_api_version)

_MAP_KINDS = frozenset(("map<string,string>", "map<string,bytes>", "map<string,Quantity>", "map<string,Time>",
                        "map<string,ExtraValue>"))
_SCALAR_ZERO: dict[str, Any] = {STRING: "", BYTES: "", INT32: 0, INT64: 0, BOOL: False}
_STRUCT_ZERO: dict[str, Any] = {TIME: None, MICRO_TIME: None, INT_OR_STRING: 0, QUANTITY: "0"}

# how a field is projected
_INLINE, _MAP, _LIST, _MESSAGE_LIST, _POINTER, _POINTER_MESSAGE, _MESSAGE, _STRUCT, _SCALAR = range(9)

Spec = tuple  # (name, how, message, omitempty, zero)


def shaper(api_version: str, kind: str) -> Optional[Callable[[Any], Any]]:
    """The projection for objects of this kind, or None when no Go table describes it."""
    group, version = split_api_version(api_version)
    message = message_for(group, version, kind)
    if message is None or message not in all_messages():
        return None
    return functools.partial(_message, message)


@functools.lru_cache(maxsize=None)
def _specs(name: str) -> tuple[Spec, ...]:
    out = []
    for f in all_messages()[name]:
        if f.kind == FIELDS_V1:
            continue  # managedFields: never compared
        if f.inline:
            how = _INLINE
        elif f.kind in _MAP_KINDS:
            how = _MAP
        elif f.repeated:
            how = _MESSAGE_LIST if f.kind == MESSAGE else _LIST
        elif f.pointer:
            how = _POINTER_MESSAGE if f.kind == MESSAGE else _POINTER
        elif f.kind == MESSAGE:
            how = _MESSAGE
        elif f.kind in _STRUCT_ZERO:
            how = _STRUCT
        else:
            how = _SCALAR
        zero = _STRUCT_ZERO.get(f.kind) if how == _STRUCT else _SCALAR_ZERO.get(f.kind, "")
        out.append((f.name, how, f.message, f.omitempty, zero))
    return tuple(out)


def _message(name: str, value: Any) -> dict:
    obj = value if type(value) is dict else {}
    out: dict[str, Any] = {}
    for field, how, message, omitempty, zero in _specs(name):
        if how == _INLINE:
            out.update(_message(message, obj))
            continue
        v = obj.get(field)
        if how == _SCALAR:
            if v is None:
                v = zero
            if not omitempty or v != zero or type(v) is not type(zero):
                out[field] = v
        elif how == _MESSAGE:
            out[field] = _message(message, v)
        elif how == _POINTER:
            if v is not None:
                out[field] = v
        elif how == _POINTER_MESSAGE:
            if v is not None:
                out[field] = _message(message, v)
        elif how == _MESSAGE_LIST or how == _LIST:
            if type(v) is list and v:
                out[field] = [_message(message, item) for item in v] if how == _MESSAGE_LIST else v
            elif not omitempty:
                out[field] = [] if type(v) is list else None
        elif how == _MAP:
            if type(v) is dict and (v or not omitempty):
                out[field] = v
            elif not omitempty:
                out[field] = {} if type(v) is dict else None
        else:  # a struct with its own JSON form (Time, IntOrString, Quantity)
            out[field] = v if v is not None else zero
    return out

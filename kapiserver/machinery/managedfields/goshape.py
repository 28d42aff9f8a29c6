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

from kapiserver.machinery.protobuf_types import (BOOL, BYTES, FIELDS_V1, INT32, INT64, INT_OR_STRING, MESSAGE,
                                                 MICRO_TIME, QUANTITY, STRING, TIME, all_messages,
                                                 message_for, split_api_version)

_MAP_KINDS = frozenset(k for k in ("map<string,string>", "map<string,bytes>", "map<string,Quantity>",
                                   "map<string,Time>", "map<string,ExtraValue>"))
_SCALAR_ZERO: dict[str, Any] = {STRING: "", BYTES: "", INT32: 0, INT64: 0, BOOL: False}
_STRUCT_ZERO: dict[str, Any] = {TIME: None, MICRO_TIME: None, INT_OR_STRING: 0, QUANTITY: "0"}


def shaper(api_version: str, kind: str) -> Optional[Callable[[Any], Any]]:
    """The projection for objects of this kind, or None when no Go table describes it."""
    group, version = split_api_version(api_version)
    message = message_for(group, version, kind)
    if message is None or message not in all_messages():
        return None
    return functools.partial(_message, message)


def _message(name: str, value: Any) -> dict:
    obj = value if isinstance(value, dict) else {}
    out: dict[str, Any] = {}
    for f in all_messages()[name]:
        if f.inline:
            out.update(_message(f.message, obj))
            continue
        if f.kind == FIELDS_V1:
            continue  # managedFields: never compared
        present = f.name in obj
        v = obj.get(f.name)
        if f.kind in _MAP_KINDS:
            if isinstance(v, dict) and (v or not f.omitempty):
                out[f.name] = v
            elif not f.omitempty:
                out[f.name] = {} if isinstance(v, dict) else None
        elif f.repeated:
            if isinstance(v, list) and v:
                out[f.name] = [_message(f.message, item) for item in v] if f.kind == MESSAGE else v
            elif not f.omitempty:
                out[f.name] = [] if isinstance(v, list) else None
        elif f.pointer:
            if present and v is not None:
                out[f.name] = _message(f.message, v) if f.kind == MESSAGE else v
        elif f.kind == MESSAGE:
            out[f.name] = _message(f.message, v)
        elif f.kind in _STRUCT_ZERO:
            out[f.name] = v if v is not None else _STRUCT_ZERO[f.kind]
        else:
            zero = _SCALAR_ZERO.get(f.kind, "")
            if v is None:
                v = zero
            if not f.omitempty or v != zero or type(v) is not type(zero):
                out[f.name] = v
    return out


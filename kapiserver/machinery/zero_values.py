"""The zero values Go's JSON encoding writes for fields an object does not set.

kube-apiserver holds objects as Go structs: a non-pointer struct field is
always written (``"loadBalancer": {}``), a field without ``omitempty`` is
written with its zero value (``"desiredReplicas": 0``, ``"currentMetrics":
null``), a zero ``metav1.Time`` is ``null``.  So a new Service comes back
with ``status: {loadBalancer: {}}`` and a new Node with its empty
``nodeInfo``, whatever the content type.  kapiserver holds dicts; this module
adds those values, driven by the protobuf field tables (which record, for
every field, whether the Go field is a pointer and whether it is
``omitempty``).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from kapiserver.machinery.protobuf_tables import all_kinds, all_messages
from kapiserver.machinery.protobuf_types import (BOOL, BYTES, FIELDS_V1, INT32, INT64, INT_OR_STRING, MAP_BYTES,
                                                 MAP_QUANTITY, MAP_STRING, MAP_STRING_LIST, MAP_TIME, MESSAGE,
                                                 MICRO_TIME, QUANTITY, STRING, TIME, Field, split_api_version)

_SCALAR_ZERO: dict[str, Any] = {STRING: "", BOOL: False, INT32: 0, INT64: 0, INT_OR_STRING: 0, QUANTITY: "0"}
_NULL_WHEN_ZERO = {BYTES, TIME, MICRO_TIME, MAP_STRING, MAP_BYTES, MAP_QUANTITY, MAP_TIME, MAP_STRING_LIST}


def fill(message: str, obj: dict) -> None:
    """Add, in place, the zero values Go would write for ``message`` (recursively)."""
    for f in all_messages().get(message, ()):
        if f.inline:
            fill(f.message, obj)
            continue
        if f.name in obj:
            value = obj[f.name]
            if f.kind == MESSAGE:
                if f.repeated:
                    for item in value if isinstance(value, list) else ():
                        if isinstance(item, dict):
                            fill(f.message, item)
                elif isinstance(value, dict):
                    fill(f.message, value)
            continue
        zero = _zero(f)
        if zero is not _ABSENT:
            obj[f.name] = zero
            if isinstance(zero, dict):
                fill(f.message, zero)


_ABSENT = object()


def _zero(f: Field) -> Any:
    """What Go writes for an unset field, or _ABSENT when it writes nothing."""
    if f.pointer or f.kind == FIELDS_V1:
        return _ABSENT
    if f.kind == MESSAGE and not f.repeated:
        return {}  # a struct: omitempty does not apply
    if f.kind in (TIME, MICRO_TIME) and not f.repeated:
        return _ABSENT if f.omitzero else None  # metav1.Time is a struct: null, omitempty or not
    if f.omitempty:
        return _ABSENT
    if f.repeated or f.kind in _NULL_WHEN_ZERO:
        return None
    return _SCALAR_ZERO.get(f.kind, _ABSENT)


@lru_cache(maxsize=None)
def status_message(api_version: str, kind: str) -> Optional[tuple[str, bool]]:
    """The message of a kind's ``status`` and whether Go always writes it (non-pointer)."""
    group, version = split_api_version(api_version)
    message = all_kinds().get((group, version, kind))
    for f in all_messages().get(message, ()) if message else ():
        if f.name == "status" and f.kind == MESSAGE and not f.repeated:
            return f.message, not f.pointer
    return None


def fill_status(obj: dict) -> None:
    """Give a built-in object the status Go's encoding of it would show."""
    found = status_message(obj.get("apiVersion") or "", obj.get("kind") or "")
    if found is None:
        return
    message, always = found
    status = obj.get("status")
    if status is None:
        if not always:
            return
        status = obj["status"] = {}
    if isinstance(status, dict):
        fill(message, status)

"""``metadata.managedFields`` entries to and from managers' field sets.

A manager is identified by its name, operation (``Apply``/``Update``),
subresource and, for updates only, API version (an applier keeps its
identity across versions), exactly as upstream's BuildManagerIdentifier.
Entries are written sorted as upstream sorts them: appliers first, then by
time, manager name, API version and subresource; an entry's keys in
``ManagedFieldsEntry`` field order.
"""
from __future__ import annotations

import datetime
import functools
from typing import Any, NamedTuple, Optional

import orjson

from kapiserver.machinery.managedfields.fieldpath import PathElementError, Set, VersionedSet, go_json
from kapiserver.machinery.meta import parse_rfc3339

APPLY, UPDATE = "Apply", "Update"
FIELDS_V1 = "FieldsV1"


class ManagerKey(NamedTuple):
    manager: str
    operation: str
    api_version: str  # "" for appliers
    subresource: str = ""

    def identifier(self) -> str:
        """Upstream's manager identifier: the entry's JSON without fields and time."""
        parts = []
        if self.manager:
            parts.append(f'"manager":{go_json(self.manager)}')
        if self.operation:
            parts.append(f'"operation":{go_json(self.operation)}')
        if self.api_version:
            parts.append(f'"apiVersion":{go_json(self.api_version)}')
        if self.subresource:
            parts.append(f'"subresource":{go_json(self.subresource)}')
        return "{" + ",".join(parts) + "}"


def manager_key(manager: str, operation: str, api_version: str, subresource: str = "") -> ManagerKey:
    return ManagerKey(manager, operation, "" if operation == APPLY else api_version, subresource)


class ManagedFieldsError(ValueError):
    """managedFields that cannot be decoded."""


class Managed:
    """Managers' field sets and the time each last changed its fields."""

    __slots__ = ("fields", "times")

    def __init__(self, fields: Optional[dict] = None, times: Optional[dict] = None) -> None:
        self.fields: dict[Any, VersionedSet] = fields if fields is not None else {}
        self.times: dict[Any, Optional[str]] = times if times is not None else {}


def normalize_time(value: Any) -> Optional[str]:
    """A metav1.Time as upstream writes it back (UTC, RFC 3339, seconds)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ManagedFieldsError(f"invalid time {value!r}")
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ManagedFieldsError(f"invalid time {value!r}") from None
    if parsed.tzinfo is None:
        raise ManagedFieldsError(f"invalid time {value!r}")
    return parsed.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=1024)
def time_seconds(value: Optional[str]) -> int:
    """A time as :func:`normalize_time` writes it (or the field manager's clock), in seconds."""
    if not value:
        return 0
    return int(parse_rfc3339(value).timestamp())


def is_reset(entries: Any) -> bool:
    """``[]`` or ``[{}]``: the client asks for managedFields to be cleared."""
    return isinstance(entries, list) and (not entries or (len(entries) == 1 and entries[0] == {}))


# Decoded entries by their JSON: an update finds the entries its previous write stored (and
# a client sends back what it read), so the same few come back again and again; parsing them
# (their times, their field sets' JSON) cost an update of a ConfigMap ~10 µs.  Entries larger
# than _DECODED_MAX_BYTES are decoded every time rather than kept.
_DECODED_MAX_BYTES = 16 * 1024


def decode(entries: Any) -> Managed:
    """Entries (as found in an object) to managers' sets (ManagedFieldsError if invalid).

    The result is the caller's to change: its dicts are its own (their sets are shared,
    as :meth:`Set.from_fields` shares them)."""
    if entries is None:
        return Managed()
    if not isinstance(entries, list):
        raise ManagedFieldsError("managedFields must be a list")
    try:
        raw = orjson.dumps(entries)
    except orjson.JSONEncodeError:  # not JSON (an integer past 64 bits): not kept
        return _decode(entries)
    if len(raw) > _DECODED_MAX_BYTES:
        return _decode(entries)
    found = _decoded(raw)
    return Managed(dict(found.fields), dict(found.times))


@functools.lru_cache(maxsize=4096)  # (thread-safe: a large body's write decodes on a thread)
def _decoded(raw: bytes) -> Managed:
    return _decode(orjson.loads(raw))


def _decode(entries: list) -> Managed:
    managed = Managed()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ManagedFieldsError(f"managed fields entry {i} must be an object")
        operation = entry.get("operation")
        if operation not in (APPLY, UPDATE):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType")
        if not fields_type:
            raise ManagedFieldsError(f"missing fieldsType in managed fields entry {i}")
        if fields_type != FIELDS_V1:
            raise ManagedFieldsError(f'invalid fieldsType "{fields_type}" in managed fields entry {i}')
        manager, subresource = entry.get("manager") or "", entry.get("subresource") or ""
        if not isinstance(manager, str) or not isinstance(subresource, str):
            raise ManagedFieldsError(f"managed fields entry {i}: manager and subresource must be strings")
        raw = entry.get("fieldsV1")
        try:
            fields = Set.from_fields(raw if raw is not None else {})
        except PathElementError as e:
            raise ManagedFieldsError(f"error decoding set: {e}") from None
        key = manager_key(manager, operation, api_version, subresource)
        managed.fields[key] = VersionedSet(fields, api_version, operation == APPLY)
        managed.times[key] = normalize_time(entry.get("time"))
    return managed


def encode(managed: Managed) -> Optional[list[dict]]:
    """Managers' sets back to sorted entries; None (no managedFields) when there are none."""
    if not managed.fields:
        return None
    out = []
    for key, vs in managed.fields.items():
        entry: dict[str, Any] = {}
        if key.manager:
            entry["manager"] = key.manager
        entry["operation"] = APPLY if vs.applied else key.operation
        if vs.api_version:
            entry["apiVersion"] = vs.api_version
        when = managed.times.get(key)
        if when:
            entry["time"] = when
        entry["fieldsType"] = FIELDS_V1
        entry["fieldsV1"] = vs.set.to_fields()
        if key.subresource:
            entry["subresource"] = key.subresource
        out.append(entry)
    out.sort(key=lambda e: (e["operation"], time_seconds(e.get("time")), e.get("manager", ""),
                            e.get("apiVersion", ""), e.get("subresource", "")))
    return out

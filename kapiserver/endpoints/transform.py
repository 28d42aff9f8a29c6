"""Turn objects into the shape the client negotiated (Table, PartialObjectMetadata).

Upstream's ``transformResponseObject``: the handlers produce the object or
list, this changes its form just before encoding.
"""
from __future__ import annotations

from kapiserver.endpoints import partial_metadata, table
from kapiserver.endpoints.negotiation import (PARTIAL_SHAPES, TABLE_SHAPES)
from kapiserver.machinery import errors

LIST_VERBS = ("list", "deletecollection")


def allowed_shapes(verb: str, table: bool = True) -> tuple:
    """Which ``as=`` shapes an endpoint of this verb can answer; ``table`` is False for
    resources that do not print (upstream: no TableConvertor), which answer 406 to a
    request for nothing but a Table."""
    tables = TABLE_SHAPES if table else ()
    if verb in LIST_VERBS:
        return tables + tuple(s for s in PARTIAL_SHAPES if s[0].endswith("List"))
    if verb == "watch":  # as upstream's list route; the watch stream narrows it (handlers/watch.py)
        return tables + PARTIAL_SHAPES
    return tables + tuple(s for s in PARTIAL_SHAPES if not s[0].endswith("List"))


def include_object(scope) -> str:
    value = scope.arg("includeObject") or "Metadata"
    if value not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject must be one of "None", "Metadata", "Object", got {value!r}')
    return value


def transform_object(scope, obj: dict) -> dict:
    target = scope.target
    if not target.as_kind:
        return obj
    api_version = f"{target.group}/{target.version}"
    is_list = "items" in obj and obj.get("kind", "").endswith("List")
    if target.as_kind == "Table":
        items = obj["items"] if is_list else [obj]
        return table.to_table(scope.rtype, items, include_object(scope),
                              obj.get("metadata") if is_list else None, api_version)
    if target.as_kind == "PartialObjectMetadataList":
        return partial_metadata.to_partial_object_metadata_list(obj["items"], api_version, obj.get("metadata"))
    return partial_metadata.to_partial_object_metadata(obj, api_version)


def transform_watch_object(scope, obj: dict, first: bool) -> dict:
    """The object of one watch event, in the negotiated shape (Table column
    definitions only in the first event, as upstream)."""
    target = scope.target
    if target.as_kind == "Table":
        return table.to_table_for_watch_event(scope.rtype, obj, include_object(scope), first,
                                              f"{target.group}/{target.version}")
    return transform_object(scope, obj)

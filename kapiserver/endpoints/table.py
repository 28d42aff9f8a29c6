"""Server-side printing: objects as a ``meta.k8s.io`` Table.

kubectl asks for ``as=Table`` and prints what it gets.  Columns come from the
resource type (``table_columns``, computed here, AGE included, as upstream's
printers do); kinds without columns get upstream's default table: ``Name``
and ``Created At`` (type date, the RFC 3339 creation time).  All columns are
sent, priority > 0 ones included (kubectl shows them with ``-o wide``).
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.apis import columns
from kapiserver.endpoints.partial_metadata import META_V1, to_partial_object_metadata
from kapiserver.registry.resource_type import ResourceType, TableColumn

INCLUDE_NONE, INCLUDE_METADATA, INCLUDE_OBJECT = "None", "Metadata", "Object"
_ZERO_TIME = "0001-01-01T00:00:00Z"


def default_columns() -> tuple[TableColumn, ...]:
    """Upstream's default table convertor, for kinds that declare no columns."""
    return (
        TableColumn("Name", "string", lambda o: columns.get_path(o, "metadata", "name", default=""),
                    format="name", description=columns.description(columns.OBJECT_META, "name")),
        TableColumn("Created At", "date",
                    lambda o: columns.get_path(o, "metadata", "creationTimestamp", default=_ZERO_TIME),
                    description=columns.description(columns.OBJECT_META, "creationTimestamp")),
    )


def table_columns(rtype: ResourceType) -> tuple[TableColumn, ...]:
    return rtype.table_columns or default_columns()


def column_definitions(cols: tuple[TableColumn, ...]) -> list[dict]:
    return [{"name": c.name, "type": c.type, "format": c.format, "description": c.description,
             "priority": c.priority} for c in cols]


def _cell(col: TableColumn, obj: dict) -> Any:
    try:
        return col.cell(obj)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None  # a malformed object prints an empty cell rather than failing the list


def _row_object(obj: dict, include_object: str, api_version: str) -> Optional[dict]:
    if include_object == INCLUDE_NONE:
        return None
    if include_object == INCLUDE_OBJECT:
        return obj
    return to_partial_object_metadata(obj, api_version)


def row(cols: tuple[TableColumn, ...], obj: dict, include_object: str = INCLUDE_METADATA,
        api_version: str = META_V1) -> dict:
    """One object's row: its cells, and the object as ``includeObject`` asks."""
    return {"cells": [_cell(c, obj) for c in cols], "object": _row_object(obj, include_object, api_version)}


def to_table(rtype: ResourceType, objects: list[dict], include_object: str = INCLUDE_METADATA,
             list_meta: Optional[dict] = None, api_version: str = META_V1, headers: bool = True) -> dict:
    """A Table of ``objects``; ``list_meta`` (resourceVersion, continue, remainingItemCount)
    when they come from a list, else the single object's resourceVersion is used."""
    cols = table_columns(rtype)
    if list_meta is not None and rtype.table_row_order is not None:
        objects = sorted(objects, key=rtype.table_row_order)
    rows = [row(cols, obj, include_object, api_version) for obj in objects]
    if list_meta is not None:
        metadata = {k: list_meta[k] for k in ("resourceVersion", "continue", "remainingItemCount")
                    if list_meta.get(k) not in (None, "")}
    else:
        rv = columns.get_path(objects[0], "metadata", "resourceVersion") if len(objects) == 1 else None
        metadata = {"resourceVersion": rv} if rv else {}
    return {"kind": "Table", "apiVersion": api_version, "metadata": metadata,
            "columnDefinitions": column_definitions(cols) if headers else None, "rows": rows}


def to_table_for_watch_event(rtype: ResourceType, obj: dict, include_object: str = INCLUDE_METADATA,
                             first: bool = True, api_version: str = META_V1) -> dict:
    """The Table a watch event carries: one row; column definitions only in the first event."""
    return to_table(rtype, [obj], include_object, None, api_version, headers=first)

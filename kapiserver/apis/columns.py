"""Building blocks of the built-in kinds' Table columns.

Upstream's printers compute every cell on the server: AGE is a short human
duration string (``5m``, ``2d3h``), not a timestamp.  Column descriptions are
the field descriptions of the upstream OpenAPI definitions, as upstream fills
them from the Go doc strings.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable, Optional

from kapiserver.machinery.meta import parse_rfc3339
from kapiserver.machinery.openapi_definitions import load_definitions
from kapiserver.registry.resource_type import TableColumn

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def description(definition: str, prop: str) -> str:
    """The description of one property of an upstream definition ("" if unknown)."""
    defs = load_definitions()
    if definition not in defs:
        return ""
    return defs.property_description(definition, prop)


def human_duration(seconds: float) -> str:
    """Upstream's ``duration.HumanDuration``: the precision shrinks as the duration grows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def since(timestamp: Optional[str], now: Optional[datetime.datetime] = None) -> str:
    """Upstream's ``translateTimestampSince``: ``<unknown>`` for an unset time."""
    if not timestamp:
        return "<unknown>"
    try:
        then = parse_rfc3339(timestamp)
    except ValueError:
        return "<unknown>"
    return human_duration(((now or _now()) - then).total_seconds())


def get_path(obj: Any, *path: str, default: Any = None) -> Any:
    """``obj[a][b]...`` or ``default`` when any step is missing or not an object."""
    cur: Any = obj
    for step in path:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(step)
        if cur is None:
            return default
    return cur


def text_at(*path: str) -> Callable[[dict], str]:
    """A getter of the string at ``path`` ("" when missing), as a Go string field reads."""
    return lambda obj: str(get_path(obj, *path, default=""))


def name_column() -> TableColumn:
    return TableColumn("Name", "string", lambda o: get_path(o, "metadata", "name", default=""), format="name",
                       description=description(OBJECT_META, "name"))


def age_column() -> TableColumn:
    return TableColumn("Age", "string", lambda o: since(get_path(o, "metadata", "creationTimestamp")),
                       description=description(OBJECT_META, "creationTimestamp"))


def column(name: str, cell: Callable[[dict], Any], definition: str = "", prop: str = "", type: str = "string",
           desc: str = "", priority: int = 0) -> TableColumn:
    """A column whose description is taken from ``definition.prop`` unless ``desc`` is given."""
    return TableColumn(name, type, cell, description=desc or description(definition, prop), priority=priority)

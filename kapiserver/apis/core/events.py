"""Events (core/v1).  Both event APIs store this form at ``/events``;
``kapiserver.apis.events.events`` serves the events.k8s.io/v1 view of it.

Validation follows upstream's: every event passes the "legacy" checks (the
involved object's namespace, and for events carrying ``eventTime`` the
reporting fields); events written through events.k8s.io/v1 also pass the
strict ones.  Field paths are core/v1 names in both cases, as upstream's.
"""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns
from kapiserver.machinery import errors, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.validation import PATH_SEGMENT
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.Event"
OBJECT_REFERENCE = "io.k8s.api.core.v1.ObjectReference"
TTL_SECONDS = 3600
NORMAL, WARNING = "Normal", "Warning"
REPORTING_INSTANCE_LIMIT = 128
ACTION_LIMIT = 128
REASON_LIMIT = 128
NOTE_LIMIT = 1024
_IMMUTABLE_ON_UPDATE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp",
                        "count", "action", "related", "reportingComponent", "reportingInstance", "type")
# core field -> the name upstream's messages use for it
_MESSAGE_NAMES = {"reportingComponent": "reportingController"}


def _ns(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def _ref(obj: dict) -> dict:
    ref = obj.get("involvedObject")
    return ref if isinstance(ref, dict) else {}


def legacy_causes(event: dict, reporting_field: str) -> list[errors.Cause]:
    """Checks every event passes, whichever API wrote it (core form)."""
    causes = []
    namespace = _ns(event)
    involved_ns = _ref(event).get("namespace") or ""

    def mismatch() -> None:
        causes.append(errors.field_invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))

    if not event.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                mismatch()
        elif namespace != involved_ns:
            mismatch()
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            mismatch()
        controller = event.get("reportingComponent") or ""
        if not controller:
            causes.append(errors.field_required(reporting_field))
        for problem in validation.is_qualified_name(controller):
            causes.append(errors.field_invalid(reporting_field, controller, problem))
        for name, limit, required in (("reportingInstance", REPORTING_INSTANCE_LIMIT, True),
                                      ("action", ACTION_LIMIT, True), ("reason", REASON_LIMIT, True),
                                      ("message", NOTE_LIMIT, False)):
            value = event.get(name) or ""
            if required and not value:
                causes.append(errors.field_required(name))
            if len(str(value).encode()) > limit:
                causes.append(errors.field_invalid(name, "", f"can have at most {limit} characters"))
    for problem in validation.is_dns1123_subdomain(namespace):
        causes.append(errors.field_invalid("namespace", namespace, problem))
    return causes


def series_causes(event: dict) -> list[errors.Cause]:
    series = event.get("series")
    if not isinstance(series, dict):
        return []
    causes = []
    if (series.get("count") or 0) < 2:
        causes.append(errors.field_invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(errors.field_required("series.lastObservedTime"))
    return causes


def strict_create_causes(event: dict) -> list[errors.Cause]:
    """What events.k8s.io/v1 adds on create (core form; deprecated fields must stay unset)."""
    causes = series_causes(event)
    if not event.get("eventTime"):
        causes.append(errors.field_required("eventTime"))
    event_type = event.get("type") or ""
    if event_type not in (NORMAL, WARNING):
        causes.append(errors.field_invalid("type", "", f"has invalid value: {event_type}"))
    for name in ("firstTimestamp", "lastTimestamp", "count"):
        if event.get(name):
            causes.append(errors.field_invalid(name, "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        causes.append(errors.field_invalid("source", "", "needs to be unset"))
    return causes


def strict_update_causes(new: dict, old: dict) -> list[errors.Cause]:
    """What events.k8s.io/v1 adds on update: the event's content is immutable."""
    causes = series_causes(new) if new.get("series") != old.get("series") else []
    for name in _IMMUTABLE_ON_UPDATE:
        if _empty_as_none(new.get(name)) != _empty_as_none(old.get(name)):
            causes.append(errors.field_invalid(_MESSAGE_NAMES.get(name, name), new.get(name),
                                               validation.FIELD_IMMUTABLE))
    return causes


def _empty_as_none(value: Any) -> Any:
    return None if value in ("", 0, {}, [], None) else value


class EventStrategy(Strategy):
    """core/v1 writes: only the legacy checks; PUT creates (upstream's AllowCreateOnUpdate)."""

    name_validation = PATH_SEGMENT
    allow_create_on_update = True

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return legacy_causes(obj, "reportingComponent")

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return legacy_causes(new, "reportingComponent")

    def finalize_on_read(self, rtype: ResourceType, obj: dict) -> None:
        """Fields upstream always prints (the Python client needs involvedObject)."""
        fill_core_fields(obj)


def fill_core_fields(obj: dict) -> None:
    obj.setdefault("involvedObject", {})
    obj.setdefault("source", {})
    for name in ("firstTimestamp", "lastTimestamp", "eventTime"):
        obj.setdefault(name, None)
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")


# ---------------------------------------------------------------- table


def _source(event: dict) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def _first_seen(event: dict) -> str:
    if event.get("firstTimestamp"):
        return columns.since(event["firstTimestamp"])
    return columns.since(event.get("eventTime"))


def _last_seen(event: dict) -> str:
    series = event.get("series")
    if isinstance(series, dict):
        return columns.since(series.get("lastObservedTime"))
    if event.get("lastTimestamp"):
        return columns.since(event["lastTimestamp"])
    return _first_seen(event)


def _count(event: dict) -> int:
    series = event.get("series")
    if isinstance(series, dict):
        return int(series.get("count") or 0)
    return int(event.get("count") or 0) or 1


def _object(event: dict) -> str:
    ref = _ref(event)
    kind = (ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def event_columns(view=lambda o: o) -> tuple:
    """Upstream's event columns; ``view`` turns the served form into the core form."""
    def col(name, cell, prop, priority=0, definition=SCHEMA):
        return columns.column(name, lambda o: cell(view(o)), definition, prop, priority=priority)

    return (
        col("Last Seen", _last_seen, "lastTimestamp"),
        col("Type", lambda e: e.get("type") or "", "type"),
        col("Reason", lambda e: e.get("reason") or "", "reason"),
        col("Object", _object, "involvedObject"),
        col("Subobject", lambda e: _ref(e).get("fieldPath") or "", "fieldPath", 1, OBJECT_REFERENCE),
        col("Source", _source, "source", 1),
        col("Message", lambda e: (e.get("message") or "").strip(), "message"),
        col("First Seen", _first_seen, "firstTimestamp", 1),
        col("Count", _count, "count", 1),
        columns.name_column()._replace(priority=1),
    )


OBJECT_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def _involved(field: str):
    return lambda o: str(_ref(o).get(field) or "")


# Upstream's ToSelectableFields (pkg/registry/core/event/strategy.go): "source" is the source
# component, or the reporting controller when there is none.
SELECTABLE_FIELDS = {
    **{f"involvedObject.{f}": _involved(f) for f in OBJECT_REFERENCE_FIELDS},
    "reason": columns.text_at("reason"),
    "reportingComponent": columns.text_at("reportingComponent"),
    "source": lambda o: str(columns.get_path(o, "source", "component", default="")
                            or o.get("reportingComponent") or ""),
    "type": columns.text_at("type"),
}
FIELD_LABELS = FieldLabelConversion(("metadata.name", "metadata.namespace", *SELECTABLE_FIELDS))


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Event", plural="events", singular="event", namespaced=True,
        strategy=EventStrategy(), short_names=("ev",), schema_name=SCHEMA, ttl_seconds=TTL_SECONDS,
        selectable_fields=dict(SELECTABLE_FIELDS), field_labels=FIELD_LABELS, table_columns=event_columns(),
    )

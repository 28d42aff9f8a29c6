"""Events in events.k8s.io/v1: a second view of the core/v1 events.

Upstream keeps one storage for both APIs (``/events``, core/v1 form); this
version renames fields on the way in and out (``note`` is ``message``,
``regarding`` is ``involvedObject``, ``reportingController`` is
``reportingComponent``, the ``deprecated*`` fields are the old core ones) and
applies the strict checks events.k8s.io adds on top of the core ones.
"""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import events as core_events
from kapiserver.machinery import errors
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.validation import DNS1123_SUBDOMAIN
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.events.v1.Event"
GROUP, VERSION = "events.k8s.io", "v1"
# events.k8s.io/v1 name -> core/v1 name (the fields not listed are the same in both)
_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
_TO_V1 = {core: v1 for v1, core in _RENAMES.items()}


def _rename(obj: dict, names: dict, api_version: str) -> dict:
    out = {names.get(k, k): v for k, v in obj.items()}
    out["apiVersion"] = api_version
    out["kind"] = "Event"
    return out


def core_to_events_v1(obj: dict) -> dict:
    """The events.k8s.io/v1 view of a stored (core/v1) event; a new dict, values shared."""
    return _rename(obj, _TO_V1, f"{GROUP}/{VERSION}")


def events_v1_to_core(obj: dict) -> dict:
    """The core/v1 (storage) form of an events.k8s.io/v1 event; a new dict, values shared."""
    return _rename(obj, _RENAMES, "v1")


def _fill_v1_fields(obj: dict) -> None:
    """Fields upstream always prints in this version (zero structs and times)."""
    obj.setdefault("eventTime", None)
    obj.setdefault("regarding", {})
    obj.setdefault("deprecatedSource", {})
    obj.setdefault("deprecatedFirstTimestamp", None)
    obj.setdefault("deprecatedLastTimestamp", None)


class EventsV1Strategy(Strategy):
    name_validation = DNS1123_SUBDOMAIN
    allow_create_on_update = True

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        core = events_v1_to_core(obj)
        return (core_events.legacy_causes(core, "reportingController") + field_checks.kube_object_meta(obj)
                + core_events.strict_create_causes(core))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        core_new, core_old = events_v1_to_core(new), events_v1_to_core(old)
        return (core_events.legacy_causes(core_new, "reportingController")
                + core_events.strict_update_causes(core_new, core_old))

    def finalize_on_read(self, rtype: ResourceType, obj: dict) -> None:
        _fill_v1_fields(obj)


def _regarding(field: str):
    return lambda o: str((o.get("regarding") or {}).get(field) or "")


# The core Event's field set (kapiserver.apis.core.events) read from an events.k8s.io/v1 Event:
# the labels this version's conversion reaches (not "source").
SELECTABLE_FIELDS = {
    **{f"involvedObject.{f}": _regarding(f) for f in core_events.OBJECT_REFERENCE_FIELDS},
    "reason": columns.text_at("reason"),
    "reportingComponent": columns.text_at("reportingController"),
    "type": columns.text_at("type"),
}
# pkg/apis/events/v1/conversion.go: this version's names for the core Event's fields
FIELD_LABELS = FieldLabelConversion(("reason", "type", "metadata.namespace", "metadata.name"), renamed={
    **{f"regarding.{f}": f"involvedObject.{f}" for f in core_events.OBJECT_REFERENCE_FIELDS},
    "reportingController": "reportingComponent",
})


def resource_type() -> ResourceType:
    return ResourceType(
        group=GROUP, version=VERSION, kind="Event", plural="events", singular="event", namespaced=True,
        strategy=EventsV1Strategy(), short_names=("ev",), schema_name=SCHEMA,
        ttl_seconds=core_events.TTL_SECONDS, storage_resource="events", storage_version="v1",
        convert_to_storage=events_v1_to_core, convert_from_storage=core_to_events_v1,
        selectable_fields=dict(SELECTABLE_FIELDS), field_labels=FIELD_LABELS,
        table_columns=core_events.event_columns(events_v1_to_core),
    )

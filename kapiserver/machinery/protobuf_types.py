"""Field tables of the protobuf messages kapiserver reads and writes.

Kubernetes' protobuf encoding numbers every field of every API type; a
message is useless without knowing, for each number, the JSON name, the wire
type and how Go's JSON encoding treats the Go field (pointer or not,
``omitempty``).  This module writes down those facts, by hand, for the kinds
real clients send as protobuf (``kubectl create namespace|configmap|secret|
serviceaccount``, leader election Leases, Events, Scale, DeleteOptions).
The codec itself lives in :mod:`kapiserver.machinery.protobuf`.

Tables list fields in Go struct order, which is also the key order of the
JSON form upstream would produce.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, NamedTuple

# Field kinds.  Scalars map to JSON scalars; the special messages of
# apimachinery (Time, MicroTime, FieldsV1, IntOrString, Quantity) map to the
# JSON forms their MarshalJSON methods give.
STRING = "string"
BOOL = "bool"
INT32 = "int32"
INT64 = "int64"
BYTES = "bytes"  # base64 in JSON
DOUBLE = "double"  # fixed64 on the wire; a JSON number (JSONSchemaProps' maximum, minimum, multipleOf)
MESSAGE = "message"
MAP_MESSAGE = "map<string,message>"  # values are ``Field.message`` (JSONSchemaProps' properties)
MAP_STRING = "map<string,string>"
MAP_BYTES = "map<string,bytes>"
MAP_QUANTITY = "map<string,Quantity>"  # ResourceList: {"cpu": "500m"}
MAP_TIME = "map<string,Time>"  # PodDisruptionBudget status.disruptedPods
MAP_STRING_LIST = "map<string,ExtraValue>"  # user "extra": {"scopes": ["a", "b"]}
TIME = "Time"  # "2006-01-02T15:04:05Z"
MICRO_TIME = "MicroTime"  # "2006-01-02T15:04:05.000000Z"
FIELDS_V1 = "FieldsV1"  # raw JSON object
INT_OR_STRING = "IntOrString"
QUANTITY = "Quantity"


class Field(NamedTuple):
    """One field of a message.

    ``pointer``: the Go field is a pointer (or the JSON has no zero value to
    drop): present on the wire means present in JSON, even when zero.
    ``omitempty``: a non-pointer zero value (``""``, 0, false, empty list or
    map) is left out of the JSON; without it the zero value is written.
    Non-pointer messages are always written (``{}``), like Go's encoder does
    for structs; a zero non-pointer Time is ``null``, or left out with
    ``omitzero``.
    """

    name: str
    number: int
    kind: str
    message: str = ""
    repeated: bool = False
    pointer: bool = False
    omitempty: bool = True
    omitzero: bool = False
    # Go embeds the struct with ``json:",inline"``: its fields sit in the parent's JSON
    inline: bool = False


class FieldTables(Mapping[str, tuple[Field, ...]]):
    """Message name -> its fields, read from each message's text table the first time the
    message is asked for (what ``tools/gen_protobuf_tables.py`` writes: a field a line,
    ``name number kind`` and what is not :class:`Field`'s default, ``message=<name>``,
    ``repeated``, ``pointer``, ``!omitempty``, ``omitzero``, ``inline``).

    The generated tables describe 465 messages; a server that shapes a few kinds for
    managedFields or encodes a few as protobuf reads a few dozen of them, and the text of
    the rest costs a quarter of their fields as tuples."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self._read: dict[str, tuple[Field, ...]] = {}

    def __getitem__(self, name: str) -> tuple[Field, ...]:
        fields = self._read.get(name)
        if fields is None:
            fields = self._read[name] = tuple(_read_field(line) for line in self.texts[name].splitlines())
        return fields

    def __contains__(self, name: object) -> bool:  # (without reading the table)
        return name in self.texts

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)


_FLAGS = {"repeated": ("repeated", True), "pointer": ("pointer", True), "!omitempty": ("omitempty", False),
          "omitzero": ("omitzero", True), "inline": ("inline", True)}


def _read_field(line: str) -> Field:
    name, number, kind, *flags = line.split()
    options: dict[str, Any] = {}
    for flag in flags:
        if flag.startswith("message="):
            options["message"] = flag[len("message="):]
        else:
            key, value = _FLAGS[flag]
            options[key] = value
    return Field(name, int(number), kind, **options)


def _f(name: str, number: int, kind: str, **kw) -> Field:
    return Field(name, number, kind, **kw)


def _msg(name: str, number: int, message: str, **kw) -> Field:
    return Field(name, number, MESSAGE, message=message, **kw)


def _list(item_message: str) -> tuple[Field, ...]:
    """The ``<Kind>List`` message: ListMeta and the items."""
    return (_msg("metadata", 1, "meta.ListMeta"),
            _msg("items", 2, item_message, repeated=True, omitempty=False))


OBJECT_META = _msg("metadata", 1, "meta.ObjectMeta")

MESSAGES: dict[str, tuple[Field, ...]] = {
    # ---------------------------------------------------------------- meta/v1
    "meta.ObjectMeta": (
        _f("name", 1, STRING),
        _f("generateName", 2, STRING),
        _f("namespace", 3, STRING),
        _f("selfLink", 4, STRING),
        _f("uid", 5, STRING),
        _f("resourceVersion", 6, STRING),
        _f("generation", 7, INT64),
        _f("creationTimestamp", 8, TIME, omitzero=True),
        _f("deletionTimestamp", 9, TIME, pointer=True),
        _f("deletionGracePeriodSeconds", 10, INT64, pointer=True),
        _f("labels", 11, MAP_STRING),
        _f("annotations", 12, MAP_STRING),
        _msg("ownerReferences", 13, "meta.OwnerReference", repeated=True),
        _f("finalizers", 14, STRING, repeated=True),
        _msg("managedFields", 17, "meta.ManagedFieldsEntry", repeated=True),
    ),
    "meta.OwnerReference": (
        _f("apiVersion", 5, STRING, omitempty=False),
        _f("kind", 1, STRING, omitempty=False),
        _f("name", 3, STRING, omitempty=False),
        _f("uid", 4, STRING, omitempty=False),
        _f("controller", 6, BOOL, pointer=True),
        _f("blockOwnerDeletion", 7, BOOL, pointer=True),
    ),
    "meta.ManagedFieldsEntry": (
        _f("manager", 1, STRING),
        _f("operation", 2, STRING),
        _f("apiVersion", 3, STRING),
        _f("time", 4, TIME, pointer=True),
        _f("fieldsType", 6, STRING),
        _f("fieldsV1", 7, FIELDS_V1, pointer=True),
        _f("subresource", 8, STRING),
    ),
    "meta.ListMeta": (
        _f("selfLink", 1, STRING),
        _f("resourceVersion", 2, STRING),
        _f("continue", 3, STRING),
        _f("remainingItemCount", 4, INT64, pointer=True),
    ),
    "meta.LabelSelector": (
        _f("matchLabels", 1, MAP_STRING),
        _msg("matchExpressions", 2, "meta.LabelSelectorRequirement", repeated=True),
    ),
    "meta.LabelSelectorRequirement": (
        _f("key", 1, STRING, omitempty=False),
        _f("operator", 2, STRING, omitempty=False),
        _f("values", 3, STRING, repeated=True),
    ),
    "meta.DeleteOptions": (
        _f("gracePeriodSeconds", 1, INT64, pointer=True),
        _msg("preconditions", 2, "meta.Preconditions", pointer=True),
        _f("orphanDependents", 3, BOOL, pointer=True),
        _f("propagationPolicy", 4, STRING, pointer=True),
        _f("dryRun", 5, STRING, repeated=True),
        _f("ignoreStoreReadErrorWithClusterBreakingPotential", 6, BOOL, pointer=True),
    ),
    "meta.Preconditions": (
        _f("uid", 1, STRING, pointer=True),
        _f("resourceVersion", 2, STRING, pointer=True),
    ),
    "meta.Status": (
        _msg("metadata", 1, "meta.ListMeta"),
        _f("status", 2, STRING),
        _f("message", 3, STRING),
        _f("reason", 4, STRING),
        _msg("details", 5, "meta.StatusDetails", pointer=True),
        _f("code", 6, INT32),
    ),
    "meta.StatusDetails": (
        _f("name", 1, STRING),
        _f("group", 2, STRING),
        _f("kind", 3, STRING),
        _f("uid", 6, STRING),
        _msg("causes", 4, "meta.StatusCause", repeated=True),
        _f("retryAfterSeconds", 5, INT32),
    ),
    "meta.StatusCause": (
        _f("reason", 1, STRING),
        _f("message", 2, STRING),
        _f("field", 3, STRING),
    ),
    "meta.PartialObjectMetadata": (OBJECT_META,),
    "meta.PartialObjectMetadataList": _list("meta.PartialObjectMetadata"),
    # ---------------------------------------------------------------- core/v1
    "core.Namespace": (
        OBJECT_META,
        _msg("spec", 2, "core.NamespaceSpec"),
        _msg("status", 3, "core.NamespaceStatus"),
    ),
    "core.NamespaceSpec": (
        _f("finalizers", 1, STRING, repeated=True),
    ),
    "core.NamespaceStatus": (
        _f("phase", 1, STRING),
        _msg("conditions", 2, "core.NamespaceCondition", repeated=True),
    ),
    "core.NamespaceCondition": (
        _f("type", 1, STRING, omitempty=False),
        _f("status", 2, STRING, omitempty=False),
        _f("lastTransitionTime", 4, TIME),
        _f("reason", 5, STRING),
        _f("message", 6, STRING),
    ),
    "core.ConfigMap": (
        OBJECT_META,
        _f("immutable", 4, BOOL, pointer=True),
        _f("data", 2, MAP_STRING),
        _f("binaryData", 3, MAP_BYTES),
    ),
    "core.Secret": (
        OBJECT_META,
        _f("immutable", 5, BOOL, pointer=True),
        _f("data", 2, MAP_BYTES),
        _f("stringData", 4, MAP_STRING),
        _f("type", 3, STRING),
    ),
    "core.ServiceAccount": (
        OBJECT_META,
        _msg("secrets", 2, "core.ObjectReference", repeated=True),
        _msg("imagePullSecrets", 3, "core.LocalObjectReference", repeated=True),
        _f("automountServiceAccountToken", 4, BOOL, pointer=True),
    ),
    "core.ObjectReference": (
        _f("kind", 1, STRING),
        _f("namespace", 2, STRING),
        _f("name", 3, STRING),
        _f("uid", 4, STRING),
        _f("apiVersion", 5, STRING),
        _f("resourceVersion", 6, STRING),
        _f("fieldPath", 7, STRING),
    ),
    "core.LocalObjectReference": (
        _f("name", 1, STRING),
    ),
    "core.Event": (
        OBJECT_META,
        _msg("involvedObject", 2, "core.ObjectReference"),
        _f("reason", 3, STRING),
        _f("message", 4, STRING),
        _msg("source", 5, "core.EventSource"),
        _f("firstTimestamp", 6, TIME),
        _f("lastTimestamp", 7, TIME),
        _f("count", 8, INT32),
        _f("type", 9, STRING),
        _f("eventTime", 10, MICRO_TIME),
        _msg("series", 11, "core.EventSeries", pointer=True),
        _f("action", 12, STRING),
        _msg("related", 13, "core.ObjectReference", pointer=True),
        _f("reportingComponent", 14, STRING, omitempty=False),
        _f("reportingInstance", 15, STRING, omitempty=False),
    ),
    "core.EventSource": (
        _f("component", 1, STRING),
        _f("host", 2, STRING),
    ),
    "core.EventSeries": (
        _f("count", 1, INT32),
        _f("lastObservedTime", 2, MICRO_TIME),
    ),
    "core.NamespaceList": _list("core.Namespace"),
    "core.ConfigMapList": _list("core.ConfigMap"),
    "core.SecretList": _list("core.Secret"),
    "core.ServiceAccountList": _list("core.ServiceAccount"),
    "core.EventList": _list("core.Event"),
    # -------------------------------------------------------- coordination/v1
    "coordination.Lease": (
        OBJECT_META,
        _msg("spec", 2, "coordination.LeaseSpec"),
    ),
    "coordination.LeaseSpec": (
        _f("holderIdentity", 1, STRING, pointer=True),
        _f("leaseDurationSeconds", 2, INT32, pointer=True),
        _f("acquireTime", 3, MICRO_TIME, pointer=True),
        _f("renewTime", 4, MICRO_TIME, pointer=True),
        _f("leaseTransitions", 5, INT32, pointer=True),
        _f("strategy", 6, STRING, pointer=True),
        _f("preferredHolder", 7, STRING, pointer=True),
    ),
    "coordination.LeaseList": _list("coordination.Lease"),
    # -------------------------------------------------------------- events/v1
    "events.Event": (
        OBJECT_META,
        _f("eventTime", 2, MICRO_TIME, omitempty=False),
        _msg("series", 3, "events.EventSeries", pointer=True),
        _f("reportingController", 4, STRING),
        _f("reportingInstance", 5, STRING),
        _f("action", 6, STRING),
        _f("reason", 7, STRING),
        _msg("regarding", 8, "core.ObjectReference"),
        _msg("related", 9, "core.ObjectReference", pointer=True),
        _f("note", 10, STRING),
        _f("type", 11, STRING),
        _msg("deprecatedSource", 12, "core.EventSource"),
        _f("deprecatedFirstTimestamp", 13, TIME),
        _f("deprecatedLastTimestamp", 14, TIME),
        _f("deprecatedCount", 15, INT32),
    ),
    "events.EventSeries": (
        _f("count", 1, INT32, omitempty=False),
        _f("lastObservedTime", 2, MICRO_TIME, omitempty=False),
    ),
    "events.EventList": _list("events.Event"),
    # --------------------------------------------------------- autoscaling/v1
    "autoscaling.Scale": (
        OBJECT_META,
        _msg("spec", 2, "autoscaling.ScaleSpec"),
        _msg("status", 3, "autoscaling.ScaleStatus"),
    ),
    "autoscaling.ScaleSpec": (
        _f("replicas", 1, INT32),
    ),
    "autoscaling.ScaleStatus": (
        _f("replicas", 1, INT32, omitempty=False),
        _f("selector", 2, STRING),
    ),
}

# (group, version, kind) of a top-level object -> its message.
KINDS: dict[tuple[str, str, str], str] = {
    ("", "v1", "Namespace"): "core.Namespace",
    ("", "v1", "NamespaceList"): "core.NamespaceList",
    ("", "v1", "ConfigMap"): "core.ConfigMap",
    ("", "v1", "ConfigMapList"): "core.ConfigMapList",
    ("", "v1", "Secret"): "core.Secret",
    ("", "v1", "SecretList"): "core.SecretList",
    ("", "v1", "ServiceAccount"): "core.ServiceAccount",
    ("", "v1", "ServiceAccountList"): "core.ServiceAccountList",
    ("", "v1", "Event"): "core.Event",
    ("", "v1", "EventList"): "core.EventList",
    ("", "v1", "Status"): "meta.Status",
    ("meta.k8s.io", "v1", "Status"): "meta.Status",
    ("meta.k8s.io", "v1", "PartialObjectMetadata"): "meta.PartialObjectMetadata",
    ("meta.k8s.io", "v1", "PartialObjectMetadataList"): "meta.PartialObjectMetadataList",
    # v1beta1's PartialObjectMetadata is v1's type (its list is generated: other field numbers)
    ("meta.k8s.io", "v1beta1", "PartialObjectMetadata"): "meta.PartialObjectMetadata",
    ("coordination.k8s.io", "v1", "Lease"): "coordination.Lease",
    ("coordination.k8s.io", "v1", "LeaseList"): "coordination.LeaseList",
    ("events.k8s.io", "v1", "Event"): "events.Event",
    ("events.k8s.io", "v1", "EventList"): "events.EventList",
    ("autoscaling", "v1", "Scale"): "autoscaling.Scale",
}

# Kinds registered in every group version (clients send DeleteOptions with the
# group version of the resource they delete).
ANY_GROUP_VERSION_KINDS: dict[str, str] = {
    "DeleteOptions": "meta.DeleteOptions",
}


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` -> ``("apps", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version

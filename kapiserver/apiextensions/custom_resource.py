"""Custom resources: the ResourceTypes and Strategy an Established CRD is served with.

Each served version of a CRD becomes one :class:`ResourceType` sharing the
storage key ``/<group>/<plural>/``, so the generic Store, handlers, discovery,
OpenAPI and Table output serve custom resources exactly like built-in kinds.
The strategy prunes unknown fields and applies schema defaults on every
write (and defaults again on read, as upstream does for defaults added to a
schema later), validates against the version's OpenAPI schema and its CEL
rules (off the reactor thread for big objects), and bumps
``metadata.generation`` the way upstream does for custom resources.
Versions are converted by relabelling apiVersion (strategy None) or through
the CRD's conversion webhook (strategy Webhook, :mod:`.conversion`, wired as
the ResourceType's asynchronous conversion hooks).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import orjson
from twisted.internet import threads

from kapiserver.apiextensions import crd_validation
from kapiserver.apiextensions.cel.rules import CompiledRules, compile_rules, evaluate
from kapiserver.apiextensions.schema.defaulting import apply_defaults
from kapiserver.apiextensions.schema.pruning import prune
from kapiserver.apiextensions.schema.validation import validate as validate_schema
from kapiserver.apiextensions.state import CRDState
from kapiserver.apis import columns
from kapiserver.machinery import errors, jsonpath
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.registry.resource_type import ResourceType, ScaleSubresource, Strategy, TableColumn

# Objects whose JSON is at least this big have their CEL rules evaluated in a thread.
CEL_THREAD_THRESHOLD_BYTES = 16 * 1024


@dataclass
class CustomResourceStrategy(Strategy):
    tracks_generation = True
    status_fixed_metadata = None  # a status write changes only status (upstream's statusStrategy)
    schema: Optional[dict] = None
    rules: Optional[CompiledRules] = None
    has_status_subresource: bool = False
    state: CRDState = field(default_factory=lambda: CRDState(""))

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        if self.state.terminating:
            raise errors.StatusError(405, "MethodNotAllowed",
                                     "create not allowed while custom resource definition is terminating")
        super().prepare_for_create(rtype, obj)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        """Pruning and defaulting, as upstream's decoder does for every write."""
        if self.schema is not None:
            prune(obj, self.schema)
        apply_defaults(obj, self.schema)

    def finalize_on_read(self, rtype: ResourceType, obj: dict) -> None:
        apply_defaults(obj, self.schema)

    def validate(self, rtype: ResourceType, obj: dict) -> list[Cause]:
        return validate_schema(obj, self.schema)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[Cause]:
        return validate_schema(new, self.schema)

    async def validate_async(self, rtype: ResourceType, obj: dict, old: Optional[dict]) -> list[Cause]:
        """CEL rules; in a thread when the object is big, so the reactor keeps serving."""
        if self.rules is None or self.rules.root is None:
            return []
        if len(orjson.dumps(obj)) >= CEL_THREAD_THRESHOLD_BYTES:
            return await threads.deferToThread(evaluate, self.rules, copy.deepcopy(obj), copy.deepcopy(old))
        return evaluate(self.rules, obj, old)

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        """Without a status subresource a status change is a spec change too (upstream's CR rule)."""
        if self.has_status_subresource:
            return super().generation_changes(rtype, new, old)

        def content(o: dict) -> dict:
            return {k: v for k, v in o.items() if k not in ("metadata", "apiVersion", "kind")}
        return content(new) != content(old)


# ------------------------------------------------------------------ printing and fields

def _first_values(obj: dict, path: str) -> list:
    try:
        return jsonpath.evaluate(obj, path)
    except jsonpath.JSONPathError:
        return []


def _cell_getter(col_type: str, path: str) -> Callable[[dict], Any]:
    def cell(obj: dict) -> Any:
        values = _first_values(obj, path)
        if not values:
            return None
        if len(values) == 1:
            value = values[0]
            if col_type == "date":  # upstream prints dates as ages ("5m"), keeping the column type
                return columns.since(value) if isinstance(value, str) else None
            if col_type == "integer" and isinstance(value, int) and not isinstance(value, bool):
                return value
            if col_type == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
                return value
            if col_type == "boolean" and isinstance(value, bool):
                return value
            return jsonpath.format_value(value)
        return " ".join(jsonpath.format_value(v) for v in values)
    return cell


def table_columns(version: dict) -> tuple[TableColumn, ...]:
    """NAME, then the version's additionalPrinterColumns (AGE when it declares none)."""
    declared = version.get("additionalPrinterColumns")
    if declared is None:
        declared = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    cols = [columns.name_column()]
    for col in declared:
        cols.append(TableColumn(col["name"], col.get("type", "string"), _cell_getter(col.get("type", ""),
                                                                                     col["jsonPath"]),
                                format=col.get("format", ""), description=col.get("description", ""),
                                priority=int(col.get("priority") or 0)))
    return tuple(cols)


def _field_getter(path: str) -> Callable[[dict], str]:
    def get(obj: dict) -> str:
        values = _first_values(obj, path)
        if not values or values[0] is None:
            return ""
        return jsonpath.format_value(values[0])
    return get


def selectable_fields(version: dict) -> dict[str, Callable[[dict], str]]:
    """``spec.type`` → getter, for each selectableFields entry."""
    return {f["jsonPath"].lstrip("."): _field_getter(f["jsonPath"]) for f in version.get("selectableFields") or ()}


def field_labels(version: dict, namespaced: bool) -> FieldLabelConversion:
    """The labels a selector may use (upstream's crConverter.ConvertFieldLabel): the name, the
    namespace of a namespaced kind, and the version's selectableFields."""
    base = ("metadata.name", "metadata.namespace") if namespaced else ("metadata.name",)
    return FieldLabelConversion((*base, *selectable_fields(version)))


# ------------------------------------------------------------------ versions

def _api_version_setter(api_version: str) -> Callable[[dict], dict]:
    def convert(obj: dict) -> dict:
        out = dict(obj)
        out["apiVersion"] = api_version
        return out
    return convert


def resource_types(crd: dict, state: Optional[CRDState] = None) -> list[ResourceType]:
    """The ResourceTypes serving every served version of ``crd`` (named by its accepted names)."""
    spec = crd.get("spec") or {}
    accepted = (crd.get("status") or {}).get("acceptedNames") or {}
    group = spec["group"]
    storage = crd_validation.storage_version(crd)
    webhook = (spec.get("conversion") or {}).get("strategy") == "Webhook"
    # one webhook client per installed CRD, shared by its versions
    converter = None
    if webhook:
        # the webhook's HTTP client loads with the first CRD converted by one: see kapiserver/machinery/go_http_client.py
        from kapiserver.apiextensions.conversion import WebhookConverter
        converter = WebhookConverter(crd)
    name = crd["metadata"]["name"]
    state = state or CRDState(name)
    kind = accepted.get("kind") or spec["names"]["kind"]
    out = []
    for version in spec.get("versions") or ():
        if not version.get("served"):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        subresources = version.get("subresources") or {}
        has_status = "status" in subresources
        scale = subresources.get("scale")
        strategy = CustomResourceStrategy(
            schema=schema, rules=compile_rules(schema) if schema else None, has_status_subresource=has_status,
            state=state)
        to_storage = from_storage = to_storage_async = from_storage_async = None
        if converter is not None:
            # every version, the storage one too: objects stored before a storage
            # version change are converted on read (objects already in the wanted
            # version are never sent to the webhook)
            from_storage_async = converter.hook(f"{group}/{version['name']}", on_write=False)
            if version["name"] != storage:
                to_storage_async = converter.hook(f"{group}/{storage}", on_write=True)
        elif version["name"] != storage:
            to_storage = _api_version_setter(f"{group}/{storage}")
            from_storage = _api_version_setter(f"{group}/{version['name']}")
        deprecated = bool(version.get("deprecated"))
        out.append(ResourceType(
            group=group, version=version["name"], kind=kind, plural=accepted.get("plural") or spec["names"]["plural"],
            singular=accepted.get("singular") or spec["names"].get("singular") or kind.lower(),
            namespaced=spec.get("scope") == "Namespaced", strategy=strategy,
            list_kind=accepted.get("listKind") or spec["names"].get("listKind") or kind + "List",
            short_names=tuple(accepted.get("shortNames") or ()), categories=tuple(accepted.get("categories") or ()),
            has_status=has_status,
            scale=ScaleSubresource(scale["specReplicasPath"], scale["statusReplicasPath"],
                                   scale.get("labelSelectorPath") or "") if scale is not None else None,
            schema=schema, table_columns=table_columns(version), selectable_fields=selectable_fields(version),
            field_labels=field_labels(version, spec.get("scope") == "Namespaced"),
            is_crd=True, strategic_merge_patch=False, return_deleted_object=True,
            convert_to_storage=to_storage, convert_from_storage=from_storage,
            convert_to_storage_async=to_storage_async, convert_from_storage_async=from_storage_async,
            deprecated=deprecated, storage_version=f"{group}/{storage}",
            deprecation_warning=(version.get("deprecationWarning")
                                 or f"{group}/{version['name']} {kind} is deprecated") if deprecated else "",
        ))
    return out

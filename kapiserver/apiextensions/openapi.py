"""A custom resource kind's schema as ``/openapi/v2`` and ``/openapi/v3`` publish it.

Upstream's CRD OpenAPI builder (apiextensions-apiserver ``controller/openapi/builder``),
whose rules clients see (kubectl's validation and ``explain``):

* a version without a schema, with a schema using a type OpenAPI does not
  know, or a non-structural one publishes a bare ``{type: object}``; so does
  every version in v2 when the schema root preserves unknown fields;
* otherwise the structural part of the schema (``example``, ``externalDocs``,
  ``$schema`` and other keywords a structural schema has no place for are
  dropped, as are false booleans), with ``x-kubernetes-int-or-string`` unfolded
  into ``anyOf: [{type: integer}, {type: string}]``, and the ``apiVersion``,
  ``kind`` and ``metadata`` properties added at the root and to every embedded
  resource;
* v2 can express less (upstream's ToStructuralOpenAPIV2): junctors
  (``allOf``/``anyOf``/``oneOf``/``not``) are dropped; a nullable node loses
  its type, items and properties, and its name in its parent's ``required``;
  a node preserving unknown fields loses its items and properties, and its
  type ``object``; an array without items loses its type.

References are in v2 form (``#/definitions/...``); the v3 document rewrites them.
"""
from __future__ import annotations

import copy
from typing import Any, Optional

from kapiserver.apiextensions.schema.structural import validate_structural

OBJECT_META_REF = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")

# what a structural schema keeps of a node (k8s.io/apiextensions-apiserver's Structural)
_GENERIC = ("type", "description", "title", "default")
_VALUE_VALIDATION = ("format", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
                     "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "enum",
                     "maxProperties", "minProperties", "required")
_EXTENSIONS = ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
               "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
               "x-kubernetes-map-type", "x-kubernetes-validations")
_FALSE_IS_ABSENT = ("nullable", "exclusiveMaximum", "exclusiveMinimum", "uniqueItems",
                    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                    "x-kubernetes-int-or-string")
_JUNCTORS = ("allOf", "anyOf", "oneOf")

_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
# what upstream says of the properties it adds to embedded resources
EMBEDDED_API_VERSION = ("apiVersion defines the versioned schema of this representation of an object. More info: "
                        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources")
EMBEDDED_KIND = ("kind is a string value representing the type of this object. In CamelCase. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")


class TypeMetaDocs:
    """The descriptions of the properties added at the root (TypeMeta's and PartialObjectMetadata's)."""

    def __init__(self, api_version: str, kind: str, metadata: str) -> None:
        self.api_version = api_version
        self.kind = kind
        self.metadata = metadata


def has_invalid_types(schema: Any) -> bool:
    """upstream's SchemaHasInvalidTypes: some node names a type OpenAPI v3 does not have."""
    if isinstance(schema, list):
        return any(has_invalid_types(x) for x in schema)
    if not isinstance(schema, dict):
        return False
    t = schema.get("type")
    if isinstance(t, str) and t and t not in OPENAPI_TYPES:
        return True
    return any(has_invalid_types(v) for k, v in schema.items() if isinstance(v, (dict, list)) and k not in
               ("default", "enum", "example", "x-kubernetes-validations", "x-kubernetes-list-map-keys"))


def _structural(node: Any, nested: bool = False) -> dict:
    """The node as a structural schema holds it (upstream's NewStructural, then ToKubeOpenAPI)."""
    if not isinstance(node, dict):
        return {}
    out: dict[str, Any] = {}
    keep = (*_VALUE_VALIDATION, "x-kubernetes-validations") if nested else \
        (*_GENERIC, "nullable", *_VALUE_VALIDATION, *_EXTENSIONS)
    for key in keep:
        if key not in node:
            continue
        value = node[key]
        if key in _FALSE_IS_ABSENT and value is not True:
            continue
        if value is None or (value == "" and key != "default") or (key in ("required", "enum", "x-kubernetes-list-map-keys", "x-kubernetes-validations")
                             and value == []):
            continue
        out[key] = copy.deepcopy(value)
    if nested and "type" in node:  # int-or-string branches name their type
        out["type"] = node["type"]
    if isinstance(node.get("items"), dict):
        out["items"] = _structural(node["items"], nested)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: _structural(v, nested) for k, v in node["properties"].items()}
    additional = node.get("additionalProperties")
    if nested:
        pass  # value validations in junctors publish no additionalProperties (upstream's toKubeOpenAPI)
    elif isinstance(additional, dict):
        out["additionalProperties"] = _structural(additional)
    elif isinstance(additional, bool):
        out["additionalProperties"] = additional
    for junctor in _JUNCTORS:
        branches = node.get(junctor)
        if isinstance(branches, list) and branches:
            out[junctor] = [_structural(b, True) for b in branches]
    if isinstance(node.get("not"), dict):
        out["not"] = _structural(node["not"], True)
    return out


def _is_int_or_string_any_of(branches: Any) -> bool:
    return (isinstance(branches, list) and len(branches) == 2
            and all(isinstance(b, dict) for b in branches)
            and branches[0].get("type") == "integer" and branches[1].get("type") == "string"
            and all(set(b) == {"type"} for b in branches))


def _unfold(node: dict) -> None:
    """upstream's Unfold: an int-or-string node gets the anyOf its values must match."""
    if node.get("x-kubernetes-int-or-string"):
        all_of = node.get("allOf") or []
        if not (_is_int_or_string_any_of(node.get("anyOf"))
                or (all_of and _is_int_or_string_any_of(all_of[0].get("anyOf")))):
            if not node.get("anyOf"):
                node["anyOf"] = copy.deepcopy(_INT_OR_STRING_ANY_OF)
            else:
                node["allOf"] = [{"anyOf": copy.deepcopy(_INT_OR_STRING_ANY_OF)}, *all_of]
    _children(node, _unfold)


def _children(node: dict, visit) -> None:
    if isinstance(node.get("items"), dict):
        visit(node["items"])
    for prop in (node.get("properties") or {}).values():
        visit(prop)
    if isinstance(node.get("additionalProperties"), dict):
        visit(node["additionalProperties"])


def _to_v2(node: dict) -> None:
    """upstream's ToStructuralOpenAPIV2, parents before children."""
    for junctor in (*_JUNCTORS, "not"):
        node.pop(junctor, None)
    if node.get("nullable"):
        node.pop("type", None)
        node.pop("nullable", None)
        node.pop("items", None)
        node.pop("properties", None)
    if node.get("x-kubernetes-preserve-unknown-fields"):
        node.pop("items", None)
        node.pop("properties", None)
    if "items" not in node and node.get("type") == "array":
        node.pop("type")
    if node.get("x-kubernetes-preserve-unknown-fields") and node.get("type") == "object":
        node.pop("type")
    required = node.get("required")
    if required:
        nullable = {name for name, prop in (node.get("properties") or {}).items() if prop.get("nullable")}
        kept = [name for name in required if name not in nullable]
        if kept:
            node["required"] = kept
        else:
            node.pop("required")
    additional = node.get("additionalProperties")
    if isinstance(additional, dict) and additional.get("nullable"):
        node.pop("required", None)
    _children(node, _to_v2)


def _add_embedded_properties(node: dict, v2: bool, docs: TypeMetaDocs) -> None:
    _children(node, lambda child: _add_embedded_properties(child, v2, docs))
    if v2 and node.get("x-kubernetes-preserve-unknown-fields"):
        return
    if node.get("x-kubernetes-embedded-resource"):
        props = node.setdefault("properties", {})
        props["apiVersion"] = {"description": EMBEDDED_API_VERSION, "type": "string"}
        props["kind"] = {"description": EMBEDDED_KIND, "type": "string"}
        props["metadata"] = {"$ref": OBJECT_META_REF, "description": docs.metadata}
        required = node.setdefault("required", [])
        for name in ("kind", "apiVersion"):
            if name not in required:
                required.append(name)


def publishable(schema: Optional[dict]) -> Optional[dict]:
    """The structural part of a version's schema, or None when upstream publishes none of it."""
    if not isinstance(schema, dict) or has_invalid_types(schema) or validate_structural(schema):
        return None
    return _structural(schema)


def kind_schema(schema: Optional[dict], docs: TypeMetaDocs, *, v2: bool) -> dict:
    """The published schema of the kind (without its ``x-kubernetes-group-version-kind``)."""
    structural = publishable(schema)
    if structural is None or (v2 and structural.get("x-kubernetes-preserve-unknown-fields")):
        return {"type": "object"}
    _unfold(structural)
    if v2:
        _to_v2(structural)
    props = structural.setdefault("properties", {})
    props["metadata"] = {"$ref": OBJECT_META_REF, "description": docs.metadata}
    props["apiVersion"] = {"description": docs.api_version, "type": "string"}
    props["kind"] = {"description": docs.kind, "type": "string"}
    _add_embedded_properties(structural, v2, docs)
    return structural

"""Is a CRD schema structural?  The rules apiextensions-apiserver enforces for v1.

A structural schema specifies a type for every field (except int-or-string
and preserve-unknown-fields nodes), keeps logical junctors (allOf, anyOf,
oneOf, not) to pure value validations, restricts root ``metadata`` to name
and generateName, and uses only the OpenAPI subset CRDs support.  Defaults
must validate against their schema and survive pruning.
"""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.machinery import errors, regex
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.schema_paths import child, index, key

from .pruning import prune
from .validation import validate

_UNSUPPORTED = {
    "$ref": "$ref is not supported",
    "definitions": "definitions are not supported",
    "patternProperties": "patternProperties is not supported",
    "dependencies": "dependencies is not supported",
    "additionalItems": "additionalItems is not supported",
    "id": "id is not supported",
}
# What a junctor (allOf/anyOf/oneOf/not) branch must leave empty.
_JUNCTOR_EMPTY = ("type", "default", "additionalProperties", "description", "title",
                  "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource", "x-kubernetes-list-type",
                  "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-validations")
_JUNCTOR_FALSE = ("nullable", "x-kubernetes-preserve-unknown-fields")
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_SCALARS = ("string", "integer", "number", "boolean")
_LIST_TYPES = ("atomic", "set", "map")
_MAP_TYPES = ("granular", "atomic")
_ROOT, _PROPERTY, _ITEMS = "root", "property", "items"


def validate_structural(schema: Any, path: str = "") -> list[Cause]:
    """Every reason ``schema`` is not a structural CRD schema (empty list: it is)."""
    out: list[Cause] = []
    if not isinstance(schema, dict):
        out.append(errors.field_required(path, "must be an object"))
        return out
    _node(schema, path, _ROOT, False, out)
    _root_metadata(schema, path, out)
    return out


def violations(schema: Any, path: str = "") -> list[str]:
    """The same problems as ``path: message`` lines (NonStructuralSchema condition text)."""
    return [f"{c.field}: {c.message}" if c.field else c.message for c in validate_structural(schema, path)]


def _node(s: dict, path: str, level: str, in_junctor: bool, out: list[Cause]) -> None:
    for name, msg in _UNSUPPORTED.items():
        if name in s:
            out.append(errors.field_forbidden(child(path, name), msg))
    if s.get("uniqueItems") is True:
        out.append(errors.field_forbidden(child(path, "uniqueItems"),
                                          "uniqueItems cannot be set to true since the runtime complexity "
                                          "becomes quadratic"))
    if s.get("additionalProperties") is False:
        out.append(errors.field_forbidden(child(path, "additionalProperties"),
                                          "additionalProperties cannot be set to false"))
    if "properties" in s and isinstance(s.get("additionalProperties"), dict):
        out.append(errors.field_forbidden(child(path, "additionalProperties"),
                                          "additionalProperties and properties are mutual exclusive"))
    if isinstance(s.get("items"), list):
        out.append(errors.field_forbidden(child(path, "items"), "items must be a schema object and not an array"))
    pattern = s.get("pattern")
    if isinstance(pattern, str):
        # upstream compiles patterns with Go's regexp (RE2): what it refuses never becomes a schema
        problem = regex.problem(pattern)
        if problem is not None:
            out.append(errors.field_invalid(child(path, "pattern"), pattern,
                                            f"must be a valid regular expression, but isn't: {problem}"))

    if in_junctor:
        for name in _JUNCTOR_EMPTY:
            if name in s:
                out.append(errors.field_forbidden(child(path, name), "must be empty to be structural"))
        for name in _JUNCTOR_FALSE:
            if s.get(name):
                out.append(errors.field_forbidden(child(path, name), "must be false to be structural"))
    else:
        _types(s, path, level, out)
        _extensions(s, path, out)
        if "default" in s:
            _default(s, path, out)

    for name, sub in (s.get("properties") or {}).items():
        if isinstance(sub, dict):
            _node(sub, key(child(path, "properties"), name), _PROPERTY, in_junctor, out)
    if isinstance(s.get("additionalProperties"), dict):
        _node(s["additionalProperties"], child(path, "additionalProperties"), _PROPERTY, in_junctor, out)
    if isinstance(s.get("items"), dict):
        _node(s["items"], child(path, "items"), _ITEMS, in_junctor, out)
    for junctor in _JUNCTORS:
        for i, sub in enumerate(s.get(junctor) or ()):
            if isinstance(sub, dict) and not _int_or_string_branch(s, junctor, sub):
                _node(sub, index(child(path, junctor), i), level, True, out)
    if isinstance(s.get("not"), dict):
        _node(s["not"], child(path, "not"), level, True, out)


def _int_or_string_branch(s: dict, junctor: str, sub: dict) -> bool:
    """``anyOf: [{type: integer}, {type: string}]`` is how int-or-string is spelled; upstream allows it."""
    return bool(s.get("x-kubernetes-int-or-string")) and junctor == "anyOf" and \
        sub.get("type") in ("integer", "string") and set(sub) <= {"type", "format", "pattern", "maxLength",
                                                                   "minLength", "minimum", "maximum", "enum"}


def _types(s: dict, path: str, level: str, out: list[Cause]) -> None:
    typ = s.get("type", "")
    type_path = child(path, "type")
    if typ and typ not in ("object", "array") + _SCALARS:
        out.append(errors.field_not_supported(type_path, typ, ["array", "boolean", "integer", "number", "object",
                                                               "string"]))
    if level == _ROOT:
        if not typ:
            out.append(errors.field_required(type_path, "must not be empty at the root"))
        elif typ != "object":
            out.append(errors.field_invalid(type_path, typ, "must be object at the root"))
        if s.get("nullable"):
            out.append(errors.field_forbidden(child(path, "nullable"), "must be false at the root"))
    elif not typ and not s.get("x-kubernetes-int-or-string") and not s.get("x-kubernetes-preserve-unknown-fields"):
        detail = "must not be empty for specified array items" if level == _ITEMS else \
            "must not be empty for specified object fields"
        out.append(errors.field_required(type_path, detail))
    if s.get("x-kubernetes-int-or-string") and typ:
        out.append(errors.field_invalid(type_path, typ, "must be empty if x-kubernetes-int-or-string is true"))
    if s.get("x-kubernetes-embedded-resource"):
        if typ != "object":
            out.append(errors.field_invalid(type_path, typ, "must be object if x-kubernetes-embedded-resource is true"))
        if not s.get("properties") and not s.get("x-kubernetes-preserve-unknown-fields"):
            out.append(errors.field_required(child(path, "properties"),
                                             "must not be empty if x-kubernetes-embedded-resource is true "
                                             "without x-kubernetes-preserve-unknown-fields"))
    if typ == "array" and "items" not in s:
        out.append(errors.field_required(child(path, "items"), "must be specified"))


def _extensions(s: dict, path: str, out: list[Cause]) -> None:
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        out.append(errors.field_invalid(child(path, "x-kubernetes-preserve-unknown-fields"), False,
                                        "must be true or undefined"))
    list_type = s.get("x-kubernetes-list-type")
    keys = s.get("x-kubernetes-list-map-keys")
    typ = s.get("type", "")
    if list_type is not None:
        lt_path = child(path, "x-kubernetes-list-type")
        if list_type not in _LIST_TYPES:
            out.append(errors.field_not_supported(lt_path, list_type, list(_LIST_TYPES)))
        elif typ != "array":
            out.append(errors.field_invalid(lt_path, list_type, "must only be used on type array"))
    if keys:
        if list_type != "map":
            out.append(errors.field_invalid(child(path, "x-kubernetes-list-map-keys"), keys,
                                            "must be empty if x-kubernetes-list-type is not map"))
    if list_type == "map" and typ == "array":
        found_items = s.get("items")
        items: dict = found_items if isinstance(found_items, dict) else {}
        if not keys:
            out.append(errors.field_required(child(path, "x-kubernetes-list-map-keys"),
                                             "must not be empty if x-kubernetes-list-type is map"))
        if items.get("type") != "object":
            out.append(errors.field_invalid(child(child(path, "items"), "type"), items.get("type", ""),
                                            "must be object if parent array's x-kubernetes-list-type is map"))
        else:
            props = items.get("properties") or {}
            for i, k in enumerate(keys or ()):
                kp = index(child(path, "x-kubernetes-list-map-keys"), i)
                if k not in props:
                    out.append(errors.field_invalid(kp, k, "entries must all be names of item properties"))
                elif props[k].get("type") not in _SCALARS:
                    out.append(errors.field_invalid(kp, k, "must be a scalar type if parent array's "
                                                           "x-kubernetes-list-type is map"))
                elif k not in (items.get("required") or ()) and "default" not in props[k]:
                    out.append(errors.field_required(kp, "all map keys must be required or have a default value"))
    if list_type == "set" and typ == "array":
        found_items = s.get("items")
        items = found_items if isinstance(found_items, dict) else {}
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            out.append(errors.field_invalid(child(child(path, "items"), "x-kubernetes-map-type"),
                                            items.get("x-kubernetes-map-type"),
                                            "must be atomic as item of a list with x-kubernetes-list-type=set"))
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None:
        mt_path = child(path, "x-kubernetes-map-type")
        if map_type not in _MAP_TYPES:
            out.append(errors.field_not_supported(mt_path, map_type, list(_MAP_TYPES)))
        elif typ != "object":
            out.append(errors.field_invalid(mt_path, map_type, "must only be used if type is object"))


def _default(s: dict, path: str, out: list[Cause]) -> None:
    default = s["default"]
    dpath = child(path, "default")
    if default is None:
        if not s.get("nullable"):
            out.append(errors.field_invalid(dpath, None, "must not be null for non-nullable"))
        return
    out.extend(validate(default, s, dpath, relative=True))
    pruned = copy.deepcopy(default)
    unknown = prune(pruned, s, is_resource_root=False, path=dpath)
    if unknown:
        out.append(errors.field_invalid(dpath, default, "must not have unknown fields"))


def _root_metadata(schema: dict, path: str, out: list[Cause]) -> None:
    meta = (schema.get("properties") or {}).get("metadata")
    if not isinstance(meta, dict):
        return
    mpath = key(child(path, "properties"), "metadata")
    if meta.get("type", "object") != "object":
        out.append(errors.field_invalid(child(mpath, "type"), meta.get("type"), "must be object"))
    allowed = {"type", "properties"}
    extra = set(meta) - allowed
    props = meta.get("properties") or {}
    bad_props = set(props) - {"name", "generateName"}
    if extra or bad_props or any(
            set(p) - {"type", "pattern", "maxLength", "minLength", "enum", "format", "description"}
            for p in props.values() if isinstance(p, dict)):
        out.append(errors.field_forbidden(mpath, "must not specify anything other than name and generateName, "
                                                 "but metadata is implicitly specified"))

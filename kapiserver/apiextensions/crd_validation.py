"""Defaulting and validation of CustomResourceDefinition objects (apiextensions.k8s.io/v1).

What kube-apiserver checks when a CRD is created or updated: names, group,
scope, versions (exactly one storage version, at least one served), the
structural schema of every version, its CEL rules, the scale subresource,
printer columns and selectable fields.  Errors are field causes with
upstream's paths and messages; the caller turns them into a 422 Invalid.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.schema_paths import child, index

from . import names
from .cel.rules import compile_rules
from .schema.structural import validate_structural

SCOPES = ["Cluster", "Namespaced"]
COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
COLUMN_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"]
CONVERSION_STRATEGIES = ["None", "Webhook"]
MAX_SELECTABLE_FIELDS = 8
_JSON_PATH = re.compile(r"^(\.[A-Za-z0-9_-]+|\[[0-9]+\]|\['[^']*'\]|\[\"[^\"]*\"\])+$")


def default_crd(crd: dict) -> None:
    """Fill in what upstream's v1 defaulting sets (in place)."""
    spec = crd.setdefault("spec", {})
    spec_names = spec.setdefault("names", {})
    kind = spec_names.get("kind") or ""
    if kind and not spec_names.get("listKind"):
        spec_names["listKind"] = kind + "List"
    if kind and not spec_names.get("singular"):
        spec_names["singular"] = kind.lower()
    conversion = spec.setdefault("conversion", {})
    conversion.setdefault("strategy", "None")
    if conversion.get("strategy") == "Webhook":
        conversion.setdefault("webhook", {}).setdefault("conversionReviewVersions", ["v1"])
    spec.setdefault("preserveUnknownFields", False)


def validate_crd(crd: dict, old: Optional[dict] = None) -> list[Cause]:
    """All problems of ``crd`` (``old`` is the stored CRD on update)."""
    out: list[Cause] = []
    spec = crd.get("spec") or {}
    spec_names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = spec_names.get("plural") or ""
    name = (crd.get("metadata") or {}).get("name") or ""
    if name != f"{plural}.{group}":
        out.append(errors.field_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    _validate_group(group, out)
    _validate_names(spec_names, "spec.names", out)
    _validate_scope(spec, old, out)
    _validate_versions(spec, out)
    _validate_conversion(spec.get("conversion") or {}, out)
    if spec.get("preserveUnknownFields"):
        out.append(errors.field_invalid("spec.preserveUnknownFields", True,
                                        "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                                        "spec.versions[*].schema instead"))
    out.extend(validate_crd_status(crd))
    return out


def validate_crd_status(crd: dict) -> list[Cause]:
    """status.storedVersions must name known versions and include the storage version."""
    out: list[Cause] = []
    status = crd.get("status") or {}
    stored = status.get("storedVersions")
    if not stored:
        return out
    versions = [v.get("name") or "" for v in (crd.get("spec") or {}).get("versions") or ()]
    for i, v in enumerate(stored):
        if v not in versions:
            out.append(errors.field_invalid(index("status.storedVersions", i), v, "must appear in spec.versions"))
    storage = [v.get("name") or "" for v in (crd.get("spec") or {}).get("versions") or () if v.get("storage")]
    if len(storage) == 1 and storage[0] not in stored:
        out.append(errors.field_invalid("status.storedVersions", stored,
                                        f"must have the storage version {storage[0]}"))
    return out


def _validate_group(group: str, out: list[Cause]) -> None:
    if not group:
        out.append(errors.field_required("spec.group"))
        return
    for problem in names.dns1123_subdomain(group):
        out.append(errors.field_invalid("spec.group", group, problem))
    if "." not in group:
        out.append(errors.field_invalid("spec.group", group, "should be a domain with at least one dot"))


def _dns1035(value: str, path: str, out: list[Cause], check: Optional[str] = None) -> None:
    problems = names.dns1035_label(check if check is not None else value)
    if problems:
        out.append(errors.field_invalid(path, value, ",".join(problems)))


def _validate_names(n: dict, path: str, out: list[Cause]) -> None:
    plural, singular, kind, list_kind = (n.get("plural") or "", n.get("singular") or "", n.get("kind") or "",
                                         n.get("listKind") or "")
    if not plural:
        out.append(errors.field_required(child(path, "plural")))
    else:
        _dns1035(plural, child(path, "plural"), out)
    if singular:
        _dns1035(singular, child(path, "singular"), out)
    if not kind:
        out.append(errors.field_required(child(path, "kind")))
    else:
        _dns1035(kind, child(path, "kind"), out, kind.lower())
    if list_kind:
        _dns1035(list_kind, child(path, "listKind"), out, list_kind.lower())
        if list_kind == kind:
            out.append(errors.field_invalid(child(path, "listKind"), list_kind, "kind and listKind may not be the same"))
    for i, short in enumerate(n.get("shortNames") or ()):
        _dns1035(short, index(child(path, "shortNames"), i), out)
    for i, category in enumerate(n.get("categories") or ()):
        _dns1035(category, index(child(path, "categories"), i), out)


def _validate_scope(spec: dict, old: Optional[dict], out: list[Cause]) -> None:
    scope = spec.get("scope") or ""
    if not scope:
        out.append(errors.field_required("spec.scope"))
    elif scope not in SCOPES:
        out.append(errors.field_not_supported("spec.scope", scope, SCOPES))
    if old is not None:
        old_scope = (old.get("spec") or {}).get("scope")
        if old_scope and scope != old_scope:
            out.append(errors.field_invalid("spec.scope", scope, "field is immutable"))


def _validate_versions(spec: dict, out: list[Cause]) -> None:
    versions = spec.get("versions") or []
    if not versions:
        out.append(errors.field_invalid("spec.versions", versions, "must have exactly one version marked as "
                                                                   "storage version"))
        return
    storage = sum(1 for v in versions if v.get("storage"))
    if storage != 1:
        out.append(errors.field_invalid("spec.versions", _version_names(versions),
                                        "must have exactly one version marked as storage version"))
    if not any(v.get("served") for v in versions):
        out.append(errors.field_invalid("spec.versions", _version_names(versions),
                                        "must have at least one served version"))
    seen: set[str] = set()
    for i, version in enumerate(versions):
        vpath = index("spec.versions", i)
        vname = version.get("name") or ""
        _dns1035(vname, child(vpath, "name"), out)  # upstream has no Required here: "" is no DNS-1035 label
        if vname:
            if vname in seen:
                out.append(errors.field_duplicate(child(vpath, "name"), vname))
            seen.add(vname)
        _validate_version(version, vpath, out)


def _version_names(versions: list) -> list:
    return [v.get("name") for v in versions]


def _validate_version(version: dict, vpath: str, out: list[Cause]) -> None:
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    spath = child(child(vpath, "schema"), "openAPIV3Schema")
    if schema is None:
        out.append(errors.field_required(spath, "schemas are required"))
    else:
        structural = validate_structural(schema, spath)
        out.extend(structural)
        if not structural:
            out.extend(compile_rules(schema, spath).errors)
    subresources = version.get("subresources") or {}
    scale = subresources.get("scale")
    if isinstance(scale, dict):
        _validate_scale(scale, schema or {}, child(child(vpath, "subresources"), "scale"), out)
    for i, col in enumerate(version.get("additionalPrinterColumns") or ()):
        _validate_column(col, index(child(vpath, "additionalPrinterColumns"), i), out)
    fields = version.get("selectableFields") or []
    if len(fields) > MAX_SELECTABLE_FIELDS:
        out.append(errors.field_too_many(child(vpath, "selectableFields"), len(fields), MAX_SELECTABLE_FIELDS))
    seen: set[str] = set()
    for i, selectable in enumerate(fields):
        fpath = child(index(child(vpath, "selectableFields"), i), "jsonPath")
        _validate_selectable(selectable.get("jsonPath") or "", schema or {}, fpath, seen, out)


def _schema_at(schema: dict, json_path: str) -> tuple[Optional[dict], str]:
    """The schema node ``.a.b`` names, or the reason it names none."""
    node = schema
    for part in json_path.lstrip(".").split("."):
        props = node.get("properties")
        if props is None or part not in props:
            return None, "does not refer to a valid field"
        node = props[part]
    return node, ""


def _validate_scale(scale: dict, schema: dict, path: str, out: list[Cause]) -> None:
    for name, prefixes, where in (("specReplicasPath", (".spec.",), ".spec"),
                                  ("statusReplicasPath", (".status.",), ".status"),
                                  ("labelSelectorPath", (".spec.", ".status."), "either .spec or .status")):
        value = scale.get(name) or ""
        fpath = child(path, name)
        if not value:
            if name != "labelSelectorPath":
                out.append(errors.field_required(fpath))
            continue
        if not _JSON_PATH.match(value):
            out.append(errors.field_invalid(fpath, value, "must be a valid JSON path"))
        elif not value.startswith(prefixes):
            out.append(errors.field_invalid(fpath, value, f"should be a json path under {where}"))
        elif name == "specReplicasPath" and schema:
            node, _ = _schema_at(schema, value)
            if node is None:
                out.append(errors.field_invalid(fpath, value, "should be a valid path under .spec"))
            elif node.get("type") != "integer":
                out.append(errors.field_invalid(fpath, value, "should be of integer type"))


def _balanced_json_path(value: str) -> bool:
    depth = 0
    for c in value:
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0 and value.strip() != ""


def _validate_column(col: dict, path: str, out: list[Cause]) -> None:
    if not col.get("name"):
        out.append(errors.field_required(child(path, "name")))
    typ = col.get("type") or ""
    if not typ:
        out.append(errors.field_required(child(path, "type")))
    elif typ not in COLUMN_TYPES:
        out.append(errors.field_not_supported(child(path, "type"), typ, COLUMN_TYPES))
    fmt = col.get("format") or ""
    if fmt and fmt not in COLUMN_FORMATS:
        out.append(errors.field_not_supported(child(path, "format"), fmt, COLUMN_FORMATS))
    if col.get("priority", 0) < 0:
        out.append(errors.field_invalid(child(path, "priority"), col["priority"], "must be non-negative"))
    json_path = col.get("jsonPath") or ""
    if not json_path:
        out.append(errors.field_required(child(path, "jsonPath")))
    elif not _balanced_json_path(json_path):
        out.append(errors.field_invalid(child(path, "jsonPath"), json_path, "must be a simple json path"))


def _validate_selectable(json_path: str, schema: dict, path: str, seen: set[str], out: list[Cause]) -> None:
    if not json_path:
        out.append(errors.field_required(path))
        return
    if not _JSON_PATH.match(json_path) or not json_path.startswith("."):
        out.append(errors.field_invalid(path, json_path, "must be a valid JSON path"))
        return
    if json_path in seen:
        out.append(errors.field_duplicate(path, json_path))
        return
    seen.add(json_path)
    node, problem = _schema_at(schema, json_path)
    if node is None:
        out.append(errors.field_invalid(path, json_path, f"is an invalid path: {problem}"))
    elif node.get("type") not in ("string", "integer", "boolean"):
        out.append(errors.field_invalid(path, json_path, "must point to a field of type string, boolean or "
                                                         "integer. Enum string fields and strings with formats "
                                                         "are allowed."))


def _validate_conversion(conversion: dict, out: list[Cause]) -> None:
    strategy = conversion.get("strategy") or ""
    if strategy not in CONVERSION_STRATEGIES:
        out.append(errors.field_not_supported("spec.conversion.strategy", strategy, CONVERSION_STRATEGIES))
    elif strategy == "Webhook":
        webhook = conversion.get("webhook") or {}
        if not webhook.get("clientConfig"):
            out.append(errors.field_required("spec.conversion.webhook.clientConfig",
                                             "required when strategy is set to Webhook"))
    elif conversion.get("webhook"):
        out.append(errors.field_forbidden("spec.conversion.webhook", "should not be set when strategy is not set "
                                                                     "to Webhook"))


def served_versions(crd: dict) -> list[str]:
    """Names of the served versions, in spec order."""
    return [v.get("name") or "" for v in (crd.get("spec") or {}).get("versions") or () if v.get("served")]


def storage_version(crd: dict) -> Optional[str]:
    """The version marked storage (None if the CRD is invalid; "" for one without a name, Go's zero
    value, which validation refuses)."""
    found = [v.get("name") or "" for v in (crd.get("spec") or {}).get("versions") or () if v.get("storage")]
    return found[0] if len(found) == 1 else None


def version_schema(crd: dict, version: str) -> Optional[dict[str, Any]]:
    """``spec.versions[name=version].schema.openAPIV3Schema``."""
    for v in (crd.get("spec") or {}).get("versions") or ():
        if v.get("name") == version:
            return (v.get("schema") or {}).get("openAPIV3Schema")
    return None

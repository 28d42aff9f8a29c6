"""OpenAPI v3 value validation of custom resources, with upstream's messages.

Mirrors what kube-apiserver reports for a CR that does not match its CRD's
schema: kube-openapi's validator messages (``spec.replicas in body should be
greater than or equal to 1``) turned into field errors the way
apiextensions-apiserver does (Required, NotSupported, TooLong, TooMany,
TypeInvalid, Invalid), plus the ``x-kubernetes-list-type`` uniqueness checks.

Schemas are plain dicts in CRD ``JSONSchemaProps`` JSON form.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from kapiserver.machinery import errors, regex
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.schema_paths import child, go_number, go_value, index, json_type

from . import formats

# ObjectMeta fields an embedded resource's metadata may carry.
_EMBEDDED_REQUIRED = ("apiVersion", "kind")


def validate(obj: Any, schema: Optional[dict], path: str = "", relative: bool = False) -> list[Cause]:
    """All problems of ``obj`` against ``schema``; ``path`` prefixes the field paths.

    With ``relative`` the messages name fields relative to ``obj`` (as
    upstream does when it validates a schema's ``default`` value).
    """
    out: list[Cause] = []
    if schema:
        _validate(obj, schema, path, out, path if relative else "")
    return out


def _name(path: str, base: str = "") -> str:
    if base:
        path = path[len(base):].lstrip(".")
        return path
    return path or "."


def _type_invalid(path: str, want: str, value: Any, name: str) -> Cause:
    got = json_type(value)
    return errors.field_type_invalid(path, got, f'{name} in body must be of type {want}: "{got}"')


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _type_ok(want: str, value: Any) -> bool:
    if want == "object":
        return isinstance(value, dict)
    if want == "array":
        return isinstance(value, list)
    if want == "string":
        return isinstance(value, str)
    if want == "integer":
        return _is_integer(value)
    if want == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if want == "boolean":
        return isinstance(value, bool)
    return True


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality of decoded JSON, where ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return a == b and type(a) in (int, float, str, type(None)) and type(b) in (int, float, str, type(None))


def _enum_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def _validate(value: Any, s: dict, path: str, out: list[Cause], base: str = "") -> None:
    name = _name(path, base)
    want = s.get("type", "")
    int_or_string = s.get("x-kubernetes-int-or-string", False)

    if value is None:
        if s.get("nullable") or not (want or int_or_string):
            return
        out.append(errors.field_type_invalid(path, "null", f'{name} in body must be of type '
                                             f'{"integer,string" if int_or_string else want}: "null"'))
        return
    if int_or_string:
        if not (_is_integer(value) or isinstance(value, str)):
            out.append(_type_invalid(path, "integer,string", value, name))
            return
    elif want and not _type_ok(want, value):
        out.append(_type_invalid(path, want, value, name))
        return

    if "enum" in s and not any(json_equal(value, e) for e in s["enum"]):
        out.append(errors.field_not_supported(path, value, [_enum_text(e) for e in s["enum"]]))

    if isinstance(value, str):
        _validate_string(value, s, path, name, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(value, s, path, name, out)
    elif isinstance(value, list):
        _validate_array(value, s, path, name, out, base)
    elif isinstance(value, dict):
        _validate_object(value, s, path, name, out, base)

    _validate_junctors(value, s, path, name, out, base)


def _validate_string(value: str, s: dict, path: str, name: str, out: list[Cause]) -> None:
    if "maxLength" in s and len(value) > s["maxLength"]:
        out.append(errors.field_too_long(path, s["maxLength"]))
    if "minLength" in s and len(value) < s["minLength"]:
        out.append(errors.field_invalid(path, value, f"{name} in body should be at least {s['minLength']} chars long"))
    if "pattern" in s:
        compiled = regex.compile_or_none(s["pattern"])
        if compiled is not None and not compiled.search(value):
            out.append(errors.field_invalid(path, value, f"{name} in body should match '{s['pattern']}'"))
    fmt = s.get("format")
    if fmt and not formats.check(fmt, value):
        out.append(errors.field_type_invalid(path, value, f"{name} in body must be of type {fmt}: "
                                             f"{errors.render_value(value)}"))


def _validate_number(value: float, s: dict, path: str, name: str, out: list[Cause]) -> None:
    if "multipleOf" in s and s["multipleOf"]:
        quotient = value / s["multipleOf"]
        if not float(quotient).is_integer():
            out.append(errors.field_invalid(path, value,
                                            f"{name} in body should be a multiple of {go_number(s['multipleOf'])}"))
    if "maximum" in s:
        limit = s["maximum"]
        if s.get("exclusiveMaximum"):
            if value >= limit:
                out.append(errors.field_invalid(path, value, f"{name} in body should be less than {go_number(limit)}"))
        elif value > limit:
            out.append(errors.field_invalid(path, value,
                                            f"{name} in body should be less than or equal to {go_number(limit)}"))
    if "minimum" in s:
        limit = s["minimum"]
        if s.get("exclusiveMinimum"):
            if value <= limit:
                out.append(errors.field_invalid(path, value,
                                                f"{name} in body should be greater than {go_number(limit)}"))
        elif value < limit:
            out.append(errors.field_invalid(path, value,
                                            f"{name} in body should be greater than or equal to {go_number(limit)}"))


def _validate_array(value: list, s: dict, path: str, name: str, out: list[Cause], base: str) -> None:
    if "maxItems" in s and len(value) > s["maxItems"]:
        out.append(errors.field_too_many(path, len(value), s["maxItems"]))
    if "minItems" in s and len(value) < s["minItems"]:
        out.append(errors.field_invalid(path, len(value), f"{name} in body should have at least {s['minItems']} items"))
    if s.get("uniqueItems"):
        for i, item in enumerate(value):
            if any(json_equal(item, other) for other in value[:i]):
                out.append(errors.field_invalid(path, "", f"{name} in body shouldn't contain duplicates"))
                break
    items = s.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, index(path, i), out, base)
    out.extend(validate_list_type(value, s, path))


def _validate_object(value: dict, s: dict, path: str, name: str, out: list[Cause], base: str) -> None:
    if "maxProperties" in s and len(value) > s["maxProperties"]:
        out.append(errors.field_too_many(path, len(value), s["maxProperties"]))
    if "minProperties" in s and len(value) < s["minProperties"]:
        out.append(errors.field_invalid(path, len(value),
                                        f"{name} in body should have at least {s['minProperties']} properties"))
    for req in s.get("required") or ():
        if req not in value:
            out.append(errors.field_required(child(path, req)))
    if s.get("x-kubernetes-embedded-resource"):
        for req in _EMBEDDED_REQUIRED:
            if not value.get(req):
                out.append(errors.field_required(child(path, req), "must not be empty"))
    props = s.get("properties") or {}
    additional = s.get("additionalProperties")
    for k, v in value.items():
        sub = props.get(k)
        if sub is not None:
            _validate(v, sub, child(path, k), out, base)
        elif isinstance(additional, dict):
            _validate(v, additional, child(path, k), out, base)
        elif additional is False:
            out.append(errors.field_invalid(child(path, k), "", f"{_name(child(path, k), base)} in body is a forbidden property"))


def _validate_junctors(value: Any, s: dict, path: str, name: str, out: list[Cause], base: str) -> None:
    for sub in s.get("allOf") or ():
        _validate(value, sub, path, out, base)
    any_of = s.get("anyOf")
    if any_of and not any(not validate(value, sub, path) for sub in any_of):
        out.append(errors.field_invalid(path, "", f"{name} in body must validate at least one schema (anyOf)"))
    one_of = s.get("oneOf")
    if one_of:
        passing = sum(1 for sub in one_of if not validate(value, sub, path))
        if passing != 1:
            out.append(errors.field_invalid(path, "", f"{name} in body must validate one and only one schema (oneOf)"))
    not_schema = s.get("not")
    if isinstance(not_schema, dict) and not validate(value, not_schema, path):
        out.append(errors.field_invalid(path, "", f"{name} in body must not validate the schema (not)"))


def validate_list_type(value: list, s: dict, path: str) -> list[Cause]:
    """``x-kubernetes-list-type`` set/map uniqueness (upstream's listtype validation)."""
    list_type = s.get("x-kubernetes-list-type")
    out: list[Cause] = []
    if list_type == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if any(json_equal(item, prev) for prev in seen):
                out.append(Cause(errors.DUPLICATE, f"Duplicate value: {go_value(item)}", index(path, i)))
            else:
                seen.append(item)
    elif list_type == "map":
        keys = s.get("x-kubernetes-list-map-keys") or []
        item_schema = s.get("items") or {}
        item_props = item_schema.get("properties") or {}
        seen_keys: list[dict] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key_value = {}
            for k in keys:
                if k in item:
                    key_value[k] = item[k]
                elif "default" in (item_props.get(k) or {}):
                    key_value[k] = item_props[k]["default"]
                else:
                    out.append(errors.field_required(child(index(path, i), k)))
            if len(key_value) != len(keys):
                continue
            if any(json_equal(key_value, prev) for prev in seen_keys):
                out.append(Cause(errors.DUPLICATE, f"Duplicate value: {go_value(key_value)}", index(path, i)))
            else:
                seen_keys.append(key_value)
    return out

"""``fieldValidation=Strict|Warn|Ignore``: unknown and duplicate fields in request bodies.

Upstream's decoder notices fields the kind's schema does not know and keys
given twice in one JSON object.  ``Strict`` fails the request with 400
BadRequest (``strict decoding error: unknown field "spec.foo", duplicate
field "data"``); ``Warn`` (the default) drops them and answers with one
``Warning`` header per field; ``Ignore`` drops them silently.

Field paths are upstream's: ``spec.containers[0].foo``, no leading dot.
Schemas are walked with two meanings of a bare ``type: object``: inside a
custom resource's structural schema it has no fields (everything in it is
pruned) unless ``x-kubernetes-preserve-unknown-fields`` says otherwise,
whereas a built-in definition reached through ``$ref`` without properties
is a free-form Go type (RawExtension, FieldsV1) that keeps everything.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.schema_paths import child, index

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
OBJECT_META_REF = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

Resolver = Callable[[str], dict]


class _Pairs(list):
    """An object's (key, value) pairs as parsed, before duplicates are folded."""


def decode_json_strict(body: bytes) -> tuple[Any, list[str]]:
    """Decode JSON, also returning the paths of duplicate keys (the last value wins, as in Go)."""
    try:
        parsed = json.loads(body, object_pairs_hook=_Pairs)
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {e}") from None
    duplicates: list[str] = []
    return _fold(parsed, "", duplicates), duplicates


def _fold(node: Any, path: str, duplicates: list[str]) -> Any:
    if isinstance(node, _Pairs):
        out: dict[str, Any] = {}
        for key, value in node:
            where = child(path, key)
            if key in out and where not in duplicates:
                duplicates.append(where)
            out[key] = _fold(value, where, duplicates)
        return out
    if isinstance(node, list):
        return [_fold(v, index(path, i), duplicates) for i, v in enumerate(node)]
    return node


# ------------------------------------------------------------------ unknown fields

class _Effective:
    """A schema node with ``$ref`` and ``allOf`` folded in."""

    __slots__ = ("properties", "additional", "items", "preserve", "embedded", "structural", "known")

    def __init__(self) -> None:
        self.properties: dict[str, Any] = {}
        self.additional: Any = None
        self.items: Any = None
        self.preserve = False
        self.embedded = False
        self.structural = True
        self.known = True


def _effective(schema: Any, resolve: Resolver, structural: bool, depth: int = 0) -> _Effective:
    eff = _Effective()
    eff.structural = structural
    _merge(eff, schema, resolve, depth)
    return eff


def _merge(eff: _Effective, schema: Any, resolve: Resolver, depth: int) -> None:
    if not isinstance(schema, dict) or depth > 20:
        return
    ref = schema.get("$ref")
    if isinstance(ref, str):
        try:
            target = resolve(ref)
        except (KeyError, LookupError, ValueError):
            target = None
        if not isinstance(target, dict) or not target:
            eff.known = False  # cannot tell: accept anything below
        else:
            eff.structural = False  # a built-in Go type from here on
            _merge(eff, target, resolve, depth + 1)
    for sub in schema.get("allOf") or ():
        _merge(eff, sub, resolve, depth + 1)
    props = schema.get("properties")
    if isinstance(props, dict):
        eff.properties.update(props)
    if "additionalProperties" in schema:
        eff.additional = schema["additionalProperties"]
    if "items" in schema:
        eff.items = schema["items"]
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        eff.preserve = True
    if schema.get("x-kubernetes-embedded-resource"):
        eff.embedded = True


def unknown_fields(obj: Any, schema: dict, resolve_ref: Resolver) -> list[str]:
    """Paths (``spec.foo``, ``data`` keys excepted) of fields ``schema`` does not allow, in document order."""
    found: list[str] = []
    _walk(obj, schema, resolve_ref, "", True, True, found)
    return found


def _walk(value: Any, schema: Any, resolve: Resolver, path: str, structural: bool, is_root: bool,
          found: list[str]) -> None:
    eff = _effective(schema, resolve, structural)
    if not eff.known:
        return
    if isinstance(value, dict):
        _walk_object(value, eff, resolve, path, is_root, found)
    elif isinstance(value, list):
        items = eff.items
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _walk(item, items, resolve, index(path, i), eff.structural, False, found)
        elif eff.structural and not eff.preserve:
            for i, item in enumerate(value):
                _walk(item, {}, resolve, index(path, i), True, False, found)


def _walk_object(obj: dict, eff: _Effective, resolve: Resolver, path: str, is_root: bool,
                 found: list[str]) -> None:
    props, additional = eff.properties, eff.additional
    keeps_meta = is_root or eff.embedded
    if not eff.structural and not props and not isinstance(additional, dict):
        return  # a free-form built-in type
    for key, value in obj.items():
        where = child(path, key)
        if keeps_meta and key == "metadata":
            _walk(value, {"$ref": OBJECT_META_REF}, resolve, where, False, False, found)
            continue
        sub = props.get(key)
        if sub is None and keeps_meta and key in ("apiVersion", "kind"):
            continue
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            _walk(value, sub, resolve, where, eff.structural, False, found)
        elif eff.preserve or additional is True:
            continue
        else:
            found.append(where)


def drop_unknown_fields(obj: Any, schema: dict, resolve_ref: Resolver) -> None:
    """Remove, in place, the fields ``unknown_fields`` would report: what decoding into the
    kind's Go type drops (objects a mutating webhook patched)."""
    _drop(obj, schema, resolve_ref, True, True)


def _drop(value: Any, schema: Any, resolve: Resolver, structural: bool, is_root: bool) -> None:
    eff = _effective(schema, resolve, structural)
    if not eff.known:
        return
    if isinstance(value, list):
        items = eff.items if isinstance(eff.items, dict) else ({} if eff.structural and not eff.preserve else None)
        if items is not None:
            for item in value:
                _drop(item, items, resolve, eff.structural, False)
        return
    if not isinstance(value, dict):
        return
    props, additional = eff.properties, eff.additional
    keeps_meta = is_root or eff.embedded
    if not eff.structural and not props and not isinstance(additional, dict):
        return
    for key in list(value):
        if keeps_meta and key == "metadata":
            _drop(value[key], {"$ref": OBJECT_META_REF}, resolve, False, False)
            continue
        sub = props.get(key)
        if sub is None and keeps_meta and key in ("apiVersion", "kind"):
            continue
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            _drop(value[key], sub, resolve, eff.structural, False)
        elif not (eff.preserve or additional is True):
            del value[key]


# ------------------------------------------------------------------ reporting

def unknown_field_message(path: str) -> str:
    return f'unknown field "{path}"'


def duplicate_field_message(path: str) -> str:
    return f'duplicate field "{path}"'


def check_fields(obj: Any, raw: Optional[bytes], schema: Optional[dict], resolve_ref: Optional[Resolver],
                 mode: str, kind: str = "", version: str = "", extra_unknown: Iterable[str] = ()) -> list[str]:
    """Apply ``fieldValidation``: the Warning texts to send, or 400 BadRequest when ``mode`` is Strict.

    ``raw`` is the JSON body as sent (None for YAML/other bodies: no duplicate
    check); ``extra_unknown`` adds paths found elsewhere (CRD pruning).  With
    ``kind``/``version`` (default: the object's own) the Strict message carries
    upstream's ``<Kind> in version "<v>" cannot be handled as a <Kind>:`` prefix.
    """
    if mode == IGNORE:
        return []
    problems: list[str] = []
    unknown = list(extra_unknown)
    if schema is not None and isinstance(obj, dict):
        for path in unknown_fields(obj, schema, resolve_ref or (lambda ref: {})):
            if path not in unknown:
                unknown.append(path)
    problems.extend(unknown_field_message(p) for p in unknown)
    if raw:
        _, duplicates = decode_json_strict(raw)
        problems.extend(duplicate_field_message(p) for p in duplicates)
    if not problems:
        return []
    if mode != STRICT:
        return problems
    if not kind and isinstance(obj, dict):
        found_kind, found_api_version = obj.get("kind"), obj.get("apiVersion")
        kind = found_kind if isinstance(found_kind, str) else ""
        api_version = found_api_version if isinstance(found_api_version, str) else ""
        version = version or api_version.rsplit("/", 1)[-1]
    message = "strict decoding error: " + ", ".join(problems)
    if kind and version:
        message = f'{kind} in version "{version}" cannot be handled as a {kind}: {message}'
    raise errors.bad_request(message)

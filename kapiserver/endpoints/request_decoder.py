"""Request bodies decoded into the kind's schema before anything else sees them.

This is upstream's decoding step of the create/update/patch handlers
(``runtime.Decode`` into the kind's Go type, ``transformDecodeError``):

1. parse: JSON (orjson), YAML (``machinery/yamljson.py``, sigs.k8s.io/yaml's
   YAML → JSON) or protobuf; a body that does not parse answers upstream's
   400 ``the object provided is unrecognized (must be of type X):
   couldn't get version/kind; json parse error: ...``;
2. type meta: ``apiVersion``/``kind`` must be strings and name this kind
   (``Pod in version "v1" cannot be handled as a Namespace: ...``);
3. typed decoding: built-in kinds through ``machinery/schema_decoder.py``
   (Go's messages, unknown fields dropped); custom resources keep the
   structural schema pipeline (pruning, 422 validation) and get their
   ``metadata`` decoded as ObjectMeta, as apiextensions-apiserver does;
4. ``fieldValidation``: unknown and duplicate fields as warnings (Warn),
   nothing (Ignore) or a 400 (Strict).

Every path is bounded (``machinery/limits.py``): nesting depth, YAML alias
expansion.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson

from kapiserver.machinery import codec, errors, fieldvalidation, limits, protobuf, schema_decoder
from kapiserver.registry.resource_type import ResourceType

YAML_TYPES = (codec.YAML, "application/x-yaml", "text/yaml")
DECODED_TYPES = (codec.JSON, *YAML_TYPES, protobuf.MEDIA_TYPE)  # another is a 415 before the body is read
_FIND_KIND = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
              'Kind string "json:\\"kind,omitempty\\"" }')
# JSON strings, to count the ``:`` outside them (one per object member)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


@dataclass(eq=False, repr=False)
class ParsedBody:
    obj: Any
    # JSON: the body as sent (duplicate keys are looked for only when needed);
    # YAML: duplicate keys found while composing
    raw_json: Optional[bytes] = None
    duplicates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # protobuf field numbers no table knows


def summarize(body: bytes, limit: int = 30) -> str:
    """upstream's summarizeData: the first bytes, as text for a JSON object, else in hex."""
    if not body:
        return "<empty>"
    if body[:1] == b"{":
        text = body[:limit].decode("utf-8", "replace")
        return text + " ..." if len(body) > limit else text
    return body[:limit].hex() + (" ..." if len(body) > limit else "")


def go_quote(text: str) -> str:
    """Go's %q of a string (close enough: JSON quoting)."""
    return orjson.dumps(text).decode()


@dataclass
class UnrecognizedBody(errors.StatusError):
    """The 400 of a body that does not decode; ``detail`` is the decoder's own error, which a
    patched object's 422 shows without the request body's framing."""

    detail: str = ""


def unrecognized(kind: str, message: str, body: bytes) -> errors.StatusError:
    return UnrecognizedBody(400, "BadRequest", f"the object provided is unrecognized (must be of type {kind}): "
                                               f"{message} ({summarize(body)})", detail=message)


def cannot_handle(body_kind: str, body_version: str, kind: str, message: str) -> errors.StatusError:
    return errors.bad_request(f'{body_kind} in version "{body_version}" cannot be handled as a {kind}: {message}')


def go_json_error(body: bytes, e: Exception) -> str:
    """orjson's complaint in the words of Go's encoding/json, for the common cases."""
    text = str(e)
    if "depth" in text.lower() or "recursion" in text.lower():
        return limits.depth_message()
    pos = e.pos if isinstance(e, json.JSONDecodeError) else None  # (orjson's error is one)
    stripped = body.strip()
    if not stripped:
        return "unexpected end of JSON input"
    if isinstance(pos, int) and 0 <= pos < len(body):
        char = body[pos:pos + 1].decode("latin-1")
        if body[:pos].strip() == b"":
            return f"invalid character {char!r} looking for beginning of value"
        return f"invalid character {char!r} ({text})"
    if isinstance(pos, int) and pos >= len(body):
        return "unexpected end of JSON input"
    return text


def parse(body: bytes, media: str, kind: str, rtype: Optional[ResourceType] = None) -> ParsedBody:
    """The body as JSON-shaped values; 400/415 Status errors as upstream answers them."""
    if media == codec.JSON:
        try:
            return ParsedBody(orjson.loads(body), raw_json=body)
        except orjson.JSONDecodeError as e:
            raise unrecognized(kind, f"couldn't get version/kind; json parse error: {go_json_error(body, e)}",
                               body) from None
    if media in YAML_TYPES:
        from kapiserver.machinery import yamljson  # PyYAML loads with the first YAML body

        duplicates: list[str] = []
        try:
            return ParsedBody(yamljson.yaml_to_json(body, duplicates), duplicates=duplicates)
        except yamljson.YAMLError as e:
            raise unrecognized(kind, str(e), body) from None
        except limits.TooDeep as e:
            raise unrecognized(kind, f"couldn't get version/kind; json parse error: {e}", body) from None
    if media == protobuf.MEDIA_TYPE:
        if rtype is not None and rtype.is_crd:
            # custom resources are JSON/YAML only (upstream v1.32 drops the connection here)
            raise errors.StatusError(
                415, "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml")
        try:
            decoded = protobuf.decode_request_body(body, kind)
        except RecursionError:
            raise unrecognized(kind, f"unable to decode protobuf body: {limits.depth_message()}", body) from None
        except protobuf.EnvelopeError as e:
            raise unrecognized(kind, str(e), body) from None
        return ParsedBody(decoded.obj, unknown=list(decoded.unknown_fields))
    raise errors.unsupported_media_type()


def count_keys(value: Any) -> int:
    """The number of object members in a JSON value (iterative)."""
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            total += len(node)
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return total


def json_duplicates(raw: bytes, members: int) -> list[str]:
    """Paths of keys given twice in a JSON body whose parsed objects hold ``members`` keys.

    Every ``:`` outside a string separates one member, so when the counts
    agree there is no duplicate and the slow, exact parse is skipped.
    """
    if raw.count(b":") == members or _colons_outside_strings(raw) == members:
        return []
    _, duplicates = fieldvalidation.decode_json_strict(raw)
    return [fieldvalidation.duplicate_field_message(p) for p in duplicates]


# A body this large has its strings matched one at a time (see _colons_outside_strings).
_MATCHED_BY_STRING_BYTES = 64 * 1024


def _colons_outside_strings(raw: bytes) -> int:
    if len(raw) < _MATCHED_BY_STRING_BYTES:
        return _JSON_STRING.sub(b"", raw).count(b":")
    # One sub() over a 3 MB body holds the GIL for ~70 ms, and the reactor thread waits; the
    # matches' loop below costs about as much but lets it in between.
    return raw.count(b":") - sum(raw.count(b":", *match.span()) for match in _JSON_STRING.finditer(raw))


# ------------------------------------------------------------------ type meta

def _internal_package(group: str) -> str:
    return group.split(".", 1)[0] if group else "core"


def check_type_meta(obj: Any, rtype: ResourceType, body: bytes, kind: str = "", api_version: str = "",
                    registered: Any = None) -> tuple[str, str]:
    """The (kind, version) the body names, defaulted from the URL; upstream's errors when it names another type.

    ``registered(group, version, kind)`` tells whether the scheme knows a kind
    (the wrong-kind message differs for unknown kinds).
    """
    kind = kind or rtype.kind
    api_version = api_version or rtype.api_version
    if not isinstance(obj, dict):
        raise unrecognized(kind, "couldn't get version/kind; json parse error: json: cannot unmarshal "
                           f"{schema_decoder._json_kind(obj).split(' ')[0]} into Go value of type {_FIND_KIND}",
                           body)
    for name in ("apiVersion", "kind"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise unrecognized(kind, "couldn't get version/kind; json parse error: json: cannot unmarshal "
                               f"{schema_decoder._json_kind(value).split(' ')[0]} into Go struct field "
                               f".{name} of type string", body)
    body_kind = obj.get("kind") or kind
    body_api_version = obj.get("apiVersion") or api_version
    group, _, version = body_api_version.rpartition("/")
    want_group, _, want_version = api_version.rpartition("/")
    if body_kind == kind and group == want_group:
        if version != want_version and not (registered and registered(group, version, body_kind)):
            raise cannot_handle(body_kind, version, kind,
                                f'no kind "{body_kind}" is registered for version "{body_api_version}" in '
                                f'scheme "pkg/api/legacyscheme/scheme.go:30"')
        return body_kind, version
    if registered is None:  # custom resources: the Store answers the mismatch
        return body_kind, version
    if registered(group, version, body_kind):
        raise cannot_handle(body_kind, version, kind,
                            f"converting ({version}.{body_kind}) to ({_internal_package(want_group)}.{kind}): "
                            f"unknown conversion")
    raise cannot_handle(body_kind, version, kind,
                        f'no kind "{body_kind}" is registered for version "{body_api_version}" in scheme '
                        f'"pkg/api/legacyscheme/scheme.go:30"')


# ------------------------------------------------------------------ the object

@dataclass(eq=False, repr=False)
class DecodedObject:
    obj: dict
    problems: list[str]  # unknown / duplicate field messages, for fieldValidation


def decode_typed(obj: dict, definition: str, body_kind: str, version: str, kind: str,
                 known: Optional[dict] = None, changed: Optional[frozenset[str]] = None
                 ) -> tuple[dict, list[str], int]:
    """A built-in object through its Go type: (clean copy, unknown field paths, members seen).
    With ``known`` (the stored object a patch was applied to), the top-level fields the patch
    left as they were are not decoded again (``Struct.decode_against``); ``changed``: the fields
    the patch can have changed (None: any)."""
    ctx = schema_decoder.Context()
    decoder = schema_decoder.decoder_for(definition)
    try:
        if known is not None and isinstance(decoder, schema_decoder.Struct):
            clean = decoder.decode_against(obj, known, ctx, changed)
        else:
            clean = schema_decoder.decode(decoder, obj, ctx)
    except schema_decoder.DecodeError as e:
        raise cannot_handle(body_kind, version, kind, str(e)) from None
    except limits.TooDeep as e:
        raise cannot_handle(body_kind, version, kind, f"json: {e}") from None
    return clean, ctx.unknown, ctx.keys


def decode_custom(obj: dict, body_kind: str, version: str, kind: str) -> dict:
    """A custom resource: bounded depth, and ``metadata`` decoded as an ObjectMeta (upstream's message)."""
    try:
        limits.check_depth(obj)
    except limits.TooDeep as e:
        raise cannot_handle(body_kind, version, kind, f"json: {e}") from None
    md = obj.get("metadata")
    if md is not None:
        ctx = schema_decoder.Context()
        try:
            obj["metadata"] = schema_decoder.decode(schema_decoder.decoder_for(schema_decoder.OBJECT_META), md, ctx,
                                                    depth=1)
        except schema_decoder.DecodeError as e:
            raise cannot_handle(body_kind, version, kind, str(e)) from None
        except limits.TooDeep as e:
            raise cannot_handle(body_kind, version, kind, f"json: {e}") from None
    return obj


def field_problems(unknown: list[str], duplicates: list[str]) -> list[str]:
    return [fieldvalidation.unknown_field_message(p) for p in unknown] + list(duplicates)


def apply_field_validation(mode: str, problems: list[str], body_kind: str, version: str, kind: str) -> list[str]:
    """``fieldValidation``: the warnings to send (Warn), none (Ignore), or a 400 (Strict)."""
    if not problems or mode == fieldvalidation.IGNORE:
        return []
    if mode == fieldvalidation.STRICT:
        raise cannot_handle(body_kind, version, kind, "strict decoding error: " + ", ".join(problems))
    return problems

"""The swagger 2.0 document as gnostic's ``openapi_v2.Document`` protobuf.

kubectl (``kubectl apply/create`` validation, ``kind: List`` files) fetches
``/openapi/v2`` with ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
and parses the answer only as that message (github.com/google/gnostic-models,
``openapiv2/OpenAPIv2.proto``).  kube-openapi builds it by compiling the JSON
document with gnostic (``openapi_v2.ParseDocument``) and marshalling the
result; this module does the same walk over the JSON-shaped dict:

* each JSON key maps to a proto field (``$ref`` → ``_ref``, camelCase →
  snake_case), fields are written in field-number order, zero scalars left
  out (proto3);
* ``x-`` keys become ``vendor_extension`` entries whose value is the YAML of
  the JSON value (gnostic's ``Any.yaml``); ``default``, ``example`` and
  ``enum`` values are ``Any`` the same way;
* maps (definitions, properties, paths, responses...) become repeated
  ``Named*`` pairs in document order;
* oneofs are chosen as gnostic's compiler chooses them (a parameter by its
  ``in``, a parameter or response with ``$ref`` as a JSON reference, a schema
  of ``type: file`` in a response as a FileSchema, ``additionalProperties``
  as a schema or a boolean, ``type`` and ``items`` as one or several).

Keys gnostic would reject are left out rather than failing the document.
"""
from __future__ import annotations

import re
import struct
from typing import Any, Callable, Optional

import yaml

from kapiserver.machinery.yaml_encoding import YamlDumperBase
from kapiserver.machinery.protobuf import VARINT, write_bytes_field, write_tag, write_varint

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# what clients send (kubectl, client-go); upstream answers both with MEDIA_TYPE
ACCEPTED_MEDIA_TYPES = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", MEDIA_TYPE)

FIXED64 = 1

# field kinds
STRING, BOOL, DOUBLE, INT64, ANY = "string", "bool", "double", "int64", "any"

_PRIMITIVE_TAIL = (  # the validation keywords shared by parameters, headers and primitive items
    ("collectionFormat", STRING), ("default", ANY), ("maximum", DOUBLE), ("exclusiveMaximum", BOOL),
    ("minimum", DOUBLE), ("exclusiveMinimum", BOOL), ("maxLength", INT64), ("minLength", INT64),
    ("pattern", STRING), ("maxItems", INT64), ("minItems", INT64), ("uniqueItems", BOOL),
    ("enum", "*" + ANY), ("multipleOf", DOUBLE),
)


def _numbered(*fields: tuple[str, str]) -> dict[str, tuple[int, str]]:
    """JSON key → (field number, kind); numbers follow the listing order from 1.
    A kind starting with ``*`` is repeated."""
    return {key: (i + 1, kind) for i, (key, kind) in enumerate(fields)}


# Message name → its fields by JSON key.  ``vendor_extension`` (``x-`` keys) is
# listed separately with its number (VENDOR), as are the map messages (MAPS).
MESSAGES: dict[str, dict[str, tuple[int, str]]] = {
    "Document": _numbered(
        ("swagger", STRING), ("info", "Info"), ("host", STRING), ("basePath", STRING), ("schemes", "*string"),
        ("consumes", "*string"), ("produces", "*string"), ("paths", "Paths"), ("definitions", "Definitions"),
        ("parameters", "ParameterDefinitions"), ("responses", "ResponseDefinitions"),
        ("security", "*SecurityRequirement"), ("securityDefinitions", "SecurityDefinitions"), ("tags", "*Tag"),
        ("externalDocs", "ExternalDocs")),
    "Info": _numbered(("title", STRING), ("version", STRING), ("description", STRING),
                      ("termsOfService", STRING), ("contact", "Contact"), ("license", "License")),
    "Contact": _numbered(("name", STRING), ("url", STRING), ("email", STRING)),
    "License": _numbered(("name", STRING), ("url", STRING)),
    "ExternalDocs": _numbered(("description", STRING), ("url", STRING)),
    "Tag": _numbered(("name", STRING), ("description", STRING), ("externalDocs", "ExternalDocs")),
    "PathItem": _numbered(("$ref", STRING), ("get", "Operation"), ("put", "Operation"), ("post", "Operation"),
                          ("delete", "Operation"), ("options", "Operation"), ("head", "Operation"),
                          ("patch", "Operation"), ("parameters", "*ParametersItem")),
    "Operation": _numbered(
        ("tags", "*string"), ("summary", STRING), ("description", STRING), ("externalDocs", "ExternalDocs"),
        ("operationId", STRING), ("produces", "*string"), ("consumes", "*string"),
        ("parameters", "*ParametersItem"), ("responses", "Responses"), ("schemes", "*string"),
        ("deprecated", BOOL), ("security", "*SecurityRequirement")),
    "Response": _numbered(("description", STRING), ("schema", "SchemaItem"), ("headers", "Headers"),
                          ("examples", "Examples")),
    "JsonReference": _numbered(("$ref", STRING), ("description", STRING)),
    "BodyParameter": _numbered(("description", STRING), ("name", STRING), ("in", STRING), ("required", BOOL),
                               ("schema", "Schema")),
    "HeaderParameterSubSchema": _numbered(
        ("required", BOOL), ("in", STRING), ("description", STRING), ("name", STRING), ("type", STRING),
        ("format", STRING), ("items", "PrimitivesItems"), *_PRIMITIVE_TAIL),
    "PathParameterSubSchema": _numbered(
        ("required", BOOL), ("in", STRING), ("description", STRING), ("name", STRING), ("type", STRING),
        ("format", STRING), ("items", "PrimitivesItems"), *_PRIMITIVE_TAIL),
    "QueryParameterSubSchema": _numbered(
        ("required", BOOL), ("in", STRING), ("description", STRING), ("name", STRING),
        ("allowEmptyValue", BOOL), ("type", STRING), ("format", STRING), ("items", "PrimitivesItems"),
        *_PRIMITIVE_TAIL),
    "FormDataParameterSubSchema": _numbered(
        ("required", BOOL), ("in", STRING), ("description", STRING), ("name", STRING),
        ("allowEmptyValue", BOOL), ("type", STRING), ("format", STRING), ("items", "PrimitivesItems"),
        *_PRIMITIVE_TAIL),
    "PrimitivesItems": _numbered(("type", STRING), ("format", STRING), ("items", "PrimitivesItems"),
                                 *_PRIMITIVE_TAIL),
    "Header": _numbered(("type", STRING), ("format", STRING), ("items", "PrimitivesItems"), *_PRIMITIVE_TAIL,
                        ("description", STRING)),
    "Schema": _numbered(
        ("$ref", STRING), ("format", STRING), ("title", STRING), ("description", STRING), ("default", ANY),
        ("multipleOf", DOUBLE), ("maximum", DOUBLE), ("exclusiveMaximum", BOOL), ("minimum", DOUBLE),
        ("exclusiveMinimum", BOOL), ("maxLength", INT64), ("minLength", INT64), ("pattern", STRING),
        ("maxItems", INT64), ("minItems", INT64), ("uniqueItems", BOOL), ("maxProperties", INT64),
        ("minProperties", INT64), ("required", "*string"), ("enum", "*" + ANY),
        ("additionalProperties", "AdditionalPropertiesItem"), ("type", "TypeItem"), ("items", "ItemsItem"),
        ("allOf", "*Schema"), ("properties", "Properties"), ("discriminator", STRING), ("readOnly", BOOL),
        ("xml", "Xml"), ("externalDocs", "ExternalDocs"), ("example", ANY)),
    "FileSchema": _numbered(
        ("format", STRING), ("title", STRING), ("description", STRING), ("default", ANY), ("required", "*string"),
        ("type", STRING), ("readOnly", BOOL), ("externalDocs", "ExternalDocs"), ("example", ANY)),
    "Xml": _numbered(("name", STRING), ("namespace", STRING), ("prefix", STRING), ("attribute", BOOL),
                     ("wrapped", BOOL)),
    "BasicAuthenticationSecurity": _numbered(("type", STRING), ("description", STRING)),
    "ApiKeySecurity": _numbered(("type", STRING), ("name", STRING), ("in", STRING), ("description", STRING)),
    "Oauth2ImplicitSecurity": _numbered(("type", STRING), ("flow", STRING), ("scopes", "Oauth2Scopes"),
                                        ("authorizationUrl", STRING), ("description", STRING)),
    "Oauth2PasswordSecurity": _numbered(("type", STRING), ("flow", STRING), ("scopes", "Oauth2Scopes"),
                                        ("tokenUrl", STRING), ("description", STRING)),
    "Oauth2ApplicationSecurity": _numbered(("type", STRING), ("flow", STRING), ("scopes", "Oauth2Scopes"),
                                           ("tokenUrl", STRING), ("description", STRING)),
    "Oauth2AccessCodeSecurity": _numbered(("type", STRING), ("flow", STRING), ("scopes", "Oauth2Scopes"),
                                          ("authorizationUrl", STRING), ("tokenUrl", STRING),
                                          ("description", STRING)),
}

# The field number of ``repeated NamedAny vendor_extension`` (``x-`` keys) per message.
VENDOR = {name: len(fields) + 1 for name, fields in MESSAGES.items()
          if name not in ("JsonReference", "BodyParameter", "FileSchema")}
VENDOR.update({"BodyParameter": 6, "FileSchema": 10, "Paths": 1, "Responses": 2})

# Map messages: every key (matching the pattern) becomes a ``Named<value>`` entry in
# field ``number``; the value is encoded as ``value`` (a message name, ``string``,
# ``any`` or ``StringArray``).
MAPS: dict[str, tuple[int, str, Optional[re.Pattern]]] = {
    "Definitions": (1, "Schema", None),
    "Properties": (1, "Schema", None),
    "ParameterDefinitions": (1, "Parameter", None),
    "ResponseDefinitions": (1, "Response", None),
    "SecurityDefinitions": (1, "SecurityDefinitionsItem", None),
    "Headers": (1, "Header", None),
    "Examples": (1, ANY, None),
    "Default": (1, ANY, None),
    "Oauth2Scopes": (1, STRING, None),
    "SecurityRequirement": (1, "StringArray", None),
    "Paths": (2, "PathItem", re.compile(r"^/")),
    "Responses": (1, "ResponseValue", re.compile(r"^([0-9]{3})$|^(default)$")),
}


# ------------------------------------------------------------------ YAML of Any values

class _Dumper(YamlDumperBase):
    pass


def _yaml(value: Any) -> str:
    """gnostic's ``Any.yaml``: the YAML of a JSON value (read back by kube-openapi)."""
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True,
                     width=1 << 30)
    return text[:-4] if text.endswith("\n...\n") else text  # no document end marker after a scalar


def _any(value: Any) -> bytes:
    out = bytearray()
    text = _yaml(value)
    if text:
        write_bytes_field(out, 2, text.encode())
    return bytes(out)


# ------------------------------------------------------------------ encoding

def _write_scalar(out: bytearray, number: int, kind: str, value: Any) -> None:
    if kind == STRING:
        if isinstance(value, str) and value:
            write_bytes_field(out, number, value.encode())
    elif kind == BOOL:
        if value is True:
            write_tag(out, number, VARINT)
            out.append(1)
    elif kind == INT64:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and int(value):
            write_tag(out, number, VARINT)
            write_varint(out, int(value))
    elif kind == DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            write_tag(out, number, FIXED64)
            out += struct.pack("<d", float(value))
    elif kind == ANY:
        write_bytes_field(out, number, _any(value))


def encode_message(name: str, obj: Any) -> bytes:
    """The message ``name`` for the JSON value ``obj`` (a dict for most messages)."""
    special = _SPECIAL.get(name)
    if special is not None:
        return special(obj)
    if name in MAPS:
        return _encode_map(name, obj)
    fields = MESSAGES[name]
    if not isinstance(obj, dict):
        return b""
    parts: list[tuple[int, bytes]] = []
    vendor = VENDOR.get(name)
    extensions = bytearray()
    for key, value in obj.items():
        spec = fields.get(key)
        if spec is None:
            if vendor is not None and key.startswith("x-"):
                extensions += _named_any(vendor, key, value)
            continue  # not a key gnostic knows here: left out
        number, kind = spec
        out = bytearray()
        if kind.startswith("*"):
            kind = kind[1:]
            for item in value if isinstance(value, list) else ():
                _write_one(out, number, kind, item, repeated=True)
        else:
            _write_one(out, number, kind, value)
        if out:
            parts.append((number, bytes(out)))
    if extensions:
        parts.append((vendor, bytes(extensions)))  # type: ignore[arg-type]
    parts.sort(key=lambda p: p[0])
    return b"".join(p[1] for p in parts)


def _write_one(out: bytearray, number: int, kind: str, value: Any, repeated: bool = False) -> None:
    if kind in (STRING, BOOL, INT64, DOUBLE):
        if repeated and kind == STRING:  # repeated strings keep empty ones
            write_bytes_field(out, number, str(value).encode())
        else:
            _write_scalar(out, number, kind, value)
    elif kind == ANY:
        write_bytes_field(out, number, _any(value))
    elif value is not None:
        write_bytes_field(out, number, encode_message(kind, value))


def _named_any(number: int, key: str, value: Any) -> bytes:
    entry = bytearray()
    write_bytes_field(entry, 1, key.encode())
    write_bytes_field(entry, 2, _any(value))
    out = bytearray()
    write_bytes_field(out, number, bytes(entry))
    return bytes(out)


def _encode_map(name: str, obj: Any) -> bytes:
    number, value_kind, pattern = MAPS[name]
    if not isinstance(obj, dict):
        return b""
    entries = bytearray()
    extensions = bytearray()
    vendor = VENDOR.get(name)
    for key, value in obj.items():
        if pattern is not None and not pattern.search(key):
            if vendor is not None and key.startswith("x-"):
                extensions += _named_any(vendor, key, value)
            continue
        entry = bytearray()
        write_bytes_field(entry, 1, str(key).encode())
        if value_kind == STRING:
            if value:
                write_bytes_field(entry, 2, str(value).encode())
        elif value_kind == ANY:
            write_bytes_field(entry, 2, _any(value))
        elif value_kind == "StringArray":
            items = bytearray()
            for item in value if isinstance(value, list) else ():
                write_bytes_field(items, 1, str(item).encode())
            write_bytes_field(entry, 2, bytes(items))
        else:
            write_bytes_field(entry, 2, encode_message(value_kind, value))
        write_bytes_field(entries, number, bytes(entry))
    if vendor is not None and vendor < number:  # Paths: vendor_extension (1) before path (2)
        return bytes(extensions) + bytes(entries)
    return bytes(entries) + bytes(extensions)


# ------------------------------------------------------------------ oneofs

def _oneof(number: int, payload: bytes) -> bytes:
    out = bytearray()
    write_bytes_field(out, number, payload)
    return bytes(out)


def _parameters_item(obj: Any) -> bytes:
    if isinstance(obj, dict) and "$ref" in obj:
        return _oneof(2, encode_message("JsonReference", obj))
    return _oneof(1, _parameter(obj))


_NON_BODY = {"header": (1, "HeaderParameterSubSchema"), "formData": (2, "FormDataParameterSubSchema"),
             "query": (3, "QueryParameterSubSchema"), "path": (4, "PathParameterSubSchema")}


def _parameter(obj: Any) -> bytes:
    where = obj.get("in") if isinstance(obj, dict) else None
    if where == "body":
        return _oneof(1, encode_message("BodyParameter", obj))
    number, message = _NON_BODY.get(where, (3, "QueryParameterSubSchema"))  # type: ignore[arg-type]
    return _oneof(2, _oneof(number, encode_message(message, obj)))


def _response_value(obj: Any) -> bytes:
    if isinstance(obj, dict) and "$ref" in obj:  # a Response may not carry $ref: gnostic takes the reference
        return _oneof(2, encode_message("JsonReference", obj))
    return _oneof(1, encode_message("Response", obj))


def _schema_item(obj: Any) -> bytes:
    if isinstance(obj, dict) and obj.get("type") == "file":
        return _oneof(2, encode_message("FileSchema", obj))
    return _oneof(1, encode_message("Schema", obj))


def _additional_properties(obj: Any) -> bytes:
    if isinstance(obj, bool):  # a oneof member is written even when false
        out = bytearray()
        write_tag(out, 2, VARINT)
        out.append(1 if obj else 0)
        return bytes(out)
    return _oneof(1, encode_message("Schema", obj))


def _type_item(obj: Any) -> bytes:
    values = obj if isinstance(obj, list) else [obj]
    out = bytearray()
    for value in values:
        if isinstance(value, str):
            write_bytes_field(out, 1, value.encode())
    return bytes(out)


def _items_item(obj: Any) -> bytes:
    values = obj if isinstance(obj, list) else [obj]
    out = bytearray()
    for value in values:
        write_bytes_field(out, 1, encode_message("Schema", value))
    return bytes(out)


_SECURITY = {"basic": (1, "BasicAuthenticationSecurity"), "apiKey": (2, "ApiKeySecurity")}
_OAUTH_FLOWS = {"implicit": (3, "Oauth2ImplicitSecurity"), "password": (4, "Oauth2PasswordSecurity"),
                "application": (5, "Oauth2ApplicationSecurity"), "accessCode": (6, "Oauth2AccessCodeSecurity")}


def _security_definitions_item(obj: Any) -> bytes:
    if not isinstance(obj, dict):
        return b""
    found = _SECURITY.get(obj.get("type")) or _OAUTH_FLOWS.get(obj.get("flow"))  # type: ignore[arg-type]
    if found is None:
        return b""
    return _oneof(found[0], encode_message(found[1], obj))


def _string_array(obj: Any) -> bytes:
    out = bytearray()
    for item in obj if isinstance(obj, list) else ():
        write_bytes_field(out, 1, str(item).encode())
    return bytes(out)


_SPECIAL: dict[str, Callable[[Any], bytes]] = {
    "ParametersItem": _parameters_item,
    "Parameter": _parameter,
    "ResponseValue": _response_value,
    "SchemaItem": _schema_item,
    "AdditionalPropertiesItem": _additional_properties,
    "TypeItem": _type_item,
    "ItemsItem": _items_item,
    "SecurityDefinitionsItem": _security_definitions_item,
    "StringArray": _string_array,
}


def encode_document(doc: dict) -> bytes:
    """``openapi_v2.Document`` bytes of a swagger 2.0 document."""
    return encode_message("Document", doc)


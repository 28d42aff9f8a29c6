"""Secrets (core/v1): ``stringData`` folded into ``data``, base64 values,
type defaults and the keys each type requires, the size limit, and an
immutable ``type`` / ``immutable`` flag."""
from __future__ import annotations

import base64
import json

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import data_keys
from kapiserver.machinery import errors, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.Secret"
OPAQUE = "Opaque"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
DOCKERCFG = "kubernetes.io/dockercfg"
DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
BASIC_AUTH = "kubernetes.io/basic-auth"
SSH_AUTH = "kubernetes.io/ssh-auth"
TLS = "kubernetes.io/tls"
REDACTED = "<secret contents redacted>"


def fold_string_data(obj: dict) -> None:
    """``stringData`` is write-only: its entries replace those of ``data``, base64-encoded."""
    string_data = obj.pop("stringData", None)
    if not string_data:
        return
    if not isinstance(string_data, dict):
        raise errors.bad_request('Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal '
                                 'non-object into Go struct field Secret.stringData of type map[string]string')
    data = obj.get("data")
    if not isinstance(data, dict):
        data = obj["data"] = {}
    for key, value in string_data.items():
        if not isinstance(value, str):
            raise errors.bad_request('Secret in version "v1" cannot be handled as a Secret: json: cannot '
                                     'unmarshal non-string into Go struct field Secret.stringData of type string')
        data[key] = base64.b64encode(value.encode()).decode()


def _json_problem(raw: bytes) -> str:
    """A Go-like message for content that is not a JSON object."""
    try:
        value = json.loads(raw.decode())
    except UnicodeDecodeError:
        return "invalid character looking for beginning of value"
    except json.JSONDecodeError as e:
        if not raw.strip():
            return "unexpected end of JSON input"
        return f"invalid character {raw.decode()[e.pos]!r} looking for beginning of value" \
            if e.pos < len(raw.decode()) else "unexpected end of JSON input"
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "bool", type(None): "null"}.get(type(value), "number")
        return f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    return ""


class SecretStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        data_keys.check_base64_map(obj, "data", "Secret")
        fold_string_data(obj)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        data_keys.check_base64_map(new, "data", "Secret")
        fold_string_data(new)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        if not obj.get("type"):
            obj["type"] = OPAQUE

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        data = obj.get("data") or {}
        causes = field_checks.kube_object_meta(obj) + data_keys.validate_keys(data, "data")
        decoded = {k: data_keys.decode_value(v) or b"" for k, v in data.items()}
        if sum(len(v) for v in decoded.values()) > data_keys.MAX_SIZE:
            causes.append(errors.field_too_long("data", data_keys.MAX_SIZE))
        secret_type = obj.get("type") or OPAQUE

        def required(key: str) -> None:
            causes.append(errors.field_required(data_keys.key_path("data", key)))

        if secret_type == SERVICE_ACCOUNT_TOKEN:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
                causes.append(errors.field_required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]"))
        elif secret_type in (DOCKERCFG, DOCKER_CONFIG_JSON):
            key = ".dockercfg" if secret_type == DOCKERCFG else ".dockerconfigjson"
            if key not in data:
                required(key)
            else:
                problem = _json_problem(decoded[key])
                if problem:
                    causes.append(errors.field_invalid(data_keys.key_path("data", key), REDACTED, problem))
        elif secret_type == BASIC_AUTH:
            if "username" not in data and "password" not in data:
                required("username")
                required("password")
        elif secret_type == SSH_AUTH:
            if not decoded.get("ssh-privatekey"):
                required("ssh-privatekey")
        elif secret_type == TLS:
            for key in ("tls.crt", "tls.key"):
                if key not in data:
                    required(key)
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = []
        if (new.get("type") or OPAQUE) != (old.get("type") or OPAQUE):
            causes.append(errors.field_invalid("type", new.get("type") or OPAQUE, validation.FIELD_IMMUTABLE))
        if old.get("immutable") is True:
            if new.get("immutable") is not True:
                causes.append(errors.field_forbidden("immutable", data_keys.IMMUTABLE_MESSAGE))
            if not data_keys.same_map(new.get("data"), old.get("data")):
                causes.append(errors.field_forbidden("data", data_keys.IMMUTABLE_MESSAGE))
        return causes + self.validate(rtype, new)


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Secret", plural="secrets", singular="secret", namespaced=True,
        strategy=SecretStrategy(), schema_name=SCHEMA,
        selectable_fields={"type": columns.text_at("type")},
        field_labels=FieldLabelConversion(("type", "metadata.namespace", "metadata.name")),
        table_columns=(
            columns.name_column(),
            columns.column("Type", lambda o: o.get("type") or "", SCHEMA, "type"),
            columns.column("Data", lambda o: len(o.get("data") or {}), SCHEMA, "data"),
            columns.age_column(),
        ),
    )

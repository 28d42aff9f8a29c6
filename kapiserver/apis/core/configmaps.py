"""ConfigMaps (core/v1): key rules, no overlap between data and binaryData,
the 1 MiB total, and ``immutable``."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import data_keys
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.ConfigMap"
# The ConfigMap of the cluster's CA in every namespace: the root CA publisher writes it
# (controllers/namespace_defaults.py), service-account token volumes project it
# (admission/service_account.py).  Upstream's RootCACertConfigMapName.
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


class ConfigMapStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        data_keys.check_base64_map(obj, "binaryData", "ConfigMap")

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        data_keys.check_base64_map(new, "binaryData", "ConfigMap")

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        causes = field_checks.kube_object_meta(obj)
        size = 0
        for key, value in data.items():
            for problem in validation.is_config_map_key(key):
                causes.append(errors.field_invalid(data_keys.key_path("data", key), key, problem))
            if key in binary:
                causes.append(errors.field_invalid(data_keys.key_path("data", key), key,
                                                   "duplicate of key present in binaryData"))
            size += len(value.encode()) if isinstance(value, str) else 0
        causes.extend(data_keys.validate_keys(binary, "binaryData"))
        size += sum(len(data_keys.decode_value(v) or b"") for v in binary.values())
        if size > data_keys.MAX_SIZE:
            # upstream reports the whole object, whose empty path prints as "[]"
            causes.append(errors.field_too_long("[]", data_keys.MAX_SIZE))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = []
        if old.get("immutable") is True:
            if new.get("immutable") is not True:
                causes.append(errors.field_forbidden("immutable", data_keys.IMMUTABLE_MESSAGE))
            if not data_keys.same_map(new.get("data"), old.get("data")):
                causes.append(errors.field_forbidden("data", data_keys.IMMUTABLE_MESSAGE))
            if not data_keys.same_map(new.get("binaryData"), old.get("binaryData")):
                causes.append(errors.field_forbidden("binaryData", data_keys.IMMUTABLE_MESSAGE))
        return causes + self.validate(rtype, new)


def _data_count(obj: dict) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ConfigMap", plural="configmaps", singular="configmap", namespaced=True,
        strategy=ConfigMapStrategy(), short_names=("cm",), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Data", _data_count, SCHEMA, "data"),
            columns.age_column(),
        ),
    )

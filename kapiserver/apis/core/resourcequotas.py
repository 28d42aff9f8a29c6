"""ResourceQuotas (core/v1): hard limits and a status; nothing computes usage here."""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.ResourceQuota"
SCOPES = ["BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass",
          "Terminating", "VolumeAttributesClass"]


class ResourceQuotaStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = podspec.validate_resource_list(spec.get("hard"), "spec.hard")
        for i, scope in enumerate(spec.get("scopes") or ()):
            if scope not in SCOPES:
                causes.append(errors.field_not_supported(f"spec.scopes[{i}]", scope, SCOPES))
        return causes


def _usage(obj: dict, limits: bool) -> str:
    hard = columns.get_path(obj, "status", "hard", default={}) or {}
    used = columns.get_path(obj, "status", "used", default={}) or {}
    parts = [f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items()) if k.startswith("limits.") == limits]
    return ", ".join(parts)


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ResourceQuota", plural="resourcequotas", singular="resourcequota",
        namespaced=True, strategy=ResourceQuotaStrategy(), short_names=("quota",), has_status=True,
        schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.age_column(),
            columns.column("Request", lambda o: _usage(o, False), desc="Request represents a minimum amount of "
                           "cpu/memory that a container may consume."),
            columns.column("Limit", lambda o: _usage(o, True), desc="Limits control the maximum amount of "
                           "cpu/memory that a container may use independent of contention on the node."),
        ),
    )

"""LimitRanges (core/v1): per-type min/max/default resources, checked lightly."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.LimitRange"
TYPES = ["Container", "PersistentVolumeClaim", "Pod"]


class LimitRangeStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        causes = []
        for i, item in enumerate((obj.get("spec") or {}).get("limits") or ()):
            path = f"spec.limits[{i}]"
            causes += field_checks.one_of((item or {}).get("type"), path + ".type", TYPES, required=True)
            for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
                causes += podspec.validate_resource_list((item or {}).get(key), f"{path}.{key}")
        return causes


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="LimitRange", plural="limitranges", singular="limitrange", namespaced=True,
        strategy=LimitRangeStrategy(), short_names=("limits",), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.TableColumn("Created At", "date", lambda o: columns.get_path(o, "metadata", "creationTimestamp",
                                                                                 default=""),
                                description=columns.description(columns.OBJECT_META, "creationTimestamp")),
        ),
    )

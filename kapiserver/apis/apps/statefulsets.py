"""StatefulSets (apps/v1): defaults, selector/template checks, the mostly immutable spec, scale, columns."""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.apps.v1.StatefulSet"
POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
RETENTION_POLICIES = ["Retain", "Delete"]
# spec fields an update may change; any other difference is refused with UPDATE_FORBIDDEN
MUTABLE_FIELDS = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                  "persistentVolumeClaimRetentionPolicy", "minReadySeconds")
UPDATE_FORBIDDEN = ("updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                    "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden")


def default_statefulset(obj: dict) -> None:
    """Upstream's SetDefaults_StatefulSet (apps/v1)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("partition", 0)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    if isinstance(retention, dict):
        for name in ("whenDeleted", "whenScaled"):
            if not retention.get(name):
                retention[name] = "Retain"
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    workload.default_template(spec)


def _validate_update_strategy(spec: dict) -> list[errors.Cause]:
    strategy = spec.get("updateStrategy") if isinstance(spec.get("updateStrategy"), dict) else {}
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if not kind:
        return [errors.field_required("spec.updateStrategy")]
    if kind == "OnDelete":
        if rolling is not None:
            return [errors.field_invalid("spec.updateStrategy.rollingUpdate", rolling,
                                         "only allowed for updateStrategy 'RollingUpdate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            return []
        causes = workload.non_negative(rolling, "spec.updateStrategy.rollingUpdate", "partition")
        if "maxUnavailable" in rolling:
            at = "spec.updateStrategy.rollingUpdate.maxUnavailable"
            value = rolling["maxUnavailable"]
            causes += workload.positive_int_or_percent(value, at)
            if workload.int_or_percent_value(value) == 0:
                causes.append(errors.field_invalid(at, value, "must be greater than 0"))
            causes += workload.not_more_than_100_percent(value, at)
        return causes
    return [errors.field_invalid("spec.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'")]


class StatefulSetStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_statefulset(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes: list[errors.Cause] = []
        policy = spec.get("podManagementPolicy")
        if not policy:
            causes.append(errors.field_required("spec.podManagementPolicy"))
        elif policy not in POD_MANAGEMENT_POLICIES:
            causes.append(errors.field_invalid("spec.podManagementPolicy", policy,
                                               "must be 'OrderedReady' or 'Parallel'"))
        causes += _validate_update_strategy(spec)
        retention = spec.get("persistentVolumeClaimRetentionPolicy")
        if isinstance(retention, dict):
            for name in ("whenDeleted", "whenScaled"):
                value = retention.get(name)
                if value not in RETENTION_POLICIES:
                    causes.append(errors.field_not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{name}",
                                                             value or "", RETENTION_POLICIES))
        causes += workload.non_negative(spec, "spec", "replicas", "minReadySeconds")
        ordinals = spec.get("ordinals")
        if isinstance(ordinals, dict):
            causes += workload.non_negative(ordinals, "spec.ordinals", "start")
        causes += workload.validate_selector(spec, "spec", "statefulset")
        causes += workload.selector_matches_template(spec, "spec")
        causes += workload.validate_template(spec, "spec", ["Always"])
        if (workload.template_of(spec).get("spec") or {}).get("activeDeadlineSeconds") is not None:
            causes.append(errors.field_forbidden("spec.template.spec.activeDeadlineSeconds",
                                                 "activeDeadlineSeconds in StatefulSet is not Supported"))
        causes += workload.non_negative(spec, "spec", "revisionHistoryLimit")
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        def frozen(obj: dict) -> dict:
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            return {k: v for k, v in spec.items() if k not in MUTABLE_FIELDS}
        causes = self.validate(rtype, new)
        if frozen(new) != frozen(old):
            causes.append(errors.field_forbidden("spec", UPDATE_FORBIDDEN))
        return causes


def resource_type() -> ResourceType:
    wide = workload.wide_columns()
    return ResourceType(
        group="apps", version="v1", kind="StatefulSet", plural="statefulsets", singular="statefulset",
        namespaced=True, strategy=StatefulSetStrategy(), short_names=("sts",), categories=("all",),
        has_status=True, scale=workload.SCALE, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Ready", workload.ready_cell, desc="Number of the pod with ready state"),
            columns.age_column(),
            *wide[:2],  # upstream's -o wide adds CONTAINERS and IMAGES only
        ),
    )

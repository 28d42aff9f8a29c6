"""StatefulSets (apps/v1): defaults, upstream's ValidateStatefulSet (the pod spec of the template is
not validated, as upstream), the mostly immutable spec, scale, columns."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.machinery.validation import DNS1123_LABEL
from kapiserver.registry.resource_type import ResourceType, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.apps.v1.StatefulSet"
POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
RETENTION_POLICIES = ["Retain", "Delete"]
# spec fields an update may change; any other difference is refused with UPDATE_FORBIDDEN
MUTABLE_FIELDS = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                  "minReadySeconds")
UPDATE_FORBIDDEN = ("updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                    "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")


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


def _go_update_strategy(strategy: dict) -> gorepr.GoRepr:
    return gorepr.struct("apps.StatefulSetUpdateStrategy", (
        ("Type", gorepr.quote(strategy.get("type") or "")),
        ("RollingUpdate", gorepr.pointer(strategy.get("rollingUpdate"), "apps.RollingUpdateStatefulSetStrategy"))))


def _validate_update_strategy(spec: dict) -> list[errors.Cause]:
    strategy = as_dict(spec.get("updateStrategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if not kind:
        return [errors.field_required("spec.updateStrategy")]
    if kind == "OnDelete":
        if rolling is not None:
            rendered = gorepr.struct("apps.RollingUpdateStatefulSetStrategy", (
                ("Partition", str((rolling or {}).get("partition") or 0)),
                ("MaxUnavailable", gorepr.pointer((rolling or {}).get("maxUnavailable"), "intstr.IntOrString"))))
            return [errors.field_invalid("spec.updateStrategy.rollingUpdate", rendered,
                                         "only allowed for updateStrategy 'RollingUpdate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            return []
        at = "spec.updateStrategy.rollingUpdate"
        causes = field_checks.non_negative(rolling, at, "partition")
        if rolling.get("maxUnavailable") is not None:
            value = rolling["maxUnavailable"]
            causes += field_checks.positive_int_or_percent(value, f"{at}.maxUnavailable")
            if field_checks.int_or_percent_value(value) == 0:
                causes.append(errors.field_invalid(f"{at}.maxUnavailable", field_checks.go_int_or_string(value),
                                                   "cannot be 0"))
            causes += field_checks.not_more_than_100_percent(value, f"{at}.maxUnavailable")
        return causes
    return [errors.field_invalid("spec.updateStrategy", _go_update_strategy(strategy),
                                 "must be 'RollingUpdate' or 'OnDelete'")]


def validate_statefulset_spec(spec: dict, opts: podspec.PodOptions) -> list[errors.Cause]:
    """upstream's ValidateStatefulSetSpec: the template's labels and annotations are checked, its pod spec
    is not (upstream leaves that to the pods the controller creates)."""
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    causes: list[errors.Cause] = []
    policy = spec.get("podManagementPolicy")
    if not policy:
        causes.append(errors.field_required("spec.podManagementPolicy"))
    elif policy not in POD_MANAGEMENT_POLICIES:
        causes.append(errors.field_invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    causes += _validate_update_strategy(spec)
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if isinstance(retention, dict):
        for name in ("whenDeleted", "whenScaled"):
            value = retention.get(name) or ""
            if value not in RETENTION_POLICIES:
                causes.append(errors.field_not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{name}", value,
                                                         RETENTION_POLICIES))
    causes += field_checks.non_negative(spec, "spec", "replicas", "minReadySeconds")
    if isinstance(spec.get("ordinals"), dict):
        causes += field_checks.non_negative(spec["ordinals"], "spec.ordinals", "start")
    causes += workload.validate_selector(spec, "spec", "statefulset")
    selector = workload.parse_selector(spec.get("selector"))
    template = workload.template_of(spec)
    if selector is None:
        causes.append(errors.field_invalid("spec.selector", gorepr.label_selector(spec.get("selector"))))
    else:
        if not selector.empty and not workload.selector_matches(selector, template):
            causes.append(workload.selector_mismatch(template, "spec"))
        md = as_dict(template.get("metadata"))
        causes += validation.validate_labels(md.get("labels"), "spec.template.labels")
        causes += validation.validate_annotations(md.get("annotations"), "spec.template.annotations")
        causes += podspec.validate_pod_specific_annotations(md.get("annotations"), template.get("spec"),
                                                            "spec.template.annotations", opts)
    causes += workload.restart_always(template, "spec")
    if (template.get("spec") or {}).get("activeDeadlineSeconds") is not None:
        causes.append(errors.field_forbidden("spec.template.spec.activeDeadlineSeconds",
                                             "activeDeadlineSeconds in StatefulSet is not Supported"))
    return causes


class StatefulSetStrategy(Strategy):
    tracks_generation = True
    name_validation = DNS1123_LABEL

    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_statefulset(obj)
        rolling = ((obj.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate")
        if isinstance(rolling, dict):
            rolling.pop("maxUnavailable", None)  # MaxUnavailableStatefulSet is off in 1.32: upstream drops it

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateStatefulSet."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_statefulset_spec(spec, workload.template_options(obj))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateStatefulSetUpdate: most of the spec is fixed."""
        def frozen(obj: dict) -> dict:
            spec = as_dict(obj.get("spec"))
            return {k: v for k, v in spec.items() if k not in MUTABLE_FIELDS}
        spec = as_dict(new.get("spec"))
        causes = field_checks.kube_object_meta(new) + validate_statefulset_spec(spec,
                                                                              workload.template_options(new, old))
        if frozen(new) != frozen(old):
            causes.append(errors.field_forbidden("spec", UPDATE_FORBIDDEN))
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateStatefulSetStatusUpdate."""
        causes = workload.validate_replica_status(
            new.get("status"), "status",
            ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas",
             "observedGeneration", "collisionCount"),
            ("readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"),
            "cannot be greater than status.readyReplicas")
        return causes + workload.collision_count_decremented(new, old)


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

"""Deployments (apps/v1): rollout defaults, upstream's ValidateDeployment, scale and columns.

No controller runs here (the envtest contract): nothing creates ReplicaSets or
fills status, so ``kubectl rollout status`` waits forever.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors, gorepr
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.apps.v1.Deployment"
STATUS = "io.k8s.api.apps.v1.DeploymentStatus"
STRATEGY_TYPES = ["Recreate", "RollingUpdate"]


def default_deployment(obj: dict) -> None:
    """Upstream's SetDefaults_Deployment (apps/v1)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy.get("type") == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    workload.default_template(spec)


def _go_strategy(strategy: dict) -> gorepr.GoRepr:
    rolling = strategy.get("rollingUpdate")
    return gorepr.struct("apps.DeploymentStrategy", (
        ("Type", gorepr.quote(strategy.get("type") or "")),
        ("RollingUpdate", gorepr.pointer(rolling, "apps.RollingUpdateDeployment"))))


def validate_strategy(strategy: dict, path: str) -> list[errors.Cause]:
    """Upstream's ValidateDeploymentStrategy and ValidateRollingUpdateDeployment."""
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [errors.field_forbidden(f"{path}.rollingUpdate",
                                           "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            return [errors.field_required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
        at = f"{path}.rollingUpdate"
        unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
        causes = field_checks.positive_int_or_percent(unavailable, f"{at}.maxUnavailable")
        causes += field_checks.positive_int_or_percent(surge, f"{at}.maxSurge")
        if field_checks.int_or_percent_value(unavailable) == 0 and field_checks.int_or_percent_value(surge) == 0:
            causes.append(errors.field_invalid(f"{at}.maxUnavailable", field_checks.go_int_or_string(unavailable),
                                               "may not be 0 when `maxSurge` is 0"))
        causes += field_checks.not_more_than_100_percent(unavailable, f"{at}.maxUnavailable")
        return causes
    return [errors.field_not_supported(path, _go_strategy(strategy), STRATEGY_TYPES)]


def validate_deployment_spec(spec: dict, opts: podspec.PodOptions) -> list[errors.Cause]:
    """upstream's ValidateDeploymentSpec."""
    causes = field_checks.non_negative(spec, "spec", "replicas")
    causes += workload.validate_selector(spec, "spec", "deployment")
    selector = workload.parse_selector(spec.get("selector"))
    if selector is None:
        causes.append(errors.field_invalid("spec.selector", gorepr.label_selector(spec.get("selector")),
                                           "invalid label selector"))
    else:
        causes += workload.validate_replicated_template(spec, "spec", selector, "ReplicaSet", opts)
    strategy = spec.get("strategy")
    causes += validate_strategy(strategy if isinstance(strategy, dict) else {}, "spec.strategy")
    causes += field_checks.non_negative(spec, "spec", "minReadySeconds", "revisionHistoryLimit")
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        causes += field_checks.non_negative(spec, "spec", "progressDeadlineSeconds")
        if isinstance(deadline, int) and deadline <= (spec.get("minReadySeconds") or 0):
            causes.append(errors.field_invalid("spec.progressDeadlineSeconds", deadline,
                                               "must be greater than minReadySeconds"))
    return causes


class DeploymentStrategy(Strategy):
    tracks_generation = True
    status_fixed_metadata = ("labels",)  # upstream's deploymentStatusStrategy keeps the old labels

    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_deployment(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateDeployment."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_deployment_spec(spec, workload.template_options(obj))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateDeploymentUpdate, and apps/v1's fixed selector."""
        spec = as_dict(new.get("spec"))
        causes = field_checks.kube_object_meta(new) + validate_deployment_spec(
            spec, workload.template_options(new, old))
        return causes + workload.selector_immutable(new, old)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateDeploymentStatusUpdate."""
        causes = workload.validate_replica_status(
            new.get("status"), "status",
            ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
             "unavailableReplicas", "collisionCount"),
            ("updatedReplicas", "readyReplicas", "availableReplicas"), "cannot be greater than readyReplicas")
        return causes + workload.collision_count_decremented(new, old)

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        """Spec changes and annotation changes (copied to ReplicaSets upstream) bump the generation."""
        new_annotations = (new.get("metadata") or {}).get("annotations") or {}
        old_annotations = (old.get("metadata") or {}).get("annotations") or {}
        return super().generation_changes(rtype, new, old) or new_annotations != old_annotations


def resource_type() -> ResourceType:
    return ResourceType(
        group="apps", version="v1", kind="Deployment", plural="deployments", singular="deployment",
        namespaced=True, strategy=DeploymentStrategy(), short_names=("deploy",), categories=("all",),
        has_status=True, scale=workload.SCALE, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Ready", workload.ready_cell, desc="Number of the pod with ready state"),
            columns.column("Up-to-date", lambda o: workload.status_int(o, "updatedReplicas"), STATUS,
                           "updatedReplicas", type="integer"),
            columns.column("Available", lambda o: workload.status_int(o, "availableReplicas"), STATUS,
                           "availableReplicas", type="integer"),
            columns.age_column(),
            *workload.wide_columns(),
        ),
    )

"""Deployments (apps/v1): rollout defaults, selector/template checks, scale, upstream's columns.

No controller runs here (the envtest contract): nothing creates ReplicaSets or
fills status, so ``kubectl rollout status`` waits forever.
"""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

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


def _go_strategy(strategy: dict) -> str:
    rolling = "(*apps.RollingUpdateDeployment)(nil)" if strategy.get("rollingUpdate") is None else \
        "(*apps.RollingUpdateDeployment)(...)"
    return f"apps.DeploymentStrategy{{Type:{errors.render_value(strategy.get('type') or '')}, RollingUpdate:{rolling}}}"


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
        causes = workload.positive_int_or_percent(unavailable, f"{at}.maxUnavailable")
        causes += workload.positive_int_or_percent(surge, f"{at}.maxSurge")
        if not workload.int_or_percent_value(unavailable) and not workload.int_or_percent_value(surge):
            causes.append(errors.field_invalid(f"{at}.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0"))
        causes += workload.not_more_than_100_percent(unavailable, f"{at}.maxUnavailable")
        return causes
    return [errors.Cause(errors.NOT_SUPPORTED, f"Unsupported value: {_go_strategy(strategy)}: supported values: "
                         + ", ".join(errors.render_value(v) for v in STRATEGY_TYPES), path)]


def validate_replicated_template(spec: dict, path: str, kind_word: str) -> list[errors.Cause]:
    """What Deployments and ReplicaSets check on their selector and template (ValidatePodTemplateSpecForReplicaSet)."""
    causes = workload.validate_selector(spec, path, kind_word)
    causes += workload.selector_matches_template(spec, path)
    causes += workload.validate_template(spec, path, ["Always"])
    if (workload.template_of(spec).get("spec") or {}).get("activeDeadlineSeconds") is not None:
        causes.append(errors.field_forbidden(f"{path}.template.spec.activeDeadlineSeconds",
                                             "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return causes


class DeploymentStrategy(Strategy):
    status_fixed_metadata = ("labels",)  # upstream's deploymentStatusStrategy keeps the old labels

    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_deployment(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = workload.non_negative(spec, "spec", "replicas")
        # upstream reports "empty selector is invalid for deployment" for every replicated kind
        causes += validate_replicated_template(spec, "spec", "deployment")
        strategy = spec.get("strategy")
        causes += validate_strategy(strategy if isinstance(strategy, dict) else {}, "spec.strategy")
        causes += workload.non_negative(spec, "spec", "minReadySeconds", "revisionHistoryLimit")
        deadline = spec.get("progressDeadlineSeconds")
        if isinstance(deadline, int):
            causes += workload.non_negative(spec, "spec", "progressDeadlineSeconds")
            if deadline <= (spec.get("minReadySeconds") or 0):
                causes.append(errors.field_invalid("spec.progressDeadlineSeconds", deadline,
                                                   "must be greater than minReadySeconds"))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        return causes + field_checks.immutable((new.get("spec") or {}).get("selector"),
                                           (old.get("spec") or {}).get("selector"), "spec.selector",
                                           workload.go_label_selector)

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

"""PodDisruptionBudgets (policy/v1): minAvailable XOR maxUnavailable, each a
non-negative int or percentage; status behind its subresource, filled by nobody
(no disruption controller)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.machinery.validation import PATH_SEGMENT
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.policy.v1.PodDisruptionBudget"
SPEC = "io.k8s.api.policy.v1.PodDisruptionBudgetSpec"
STATUS = "io.k8s.api.policy.v1.PodDisruptionBudgetStatus"
EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]


def validate_spec(spec: dict, allow_invalid_values: bool = False) -> list[errors.Cause]:
    """upstream's ValidatePodDisruptionBudgetSpec."""
    causes = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(errors.field_invalid("spec", _go_spec(spec),
                                           "minAvailable and maxUnavailable cannot be both set"))
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            causes.extend(field_checks.positive_int_or_percent(spec[key], f"spec.{key}"))
            causes.extend(field_checks.not_more_than_100_percent(spec[key], f"spec.{key}"))
    causes.extend(validation.validate_label_selector(spec.get("selector"), "spec.selector", allow_invalid_values))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in EVICTION_POLICIES:
        causes.append(errors.field_not_supported("spec.unhealthyPodEvictionPolicy", policy, EVICTION_POLICIES))
    return causes


def _go_spec(spec: dict) -> gorepr.GoRepr:
    return gorepr.struct("policy.PodDisruptionBudgetSpec", (
        ("MinAvailable", gorepr.pointer(spec.get("minAvailable"), "intstr.IntOrString")),
        ("Selector", gorepr.pointer(spec.get("selector"), "v1.LabelSelector")),
        ("MaxUnavailable", gorepr.pointer(spec.get("maxUnavailable"), "intstr.IntOrString")),
        ("UnhealthyPodEvictionPolicy", gorepr.pointer(spec.get("unhealthyPodEvictionPolicy"),
                                                      "policy.UnhealthyPodEvictionPolicyType"))))


class PodDisruptionBudgetStrategy(Strategy):
    """Upstream validates only the spec here: the name gets the generic path-segment check."""

    allow_unconditional_update = False  # upstream's AllowUnconditionalUpdate: a PUT names the version it replaces
    tracks_generation = True
    name_validation = PATH_SEGMENT

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_spec(as_dict(obj.get("spec")))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        allow = bool(validation.validate_label_selector((old.get("spec") or {}).get("selector"), "x"))
        return validate_spec(as_dict(new.get("spec")), allow)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePodDisruptionBudgetStatusUpdate (policy/v1)."""
        status = as_dict(new.get("status"))
        causes = validation.validate_conditions(status.get("conditions"), "status.conditions")
        return causes + field_checks.non_negative(status, "status", "disruptionsAllowed", "currentHealthy",
                                                  "desiredHealthy", "expectedPods")


def _int_or_na(key: str):
    def cell(obj: dict) -> str:
        value = columns.get_path(obj, "spec", key)
        return "N/A" if value is None else str(value)
    return cell


def resource_type() -> ResourceType:
    return ResourceType(
        group="policy", version="v1", kind="PodDisruptionBudget", plural="poddisruptionbudgets",
        singular="poddisruptionbudget", namespaced=True, strategy=PodDisruptionBudgetStrategy(),
        short_names=("pdb",), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Min Available", _int_or_na("minAvailable"), SPEC, "minAvailable"),
            columns.column("Max Unavailable", _int_or_na("maxUnavailable"), SPEC, "maxUnavailable"),
            columns.column("Allowed Disruptions", lambda o: columns.get_path(o, "status", "disruptionsAllowed",
                                                                             default=0),
                           STATUS, "disruptionsAllowed", type="integer"),
            columns.age_column(),
        ),
    )

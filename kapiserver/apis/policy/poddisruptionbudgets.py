"""PodDisruptionBudgets (policy/v1): minAvailable XOR maxUnavailable, each a
non-negative int or percentage; status behind its subresource, filled by nobody
(no disruption controller)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.policy.v1.PodDisruptionBudget"
SPEC = "io.k8s.api.policy.v1.PodDisruptionBudgetSpec"
STATUS = "io.k8s.api.policy.v1.PodDisruptionBudgetStatus"
EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]


class PodDisruptionBudgetStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = []
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            causes.append(errors.field_invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
        for key in ("minAvailable", "maxUnavailable"):
            if spec.get(key) is not None:
                causes.extend(field_checks.int_or_percent(spec[key], f"spec.{key}"))
        causes.extend(field_checks.label_selector(spec.get("selector"), "spec.selector"))
        causes.extend(field_checks.one_of(spec.get("unhealthyPodEvictionPolicy"), "spec.unhealthyPodEvictionPolicy",
                                          EVICTION_POLICIES))
        return causes


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

"""HorizontalPodAutoscalers in autoscaling/v1: a second view of the autoscaling/v2 ones.

One storage (the v2 form, as upstream); v1 has a single CPU target,
``spec.targetCPUUtilizationPercentage``, which is the v2 ``Resource`` cpu
metric with an ``Utilization`` target.  ``kubectl autoscale`` (1.32) creates
through this version.  Other v2 metrics are not visible in v1 (upstream keeps
them in an annotation; that round trip is not implemented).
"""
from __future__ import annotations

import copy
from typing import Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.autoscaling import horizontalpodautoscalers as v2
from kapiserver.machinery import errors
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler"
SPEC = "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerSpec"
STATUS = "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerStatus"
V1, V2 = "autoscaling/v1", "autoscaling/v2"


def _cpu_metric(metrics: Any, target_key: str) -> Optional[int]:
    """The utilization percentage of the cpu Resource metric, if there is one."""
    for metric in metrics if isinstance(metrics, list) else ():
        resource = (metric or {}).get("resource") or {}
        if (metric or {}).get("type") == "Resource" and resource.get("name") == "cpu":
            return (resource.get(target_key) or {}).get("averageUtilization")
    return None


def v1_to_v2(obj: dict) -> dict:
    """The stored (v2) form of a v1 object."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = V2
    spec = as_dict(out.get("spec"))
    percent = spec.pop("targetCPUUtilizationPercentage", None)
    spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization",
        "averageUtilization": percent if percent is not None else v2.DEFAULT_CPU_UTILIZATION}}}]
    status = out.get("status")
    if isinstance(status, dict):
        current = status.pop("currentCPUUtilizationPercentage", None)
        if current is not None:
            status["currentMetrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": current}}}]
        status.setdefault("desiredReplicas", 0)
    return out


def v2_to_v1(obj: dict) -> dict:
    """The v1 view of a stored (v2) object."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = V1
    spec = as_dict(out.get("spec"))
    metrics = spec.pop("metrics", None)
    spec.pop("behavior", None)
    percent = _cpu_metric(metrics, "target")
    if percent is not None:
        spec["targetCPUUtilizationPercentage"] = percent
    status = out.get("status")
    if isinstance(status, dict):
        current = _cpu_metric(status.pop("currentMetrics", None), "current")
        status.pop("conditions", None)
        if current is not None:
            status["currentCPUUtilizationPercentage"] = current
    return out


class HorizontalPodAutoscalerV1Strategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("minReplicas") is None:
            spec["minReplicas"] = 1

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream validates the internal (v2) form: a bad target reports the metric's v2 path."""
        return v2.HorizontalPodAutoscalerStrategy().validate(rtype, v1_to_v2(obj))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return v2.HorizontalPodAutoscalerStrategy().validate_update(rtype, v1_to_v2(new), v1_to_v2(old))

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return field_checks.non_negative(new.get("status"), "status", "currentReplicas", "desiredReplicas")


def _targets(obj: dict) -> str:
    want = columns.get_path(obj, "spec", "targetCPUUtilizationPercentage")
    if want is None:
        return "<none>"
    have = columns.get_path(obj, "status", "currentCPUUtilizationPercentage")
    return f"cpu: {'<unknown>' if have is None else f'{have}%'}/{want}%"


def resource_type() -> ResourceType:
    base = v2.resource_type()
    return ResourceType(
        group="autoscaling", version="v1", kind="HorizontalPodAutoscaler", plural="horizontalpodautoscalers",
        singular="horizontalpodautoscaler", namespaced=True, strategy=HorizontalPodAutoscalerV1Strategy(),
        short_names=("hpa",), categories=("all",), has_status=True, schema_name=SCHEMA,
        storage_resource=base.storage_resource, convert_to_storage=v1_to_v2, convert_from_storage=v2_to_v1,
        storage_version="autoscaling/v2",
        table_columns=(base.table_columns[0], base.table_columns[1],
                       columns.column("Targets", _targets, SPEC, "targetCPUUtilizationPercentage"),
                       *base.table_columns[3:]),
    )

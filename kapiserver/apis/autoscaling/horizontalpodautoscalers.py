"""HorizontalPodAutoscalers (autoscaling/v2, the stored form): upstream's defaults
(one replica minimum, an 80% CPU target, behavior rules filled in when behavior
is given) and replica-range checks; status behind its subresource, filled by
nobody (no HPA controller).  autoscaling/v1 is a view of the same storage
(horizontalpodautoscalers_v1.py)."""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler"
SPEC = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec"
STATUS = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus"
DEFAULT_CPU_UTILIZATION = 80
METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
SELECT_POLICIES = ["Disabled", "Max", "Min"]
SCALING_POLICY_TYPES = ["Percent", "Pods"]
_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
_SCALE_DOWN = {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
               "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _fill(rules: Any, defaults: dict) -> dict:
    rules = rules if isinstance(rules, dict) else {}
    for key, value in defaults.items():
        if rules.get(key) is None:
            rules[key] = copy.deepcopy(value)
    return rules


class HorizontalPodAutoscalerStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if spec.get("minReplicas") is None:
            spec["minReplicas"] = 1
        if not spec.get("metrics"):
            spec["metrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
        behavior = spec.get("behavior")
        if isinstance(behavior, dict):
            behavior["scaleUp"] = _fill(behavior.get("scaleUp"), _SCALE_UP)
            behavior["scaleDown"] = _fill(behavior.get("scaleDown"), _SCALE_DOWN)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = []
        ref = spec.get("scaleTargetRef") if isinstance(spec.get("scaleTargetRef"), dict) else {}
        for key in ("kind", "name"):
            value = ref.get(key) or ""
            if not value:
                causes.append(errors.field_required(f"spec.scaleTargetRef.{key}"))
            else:
                causes.extend(errors.field_invalid(f"spec.scaleTargetRef.{key}", value, p)
                              for p in validation.is_path_segment_name(value))
        low, high = spec.get("minReplicas"), spec.get("maxReplicas")
        if isinstance(low, int) and low < 1:
            causes.append(errors.field_invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
        if not isinstance(high, int) or high < 1:
            causes.append(errors.field_invalid("spec.maxReplicas", high or 0, "must be greater than 0"))
        elif isinstance(low, int) and high < low:
            causes.append(errors.field_invalid("spec.maxReplicas", high,
                                               "must be greater than or equal to `minReplicas`"))
        for i, metric in enumerate(spec.get("metrics") or []):
            metric = metric if isinstance(metric, dict) else {}
            causes.extend(field_checks.one_of(metric.get("type"), f"spec.metrics[{i}].type", METRIC_TYPES,
                                              required=True))
        behavior = spec.get("behavior") if isinstance(spec.get("behavior"), dict) else {}
        for direction in ("scaleUp", "scaleDown"):
            rules = behavior.get(direction) if isinstance(behavior.get(direction), dict) else {}
            at = f"spec.behavior.{direction}"
            causes.extend(field_checks.one_of(rules.get("selectPolicy"), f"{at}.selectPolicy", SELECT_POLICIES))
            for j, policy in enumerate(rules.get("policies") or []):
                policy = policy if isinstance(policy, dict) else {}
                causes.extend(field_checks.one_of(policy.get("type"), f"{at}.policies[{j}].type",
                                                  SCALING_POLICY_TYPES, required=True))
                for key in ("value", "periodSeconds"):
                    if not isinstance(policy.get(key), int) or policy[key] <= 0:
                        causes.append(errors.field_invalid(f"{at}.policies[{j}].{key}", policy.get(key) or 0,
                                                           "must be greater than zero"))
        return causes


def _reference(obj: dict) -> str:
    ref = columns.get_path(obj, "spec", "scaleTargetRef", default={})
    return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"


def _current(status_metrics: list, i: int, kind: str) -> Any:
    """The status entry matching spec metric ``i`` (same position and type), if any."""
    if i < len(status_metrics) and (status_metrics[i] or {}).get("type") == kind:
        return status_metrics[i]
    return None


def _targets(obj: dict) -> str:
    """Upstream's formatHPAMetrics, for the metric kinds operators use most."""
    specs = columns.get_path(obj, "spec", "metrics", default=[])
    if not specs:
        return "<none>"
    current = columns.get_path(obj, "status", "currentMetrics", default=[])
    parts = []
    for i, metric in enumerate(specs):
        kind = (metric or {}).get("type")
        source_key = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
                      "Object": "object", "External": "external"}.get(kind, "")
        source = (metric or {}).get(source_key) or {}
        target = source.get("target") or {}
        now = ((_current(current, i, kind) or {}).get(source_key) or {}).get("current") or {}
        if target.get("averageUtilization") is not None:
            have = now.get("averageUtilization")
            value = f"{'<unknown>' if have is None else f'{have}%'}/{target['averageUtilization']}%"
        else:
            want = target.get("averageValue") if target.get("averageValue") is not None else target.get("value")
            have = now.get("averageValue") if target.get("averageValue") is not None else now.get("value")
            value = f"{'<unknown>' if have is None else have}/{want}"
        if kind in ("Resource", "ContainerResource"):
            value = f"{source.get('name') or ''}: {value}"
        parts.append(value)
    text = ", ".join(parts[:2])
    return text + (f" + {len(parts) - 2} more..." if len(parts) > 2 else "")


def resource_type() -> ResourceType:
    return ResourceType(
        group="autoscaling", version="v2", kind="HorizontalPodAutoscaler", plural="horizontalpodautoscalers",
        singular="horizontalpodautoscaler", namespaced=True, strategy=HorizontalPodAutoscalerStrategy(),
        short_names=("hpa",), categories=("all",), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Reference", _reference, SPEC, "scaleTargetRef"),
            columns.column("Targets", _targets, SPEC, "metrics"),
            columns.column("MinPods", lambda o: columns.get_path(o, "spec", "minReplicas", default="<unset>"),
                           SPEC, "minReplicas"),
            columns.column("MaxPods", lambda o: columns.get_path(o, "spec", "maxReplicas", default=0), SPEC,
                           "maxReplicas", type="integer"),
            columns.column("Replicas", lambda o: columns.get_path(o, "status", "currentReplicas", default=0),
                           STATUS, "currentReplicas", type="integer"),
            columns.age_column(),
        ),
    )

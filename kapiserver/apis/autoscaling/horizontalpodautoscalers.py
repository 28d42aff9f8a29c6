"""HorizontalPodAutoscalers (autoscaling/v2, the stored form): upstream's defaults
(one replica minimum, an 80% CPU target, behavior rules filled in when behavior
is given) and replica-range checks; status behind its subresource, filled by
nobody (no HPA controller).  autoscaling/v1 is a view of the same storage
(horizontalpodautoscalers_v1.py)."""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources
from kapiserver.machinery import errors, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

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
        """upstream's ValidateHorizontalPodAutoscaler (HPAScaleToZero is off in 1.32)."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_spec(spec, 1)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateHorizontalPodAutoscalerUpdate: an HPA already at minReplicas 0 may stay there."""
        spec = as_dict(new.get("spec"))
        lower = 0 if (old.get("spec") or {}).get("minReplicas") == 0 else 1
        return field_checks.kube_object_meta(new) + validate_spec(spec, lower)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return field_checks.non_negative(new.get("status"), "status", "currentReplicas", "desiredReplicas")


MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600
TARGET_TYPES = ("Utilization", "Value", "AverageValue")


def validate_spec(spec: dict, min_replicas_lower_bound: int) -> list[errors.Cause]:
    """upstream's validateHorizontalPodAutoscalerSpec."""
    causes = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas") or 0
    if validation.is_int(low) and low < min_replicas_lower_bound:
        causes.append(errors.field_invalid("spec.minReplicas", low,
                                           f"must be greater than or equal to {min_replicas_lower_bound}"))
    if not validation.is_int(high) or high < 1:
        causes.append(errors.field_invalid("spec.maxReplicas", high, "must be greater than 0"))
    if validation.is_int(low) and validation.is_int(high) and high < low:
        causes.append(errors.field_invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    ref = as_dict(spec.get("scaleTargetRef"))
    causes += cross_version_reference(ref, "spec.scaleTargetRef")
    causes += _validate_metrics(spec.get("metrics") or [], "spec.metrics", low)
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for direction in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(direction), dict):
                causes += _validate_scaling_rules(behavior[direction], f"spec.behavior.{direction}")
    return causes


def cross_version_reference(ref: dict, path: str) -> list[errors.Cause]:
    causes = []
    for key in ("kind", "name"):
        value = ref.get(key) or ""
        if not value:
            causes.append(errors.field_required(f"{path}.{key}"))
        else:
            causes.extend(errors.field_invalid(f"{path}.{key}", value, p)
                          for p in validation.is_path_segment_name(value))
    return causes


def _validate_scaling_rules(rules: dict, path: str) -> list[errors.Cause]:
    causes = []
    window = rules.get("stabilizationWindowSeconds")
    if validation.is_int(window):
        if window < 0:
            causes.append(errors.field_invalid(f"{path}.stabilizationWindowSeconds", window,
                                               "must be greater than or equal to zero"))
        if window > MAX_STABILIZATION_WINDOW_SECONDS:
            causes.append(errors.field_invalid(f"{path}.stabilizationWindowSeconds", window,
                                               f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.selectPolicy", select, SELECT_POLICIES))
    policies = rules.get("policies") or []
    if not policies:
        causes.append(errors.field_required(f"{path}.policies", "must specify at least one Policy"))
    for j, policy in enumerate(policies):
        policy = policy if isinstance(policy, dict) else {}
        at = f"{path}.policies[{j}]"
        kind = policy.get("type") or ""
        if kind not in SCALING_POLICY_TYPES:
            causes.append(errors.field_not_supported(f"{at}.type", kind, SCALING_POLICY_TYPES))
        value, period = policy.get("value") or 0, policy.get("periodSeconds") or 0
        if not validation.is_int(value) or value <= 0:
            causes.append(errors.field_invalid(f"{at}.value", value, "must be greater than zero"))
        if not validation.is_int(period) or period <= 0:
            causes.append(errors.field_invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        if validation.is_int(period) and period > MAX_PERIOD_SECONDS:
            causes.append(errors.field_invalid(f"{at}.periodSeconds", period,
                                               f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return causes


_SOURCE_KEYS = (("object", "Object"), ("external", "External"), ("pods", "Pods"), ("resource", "Resource"),
                ("containerResource", "ContainerResource"))


def _validate_metrics(metrics: list, path: str, min_replicas: Any) -> list[errors.Cause]:
    causes = []
    kinds = set()
    for i, metric in enumerate(metrics):
        metric = metric if isinstance(metric, dict) else {}
        causes += _validate_metric(metric, f"{path}[{i}]")
        kinds.add(metric.get("type"))
    if min_replicas == 0 and not kinds & {"Object", "External"}:
        causes.append(errors.field_forbidden(path, "must specify at least one Object or External metric to support "
                                                   "scaling to zero replicas"))
    return causes


def _validate_metric(metric: dict, path: str) -> list[errors.Cause]:
    causes = []
    kind = metric.get("type") or ""
    if not kind:
        causes.append(errors.field_required(f"{path}.type", "must specify a metric source type"))
    if kind not in METRIC_TYPES:
        causes.append(errors.field_not_supported(f"{path}.type", kind, METRIC_TYPES))
    present = [key for key, _ in _SOURCE_KEYS if metric.get(key) is not None]
    if present:
        first = present[0]
        source = metric[first] if isinstance(metric[first], dict) else {}
        causes += _SOURCE_CHECKS[first](source, f"{path}.{first}")
    expected = {name: key for key, name in _SOURCE_KEYS}.get(kind)
    if expected is None:
        causes.append(errors.field_not_supported(f"{path}.type", kind, METRIC_TYPES))
    elif metric.get(expected) is None:
        causes.append(errors.field_required(f"{path}.{expected}", "must populate information for the given metric "
                                                                   "source"))
    if len(present) != 1:
        for key in sorted(set(present) - {expected}):
            causes.append(errors.field_forbidden(f"{path}.{key}", "must populate the given metric source only"))
    return causes


def _metric_target(target: dict, path: str) -> list[errors.Cause]:
    causes = []
    kind = target.get("type") or ""
    if not kind:
        causes.append(errors.field_required(f"{path}.type", "must specify a metric target type"))
    if kind not in TARGET_TYPES:
        causes.append(errors.field_invalid(f"{path}.type", kind, "must be either Utilization, Value, or AverageValue"))
    for key in ("value", "averageValue"):
        if target.get(key) is not None:
            q, problems = resources.quantity_or_cause(target[key], f"{path}.{key}")
            causes += problems
            if q is not None and q.sign() != 1:
                causes.append(errors.field_invalid(f"{path}.{key}", resources.go_quantity(q), "must be positive"))
    utilization = target.get("averageUtilization")
    if validation.is_int(utilization) and utilization < 1:
        causes.append(errors.field_invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return causes


def _metric_identifier(metric: Any, path: str) -> list[errors.Cause]:
    name = (metric or {}).get("name") or "" if isinstance(metric, dict) else ""
    if not name:
        return [errors.field_required(f"{path}.name", "must specify a metric name")]
    return [errors.field_invalid(f"{path}.name", name, p) for p in validation.is_path_segment_name(name)]


def _target(source: dict) -> dict:
    return as_dict(source.get("target"))


def _object_source(source: dict, path: str) -> list[errors.Cause]:
    described = as_dict(source.get("describedObject"))
    causes = cross_version_reference(described, f"{path}.describedObject")
    causes += _metric_identifier(source.get("metric"), f"{path}.metric") + _metric_target(_target(source),
                                                                                          f"{path}.target")
    if _target(source).get("value") is None and _target(source).get("averageValue") is None:
        causes.append(errors.field_required(f"{path}.target.averageValue",
                                            "must set either a target value or averageValue"))
    return causes


def _external_source(source: dict, path: str) -> list[errors.Cause]:
    causes = _metric_identifier(source.get("metric"), f"{path}.metric") + _metric_target(_target(source),
                                                                                         f"{path}.target")
    target = _target(source)
    if target.get("value") is None and target.get("averageValue") is None:
        causes.append(errors.field_required(f"{path}.target.averageValue",
                                            "must set either a target value for metric or a per-pod target"))
    if target.get("value") is not None and target.get("averageValue") is not None:
        causes.append(errors.field_forbidden(f"{path}.target.value",
                                             "may not set both a target value for metric and a per-pod target"))
    return causes


def _pods_source(source: dict, path: str) -> list[errors.Cause]:
    causes = _metric_identifier(source.get("metric"), f"{path}.metric") + _metric_target(_target(source),
                                                                                         f"{path}.target")
    if _target(source).get("averageValue") is None:
        causes.append(errors.field_required(f"{path}.target.averageValue",
                                            "must specify a positive target averageValue"))
    return causes


def _utilization_or_value(source: dict, path: str) -> list[errors.Cause]:
    causes = _metric_target(_target(source), f"{path}.target")
    target = _target(source)
    if target.get("averageUtilization") is None and target.get("averageValue") is None:
        causes.append(errors.field_required(f"{path}.target.averageUtilization",
                                            "must set either a target raw value or a target utilization"))
    if target.get("averageUtilization") is not None and target.get("averageValue") is not None:
        causes.append(errors.field_forbidden(f"{path}.target.averageValue",
                                             "may not set both a target raw value and a target utilization"))
    return causes


def _resource_source(source: dict, path: str) -> list[errors.Cause]:
    causes = [] if source.get("name") else [errors.field_required(f"{path}.name", "must specify a resource name")]
    return causes + _utilization_or_value(source, path)


def _container_resource_source(source: dict, path: str) -> list[errors.Cause]:
    name, container = source.get("name") or "", source.get("container") or ""
    causes = ([errors.field_required(f"{path}.name", "must specify a resource name")] if not name else
              resources.validate_container_resource_name(name, f"{path}.name"))
    causes += ([errors.field_required(f"{path}.container", "must specify a container")] if not container else
               [errors.field_invalid(f"{path}.container", container, m)
                for m in validation.is_dns1123_label(container)])
    return causes + _utilization_or_value(source, path)


_SOURCE_CHECKS = {"object": _object_source, "external": _external_source, "pods": _pods_source,
                  "resource": _resource_source, "containerResource": _container_resource_source}


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
        kind: Any = (metric or {}).get("type")  # a JSON value: a client may send any
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

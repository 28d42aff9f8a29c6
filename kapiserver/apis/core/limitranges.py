"""LimitRanges (core/v1): per-type min/max/default resources, validated as upstream's ValidateLimitRange."""
from __future__ import annotations

import uuid
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources
from kapiserver.machinery import errors, meta, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.machinery.quantity import Quantity, parse_quantity
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.LimitRange"
TYPES = ["Container", "PersistentVolumeClaim", "Pod"]
_MAX_MILLI_VALUE = (2 ** 63 - 1) // 1000


def _type_name(kind: str, path: str) -> list[errors.Cause]:
    causes = [errors.field_invalid(path, kind, m) for m in validation.is_qualified_name(kind)]
    if not causes and "/" not in kind and kind not in TYPES:
        causes.append(errors.field_invalid(path, kind, "must be a standard limit type or fully qualified"))
    return causes


def _resource_name(kind: str, name: str, path: str) -> list[errors.Cause]:
    if kind in ("Pod", "Container"):
        return resources.validate_container_resource_name(name, path)
    return resources.validate_resource_name(name, path)


def validate_limit_range(obj: dict) -> list[errors.Cause]:
    """upstream's ValidateLimitRange."""
    causes = field_checks.kube_object_meta(obj)
    seen_types: set = set()
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or ()):
        item = item if isinstance(item, dict) else {}
        at = f"spec.limits[{i}]"
        kind = item.get("type") or ""
        causes += _type_name(kind, f"{at}.type")
        if kind in seen_types:
            causes.append(errors.field_duplicate(f"{at}.type", kind))
        seen_types.add(kind)
        found: dict[str, dict[str, Quantity]] = {}
        order = ["max", "min"] + (["default", "defaultRequest"] if kind != "Pod" else []) + ["maxLimitRequestRatio"]
        if kind == "Pod":
            for key in ("default", "defaultRequest"):
                if item.get(key):
                    causes.append(errors.field_forbidden(f"{at}.{key}", "may not be specified when `type` is 'Pod'"))
        for key in order:
            found[key] = {}
            for name, key_path, q, problems in resources.quantities(item.get(key), f"{at}.{key}"):
                causes += _resource_name(kind, name, key_path)
                causes += problems
                if q is not None:
                    found[key][name] = q
        if kind == "PersistentVolumeClaim" and "storage" not in (item.get("min") or {}) and \
                "storage" not in (item.get("max") or {}):
            causes.append(errors.field_required(f"{at}.limits", "either minimum or maximum storage value is required, "
                                                                "but neither was provided"))
        names = sorted(set().union(*(found[k] for k in found)))
        for name in names:
            low, high = found["min"].get(name), found["max"].get(name)
            default, request = found.get("default", {}).get(name), found.get("defaultRequest", {}).get(name)
            ratio = found["maxLimitRequestRatio"].get(name)
            if low is not None and high is not None and low > high:
                causes.append(errors.field_invalid(f"{at}.min[{name}]", resources.go_quantity(low),
                                                   f"min value {low} is greater than max value {high}"))
            if request is not None and low is not None and low > request:
                causes.append(errors.field_invalid(f"{at}.defaultRequest[{name}]", resources.go_quantity(request),
                                                   f"min value {low} is greater than default request value {request}"))
            if request is not None and high is not None and request > high:
                causes.append(errors.field_invalid(f"{at}.defaultRequest[{name}]", resources.go_quantity(request),
                                                   f"default request value {request} is greater than max value {high}"))
            if request is not None and default is not None and request > default:
                causes.append(errors.field_invalid(f"{at}.defaultRequest[{name}]", resources.go_quantity(request),
                                                   f"default request value {request} is greater than default limit "
                                                   f"value {default}"))
            if default is not None and low is not None and low > default:
                causes.append(errors.field_invalid(f"{at}.default[{name}]", resources.go_quantity(low),
                                                   f"min value {low} is greater than default value {default}"))
            if default is not None and high is not None and default > high:
                causes.append(errors.field_invalid(f"{at}.default[{name}]", resources.go_quantity(high),
                                                   f"default value {default} is greater than max value {high}"))
            if ratio is not None and ratio < parse_quantity("1"):
                causes.append(errors.field_invalid(f"{at}.maxLimitRequestRatio[{name}]", resources.go_quantity(ratio),
                                                   f"ratio {ratio} is less than 1"))
            if ratio is not None and low is not None and high is not None:
                limit = _ratio_limit(ratio, low, high)
                if limit is not None and limit[0] > limit[1]:
                    causes.append(errors.field_invalid(f"{at}.maxLimitRequestRatio[{name}]",
                                                       resources.go_quantity(ratio),
                                                       f"ratio {ratio} is greater than max/min = {limit[1]:f}"))
            if not resources.is_overcommit_allowed(name) and default is not None and request is not None and \
                    not default.equals(request):
                causes.append(errors.field_invalid(f"{at}.defaultRequest[{name}]", resources.go_quantity(request),
                                                   f"default value {default} must equal to defaultRequest value "
                                                   f"{request} in {name}"))
    return causes


def _ratio_limit(ratio: Quantity, low: Quantity, high: Quantity) -> Any:
    """(the ratio, max/min) as upstream computes them in float64."""
    ratio_value, low_value, high_value = float(ratio.int_value()), low.int_value(), high.int_value()
    if ratio.int_value() < _MAX_MILLI_VALUE and low_value < _MAX_MILLI_VALUE and high_value < _MAX_MILLI_VALUE:
        ratio_value = ratio.milli_value() / 1000
        low_value, high_value = low.milli_value(), high.milli_value()
    if low_value == 0:
        return None  # Go divides to +Inf: never exceeded
    return ratio_value, high_value / low_value


def default_limit_range_item(item: dict) -> None:
    """upstream's SetDefaults_LimitRangeItem: a container's default limit is its max, its default request
    the default limit, else the min."""
    if item.get("type") != "Container":
        return
    default = as_dict(item.get("default"))
    request = as_dict(item.get("defaultRequest"))
    for key, value in (item.get("max") or {}).items():
        default.setdefault(key, value)
    for key, value in default.items():
        request.setdefault(key, value)
    for key, value in (item.get("min") or {}).items():
        request.setdefault(key, value)
    for key, value in (("default", default), ("defaultRequest", request)):
        if value:
            item[key] = value


class LimitRangeStrategy(Strategy):
    allow_create_on_update = True  # upstream's AllowCreateOnUpdate: a PUT may create one

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        """Upstream's PrepareForCreate: a LimitRange created without a name is named by a new UUID."""
        super().prepare_for_create(rtype, obj)
        md = meta.metadata(obj)
        if not md.get("name"):
            md["name"] = str(uuid.uuid4())

    def default(self, rtype: ResourceType, obj: dict) -> None:
        for item in (obj.get("spec") or {}).get("limits") or () if isinstance(obj.get("spec"), dict) else ():
            if isinstance(item, dict):
                default_limit_range_item(item)
                for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
                    resources.canonicalize_resource_list(item.get(key))

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_limit_range(obj)


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

"""ResourceQuotas (core/v1): hard limits, scopes and a status, validated as upstream's
ValidateResourceQuota; nothing computes usage here."""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.ResourceQuota"
SCOPES = ["Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"]
_POD_COUNT = {"pods"}
_POD_COMPUTE = {"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
_CONFLICTING_SCOPES = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_EXISTS_ONLY_SCOPES = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")


def _scope_valid_for(scope: str, resource: str) -> bool:
    """upstream's IsResourceQuotaScopeValidForResource."""
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return resource in _POD_COUNT or resource in _POD_COMPUTE
    if scope == "BestEffort":
        return resource in _POD_COUNT
    return True


def _go_scope_selector(selector: dict) -> gorepr.GoRepr:
    items = []
    for req in selector.get("matchExpressions") or ():
        req = req if isinstance(req, dict) else {}
        items.append(gorepr.struct("core.ScopedResourceSelectorRequirement", (
            ("ScopeName", gorepr.quote(req.get("scopeName"))), ("Operator", gorepr.quote(req.get("operator"))),
            ("Values", gorepr.string_slice(req.get("values"))))))
    return gorepr.GoRepr("core.ScopeSelector{MatchExpressions:[]core.ScopedResourceSelectorRequirement{"
                         + ", ".join(items) + "}}")


def validate_hard(hard: Any, path: str) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    for name, key_path, q, problems in resources.quantities(hard, path):
        causes += resources.validate_quota_resource_name(name, key_path)
        causes += problems
        if q is not None:
            causes += resources.validate_resource_quantity_value(name, q, key_path)
    return causes


def validate_quota_spec(spec: dict) -> list[errors.Cause]:
    """upstream's ValidateResourceQuotaSpec."""
    causes = validate_hard(spec.get("hard"), "spec.hard")
    hard = sorted(spec.get("hard") or {}) if isinstance(spec.get("hard"), dict) else []
    scopes = spec.get("scopes") or []
    rendered_scopes = gorepr.string_slice(scopes, "core.ResourceQuotaScope")
    for scope in scopes:
        if scope not in SCOPES:
            causes.append(errors.field_invalid("spec.scopes", rendered_scopes, "unsupported scope"))
        for name in hard:
            if resources.is_standard_quota_resource(name) and not _scope_valid_for(scope, name):
                causes.append(errors.field_invalid("spec.scopes", rendered_scopes,
                                                   "unsupported scope applied to resource"))
    for pair in _CONFLICTING_SCOPES:
        if all(p in scopes for p in pair):
            causes.append(errors.field_invalid("spec.scopes", rendered_scopes, "conflicting scopes"))
    selector = spec.get("scopeSelector")
    if isinstance(selector, dict):
        path = "spec.scopeSelector.matchExpressions"
        names = []
        for req in selector.get("matchExpressions") or ():
            req = req if isinstance(req, dict) else {}
            name, operator, values = req.get("scopeName") or "", req.get("operator") or "", req.get("values") or []
            if name not in SCOPES:
                causes.append(errors.field_invalid(f"{path}.scopeName", name, "unsupported scope"))
            for resource in hard:
                if resources.is_standard_quota_resource(resource) and not _scope_valid_for(name, resource):
                    causes.append(errors.field_invalid(path, _go_scope_selector(selector),
                                                       "unsupported scope applied to resource"))
            if name in _EXISTS_ONLY_SCOPES and operator != "Exists":
                causes.append(errors.field_invalid(f"{path}.operator", operator, "must be 'Exists' when scope is any "
                                                   "of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating,"
                                                   " ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or "
                                                   "ResourceQuotaScopeCrossNamespacePodAffinity"))
            if operator in ("In", "NotIn"):
                if not values:
                    causes.append(errors.field_required(f"{path}.values", "must be at least one value when "
                                                        "`operator` is 'In' or 'NotIn' for scope selector"))
            elif operator in ("Exists", "DoesNotExist"):
                if values:
                    causes.append(errors.field_invalid(f"{path}.values", gorepr.string_slice(values),
                                                       "must be no value when `operator` is 'Exist' or "
                                                       "'DoesNotExist' for scope selector"))
            else:
                causes.append(errors.field_invalid(f"{path}.operator", operator, "not a valid selector operator"))
            names.append(name)
        for pair in _CONFLICTING_SCOPES:
            if all(p in names for p in pair):
                causes.append(errors.field_invalid(path, rendered_scopes, "conflicting scopes"))
    return causes


class ResourceQuotaStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        for part, key in (("spec", "hard"), ("status", "hard"), ("status", "used")):
            resources.canonicalize_resource_list((obj.get(part) or {}).get(key) if isinstance(obj.get(part), dict)
                                                 else None)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateResourceQuota."""
        spec = as_dict(obj.get("spec"))
        status = as_dict(obj.get("status"))
        return (field_checks.kube_object_meta(obj) + validate_quota_spec(spec)
                + validate_hard(status.get("hard"), "status.hard") + validate_hard(status.get("used"), "status.used"))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateResourceQuotaUpdate: scopes are fixed."""
        spec = as_dict(new.get("spec"))
        causes = self.validate(rtype, new)
        scopes = spec.get("scopes") or []
        if set(scopes) != set((old.get("spec") or {}).get("scopes") or []):
            causes.append(errors.field_invalid("spec.scopes", gorepr.string_slice(scopes, "core.ResourceQuotaScope"),
                                               validation.FIELD_IMMUTABLE))
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        status = as_dict(new.get("status"))
        return validate_hard(status.get("hard"), "status.hard") + validate_hard(status.get("used"), "status.used")


def _usage(obj: dict, limits: bool) -> str:
    hard = columns.get_path(obj, "status", "hard", default={}) or {}
    used = columns.get_path(obj, "status", "used", default={}) or {}
    parts = [f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items()) if k.startswith("limits.") == limits]
    return ", ".join(parts)


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ResourceQuota", plural="resourcequotas", singular="resourcequota",
        namespaced=True, strategy=ResourceQuotaStrategy(), short_names=("quota",), has_status=True,
        schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.age_column(),
            columns.column("Request", lambda o: _usage(o, False), desc="Request represents a minimum amount of "
                           "cpu/memory that a container may consume."),
            columns.column("Limit", lambda o: _usage(o, True), desc="Limits control the maximum amount of "
                           "cpu/memory that a container may use independent of contention on the node."),
        ),
    )

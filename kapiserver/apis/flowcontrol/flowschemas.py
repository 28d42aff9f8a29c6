"""FlowSchemas (flowcontrol.apiserver.k8s.io/v1, cluster-scoped, status subresource).

Defaults, validation and printing as upstream's (pkg/apis/flowcontrol/v1
defaults, pkg/apis/flowcontrol/validation, the FlowSchema printer: rows of a
list in matching order).  The mandatory ``exempt`` and ``catch-all`` schemas
keep upstream's fixed spec.
"""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.flowcontrol.semantic import semantically_equal
from kapiserver.flowcontrol import bootstrap
from kapiserver.flowcontrol.api import DANGLING, default_flow_schema_spec, matching_order
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.flowcontrol.v1.FlowSchema"
SPEC = "io.k8s.api.flowcontrol.v1.FlowSchemaSpec"
REFERENCE = "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationReference"
MAX_MATCHING_PRECEDENCE = 10000
DISTINGUISHER_METHODS = ["ByNamespace", "ByUser"]
SUPPORTED_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"]
SUBJECT_KINDS = ["Group", "ServiceAccount", "User"]
_NS_INTRO = "each member of this list must be '*' or a DNS-1123 label; "


class FlowSchemaStrategy(Strategy):
    tracks_generation = True
    # a status write replaces the status only (upstream's status strategy keeps all metadata)
    status_fixed_metadata = None

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        obj["status"] = {}

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_flow_schema_spec(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        name = columns.get_path(obj, "metadata", "name", default="")
        spec = as_dict(obj.get("spec"))
        causes = field_checks.kube_object_meta(obj)
        causes += validate_spec(name, spec, "spec")
        mandatory = next((f for f in bootstrap.MANDATORY_FLOW_SCHEMAS if f["metadata"]["name"] == name), None)
        if mandatory is not None:
            fixed = dict(mandatory["spec"])
            default_flow_schema_spec(fixed)
            if not semantically_equal(spec, fixed):
                causes.append(errors.field_invalid("spec", gorepr.GoRepr("flowcontrol.FlowSchemaSpec{...}"),
                                                   f"spec of '{name}' must equal the fixed value"))
        causes += validate_status(obj.get("status"), "status")
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return validate_status(new.get("status"), "status")


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def validate_spec(name: str, spec: dict, path: str) -> list[errors.Cause]:
    """ValidateFlowSchemaSpec."""
    causes: list[errors.Cause] = []
    precedence = spec.get("matchingPrecedence") or 0
    if isinstance(precedence, int):
        if precedence <= 0:
            causes.append(errors.field_invalid(f"{path}.matchingPrecedence", precedence, "must be a positive value"))
        if precedence > MAX_MATCHING_PRECEDENCE:
            causes.append(errors.field_invalid(f"{path}.matchingPrecedence", precedence,
                                               f"must not be greater than {MAX_MATCHING_PRECEDENCE}"))
        if precedence == 1 and name != bootstrap.EXEMPT:
            causes.append(errors.field_invalid(f"{path}.matchingPrecedence", precedence,
                                               "only the schema named 'exempt' may have matchingPrecedence 1"))
    method = spec.get("distinguisherMethod")
    if isinstance(method, dict) and method.get("type") not in DISTINGUISHER_METHODS:
        rendered = gorepr.GoRepr(f"&flowcontrol.FlowDistinguisherMethod{{Type:{gorepr.quote(method.get('type'))}}}")
        causes.append(errors.field_not_supported(f"{path}.distinguisherMethod.type", rendered, DISTINGUISHER_METHODS))
    level = (spec.get("priorityLevelConfiguration") or {}).get("name") or ""
    if level:
        causes += [errors.field_invalid(f"{path}.priorityLevelConfiguration.name", level, msg)
                   for msg in validation.is_dns1123_subdomain(level)]
    else:
        causes.append(errors.field_required(f"{path}.priorityLevelConfiguration.name",
                                            "must reference a priority level"))
    for i, rule in enumerate(_list(spec.get("rules"))):
        causes += _validate_rule(rule if isinstance(rule, dict) else {}, f"{path}.rules[{i}]")
    return causes


def _validate_rule(rule: dict, path: str) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    subjects = _list(rule.get("subjects"))
    if subjects:
        for i, subject in enumerate(subjects):
            causes += _validate_subject(subject if isinstance(subject, dict) else {}, f"{path}.subjects[{i}]")
    else:
        causes.append(errors.field_required(f"{path}.subjects", "subjects must contain at least one value"))
    resource_rules, non_resource_rules = _list(rule.get("resourceRules")), _list(rule.get("nonResourceRules"))
    if not resource_rules and not non_resource_rules:
        causes.append(errors.field_required(path, "at least one of resourceRules and nonResourceRules has to be "
                                                  "non-empty"))
    for i, r in enumerate(resource_rules):
        causes += _validate_resource_rule(r if isinstance(r, dict) else {}, f"{path}.resourceRules[{i}]")
    for i, r in enumerate(non_resource_rules):
        causes += _validate_non_resource_rule(r if isinstance(r, dict) else {}, f"{path}.nonResourceRules[{i}]")
    return causes


_FORBIDDEN_MEMBERS = {"user": "user is forbidden when subject kind is not 'User'",
                      "group": "group is forbidden when subject kind is not 'Group'",
                      "serviceAccount": "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"}


def _validate_subject(subject: dict, path: str) -> list[errors.Cause]:
    kind = subject.get("kind") or ""
    member = {"User": "user", "Group": "group", "ServiceAccount": "serviceAccount"}.get(kind)
    if member is None:
        return [errors.field_not_supported(f"{path}.kind", kind, SUBJECT_KINDS)]
    causes: list[errors.Cause] = []
    value = subject.get(member)
    if value is None:
        causes.append(errors.field_required(f"{path}.{member}",
                                            f"{member} is required when subject kind is '{kind}'"))
    elif member == "serviceAccount":
        name, namespace = value.get("name") or "", value.get("namespace") or ""
        if not name:
            causes.append(errors.field_required(f"{path}.serviceAccount.name"))
        elif name != "*":
            causes += [errors.field_invalid(f"{path}.serviceAccount.name", name, msg)
                       for msg in validation.is_dns1123_subdomain(name)]
        if namespace:
            causes += [errors.field_invalid(f"{path}.serviceAccount.namespace", namespace, msg)
                       for msg in validation.is_dns1123_label(namespace)]
        else:
            causes.append(errors.field_required(f"{path}.serviceAccount.namespace",
                                                "must specify namespace for service account"))
    elif not (value.get("name") or ""):
        causes.append(errors.field_required(f"{path}.{member}.name"))
    for other in ("serviceAccount", "user", "group"):
        if other != member and subject.get(other) is not None:
            causes.append(errors.field_forbidden(f"{path}.{other}", _FORBIDDEN_MEMBERS[other]))
    return causes


def _validate_verbs(verbs: list, path: str) -> list[errors.Cause]:
    if not verbs:
        return [errors.field_required(path, "verbs must contain at least one value")]
    if "*" in verbs:
        if len(verbs) > 1:
            return [errors.field_invalid(path, gorepr.string_slice(verbs), "if '*' is present, must not specify "
                                                                           "other verbs")]
        return []
    if not set(verbs) <= set(SUPPORTED_VERBS):
        return [errors.field_not_supported(path, gorepr.string_slice(verbs), SUPPORTED_VERBS)]
    return []


def _validate_resource_rule(rule: dict, path: str) -> list[errors.Cause]:
    causes = _validate_verbs(_list(rule.get("verbs")), f"{path}.verbs")
    for key, what in (("apiGroups", "api group"), ("resources", "resource")):
        values = _list(rule.get(key))
        if not values:
            causes.append(errors.field_required(f"{path}.{key}", f"resource rules must supply at least one {what}"))
        elif len(values) > 1 and "*" in values:
            causes.append(errors.field_invalid(f"{path}.{key}", gorepr.string_slice(values),
                                               f"if '*' is present, must not specify other {what}s"))
    namespaces = _list(rule.get("namespaces"))
    if not namespaces and not rule.get("clusterScope"):
        causes.append(errors.field_required(f"{path}.namespaces", "resource rules that are not cluster scoped must "
                                                                  "supply at least one namespace"))
    elif "*" in namespaces:
        if len(namespaces) > 1:
            causes.append(errors.field_invalid(f"{path}.namespaces", gorepr.string_slice(namespaces),
                                               "if '*' is present, must not specify other namespaces"))
    else:
        for i, namespace in enumerate(namespaces):
            causes += [errors.field_invalid(f"{path}.namespaces[{i}]", namespace, _NS_INTRO + msg)
                       for msg in validation.is_dns1123_label(str(namespace))]
    return causes


def _validate_non_resource_rule(rule: dict, path: str) -> list[errors.Cause]:
    causes = _validate_verbs(_list(rule.get("verbs")), f"{path}.verbs")
    urls = _list(rule.get("nonResourceURLs"))
    if not urls:
        causes.append(errors.field_required(f"{path}.nonResourceURLs",
                                            "nonResourceURLs must contain at least one value"))
    elif "*" in urls:
        if len(urls) > 1:
            causes.append(errors.field_invalid(f"{path}.nonResourceURLs", gorepr.string_slice(urls),
                                               "if '*' is present, must not specify other non-resource URLs"))
    else:
        for i, url in enumerate(urls):
            problem = _non_resource_url_problem(str(url))
            if problem:
                causes.append(errors.field_invalid(f"{path}.nonResourceURLs[{i}]", url, problem))
    return causes


def _non_resource_url_problem(path: str) -> str:
    """ValidateNonResourceURLPath."""
    if not path:
        return "must not be empty"
    if path == "/":
        return ""
    if not path.startswith("/"):
        return "must start with slash"
    if " " in path:
        return "must not contain white-space"
    if "//" in path:
        return "must not contain double slash"
    stars = path.count("*")
    if stars > 1 or (stars == 1 and path[-2:] != "/*"):
        return "wildcard can only do suffix matching"
    return ""


def validate_status(status: Any, path: str) -> list[errors.Cause]:
    """ValidateFlowSchemaStatus (PriorityLevelConfigurationStatus has the same rules)."""
    causes: list[errors.Cause] = []
    seen: set = set()
    for i, condition in enumerate(_list((status or {}).get("conditions") if isinstance(status, dict) else None)):
        kind = (condition or {}).get("type") or "" if isinstance(condition, dict) else ""
        if kind in seen:
            causes.append(errors.field_duplicate(f"{path}.conditions[{i}].type", kind))
        seen.add(kind)
        if not kind:
            causes.append(errors.field_required(f"{path}.conditions[{i}].type", "must not be empty"))
    return causes


def _dangling(obj: dict) -> str:
    for condition in _list(columns.get_path(obj, "status", "conditions")):
        if isinstance(condition, dict) and condition.get("type") == DANGLING:
            return str(condition.get("status") or "")
    return "?"


def resource_type() -> ResourceType:
    return ResourceType(
        group=bootstrap.GROUP, version=bootstrap.VERSION, kind="FlowSchema", plural="flowschemas",
        singular="flowschema", namespaced=False, strategy=FlowSchemaStrategy(), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("PriorityLevel", lambda o: columns.get_path(o, "spec", "priorityLevelConfiguration",
                                                                       "name", default=""), REFERENCE, "name"),
            columns.column("MatchingPrecedence", lambda o: columns.get_path(o, "spec", "matchingPrecedence",
                                                                            default=0), SPEC, "matchingPrecedence"),
            columns.column("DistinguisherMethod", lambda o: columns.get_path(o, "spec", "distinguisherMethod", "type")
                           or "<none>", SPEC, "distinguisherMethod"),
            columns.age_column(),
            columns.column("MissingPL", _dangling,
                           desc="references a broken or non-existent PriorityLevelConfiguration"),
        ),
        table_row_order=matching_order,
    )

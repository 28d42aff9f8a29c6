"""What Roles/ClusterRoles and RoleBindings/ClusterRoleBindings share:
policy-rule and subject validation, roleRef defaults and immutability,
and their printer columns (upstream's pkg/apis/rbac/validation).

Enforcement lives in kapiserver.auth.rbac (the authorizer, bootstrap policy,
escalation checks) and the aggregation controller in
kapiserver.controllers.clusterrole_aggregation.
"""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, labels, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.machinery.validation import PATH_SEGMENT
from kapiserver.registry.resource_type import Strategy, TableColumn

GROUP = "rbac.authorization.k8s.io"


def _rbac_name_problems(name: str) -> list[str]:
    return validation.is_path_segment_name(name)


def policy_rule(rule: Any, namespaced: bool, path: str) -> list[errors.Cause]:
    """One PolicyRule (upstream's ValidatePolicyRule)."""
    if not isinstance(rule, dict):
        return []
    causes = []
    if not rule.get("verbs"):
        causes.append(errors.field_required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs") or []
    if urls:
        if namespaced:
            causes.append(errors.field_invalid(f"{path}.nonResourceURLs", gorepr.string_slice(urls),
                                               "namespaced rules cannot apply to non-resource URLs"))
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            causes.append(errors.field_invalid(f"{path}.nonResourceURLs", gorepr.string_slice(urls),
                                               "rules cannot apply to both regular resources and non-resource URLs"))
        return causes
    if not rule.get("apiGroups"):
        causes.append(errors.field_required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not rule.get("resources"):
        causes.append(errors.field_required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


def subject(sub: Any, namespaced: bool, path: str) -> list[errors.Cause]:
    """One Subject (upstream's ValidateRoleBindingSubject)."""
    if not isinstance(sub, dict):
        return []
    causes = []
    name, kind, group = sub.get("name") or "", sub.get("kind") or "", sub.get("apiGroup") or ""
    if not name:
        causes.append(errors.field_required(f"{path}.name"))
    if kind == "ServiceAccount":
        if name:
            causes.extend(errors.field_invalid(f"{path}.name", name, p) for p in validation.is_dns1123_subdomain(name))
        if group:
            causes.append(errors.field_not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not sub.get("namespace"):
            causes.append(errors.field_required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != GROUP:
            causes.append(errors.field_not_supported(f"{path}.apiGroup", group, [GROUP]))
    else:
        causes.append(errors.field_not_supported(f"{path}.kind", kind, ["ServiceAccount", "User", "Group"]))
    return causes


def _go_role_ref(ref: dict) -> gorepr.GoRepr:
    """A RoleRef as Go's %#v prints it (upstream's "cannot change roleRef" message)."""
    return gorepr.struct("rbac.RoleRef", (("APIGroup", gorepr.quote(ref.get("apiGroup"))),
                                          ("Kind", gorepr.quote(ref.get("kind"))),
                                          ("Name", gorepr.quote(ref.get("name")))))


class RoleStrategy(Strategy):
    """Roles and ClusterRoles: every rule checked; ClusterRoles may aggregate."""

    name_validation = PATH_SEGMENT
    allow_create_on_update = True

    def validate(self, rtype, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateRole / ValidateClusterRole."""
        return self._validate(rtype, obj, allow_invalid_values=False)

    def validate_update(self, rtype, new: dict, old: dict) -> list[errors.Cause]:
        allow = any(validation.validate_label_selector(sel, "x")
                    for sel in ((old.get("aggregationRule") or {}).get("clusterRoleSelectors") or ()))
        return self._validate(rtype, new, allow_invalid_values=allow)

    @staticmethod
    def _validate(rtype, obj: dict, allow_invalid_values: bool) -> list[errors.Cause]:
        causes = field_checks.kube_object_meta(obj)
        for i, rule in enumerate(obj.get("rules") or []):
            causes.extend(policy_rule(rule, rtype.namespaced, f"rules[{i}]"))
        aggregation = obj.get("aggregationRule")
        if not rtype.namespaced and isinstance(aggregation, dict):
            selectors = aggregation.get("clusterRoleSelectors") or []
            if not selectors:
                causes.append(errors.field_required("aggregationRule.clusterRoleSelectors",
                                                    "at least one clusterRoleSelector required if aggregationRule "
                                                    "is non-nil"))
            for i, sel in enumerate(selectors):
                path = f"aggregationRule.clusterRoleSelectors[{i}]"
                causes.extend(validation.validate_label_selector(sel, path, allow_invalid_values))
                try:
                    labels.selector_from_label_selector_dict(sel if isinstance(sel, dict) else {})
                except errors.StatusError:
                    causes.append(errors.field_invalid(path, None, "invalid label selector."))
        return causes


class BindingStrategy(Strategy):
    """RoleBindings and ClusterRoleBindings: roleRef is set once and never changes."""

    name_validation = PATH_SEGMENT
    allow_create_on_update = True

    def default(self, rtype, obj: dict) -> None:
        ref = obj.get("roleRef")
        if isinstance(ref, dict) and not ref.get("apiGroup"):
            ref["apiGroup"] = GROUP
        for sub in obj.get("subjects") or []:
            if isinstance(sub, dict) and not sub.get("apiGroup") and sub.get("kind") in ("User", "Group"):
                sub["apiGroup"] = GROUP

    def validate(self, rtype, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateRoleBinding / ValidateClusterRoleBinding."""
        causes = field_checks.kube_object_meta(obj)
        ref = as_dict(obj.get("roleRef"))
        if ref.get("apiGroup") != GROUP:
            causes.append(errors.field_not_supported("roleRef.apiGroup", ref.get("apiGroup") or "", [GROUP]))
        kinds = ["Role", "ClusterRole"] if rtype.namespaced else ["ClusterRole"]
        if ref.get("kind") not in kinds:
            causes.append(errors.field_not_supported("roleRef.kind", ref.get("kind") or "", kinds))
        name = ref.get("name") or ""
        if not name:
            causes.append(errors.field_required("roleRef.name"))
        else:
            causes.extend(errors.field_invalid("roleRef.name", name, p) for p in _rbac_name_problems(name))
        for i, sub in enumerate(obj.get("subjects") or []):
            causes.extend(subject(sub, rtype.namespaced, f"subjects[{i}]"))
        return causes

    def validate_update(self, rtype, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        if (new.get("roleRef") or {}) != (old.get("roleRef") or {}):
            ref = as_dict(new.get("roleRef"))
            causes.append(errors.field_invalid("roleRef", _go_role_ref(ref), "cannot change roleRef"))
        return causes


def role_columns(schema: str) -> tuple[TableColumn, ...]:
    """NAME, CREATED AT (an RFC 3339 time, as upstream prints roles)."""
    return (columns.name_column(),
            TableColumn("Created At", "date", lambda o: columns.get_path(o, "metadata", "creationTimestamp", default=""),
                        description=columns.description(columns.OBJECT_META, "creationTimestamp")))


def _subjects(obj: dict, kind: str) -> str:
    out = []
    for sub in obj.get("subjects") or []:
        if isinstance(sub, dict) and sub.get("kind") == kind:
            name = sub.get("name") or ""
            out.append(f"{sub.get('namespace') or ''}/{name}" if kind == "ServiceAccount" else name)
    return ", ".join(out)


def binding_columns(schema: str) -> tuple[TableColumn, ...]:
    """NAME ROLE AGE, and USERS GROUPS SERVICEACCOUNTS with -o wide."""
    def role(o: dict) -> str:
        ref = o.get("roleRef") or {}
        return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
    return (
        columns.name_column(),
        columns.column("Role", role, schema, "roleRef"),
        columns.age_column(),
        columns.column("Users", lambda o: _subjects(o, "User"), desc="Users in the roleBinding", priority=1),
        columns.column("Groups", lambda o: _subjects(o, "Group"), desc="Groups in the roleBinding", priority=1),
        columns.column("ServiceAccounts", lambda o: _subjects(o, "ServiceAccount"),
                       desc="ServiceAccounts in the roleBinding", priority=1),
    )

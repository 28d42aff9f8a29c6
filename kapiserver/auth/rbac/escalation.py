"""Privilege-escalation prevention (upstream's pkg/registry/rbac escalation checks).

Nobody can grant through RBAC what they do not hold.  Creating or updating a
Role or ClusterRole needs every permission it grants, or the ``escalate``
verb on it; creating or updating a binding needs every permission of the
role it references, or the ``bind`` verb on that role.  Members of
``system:masters`` (and the server itself) may always.  What a user holds
comes from the RBAC rules alone (:class:`PolicyIndex`), whatever the
authorization modes, while ``escalate`` and ``bind`` are asked of the
server's authorizer, as upstream does.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.auth.authorizer import Attributes, Authorizer, decide
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.auth.rbac.policy_rules import compact_rules, compact_string, covers, go_quote, go_quote_list, rule
from kapiserver.auth.union import aggregate_message
from kapiserver.machinery.user import MASTERS_GROUP, UserInfo

GROUP = "rbac.authorization.k8s.io"
FULL_AUTHORITY = [rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])]
AGGREGATION_NEEDS_ADMIN = "must have cluster-admin privileges to use the aggregationRule"


def escalation_allowed(user: Optional[UserInfo]) -> bool:
    """The server itself (no user) and ``system:masters`` may grant anything."""
    return user is None or MASTERS_GROUP in user.groups


async def escalate_authorized(authorizer: Authorizer, user: UserInfo, resource: str, namespace: str,
                              name: str) -> bool:
    """May ``user`` ``escalate`` this role (``name`` is the URL's: empty on create)?"""
    attributes = Attributes(verb="escalate", api_group=GROUP, api_version="*", resource=resource,
                            namespace=namespace, name=name)
    return (await decide(authorizer, user, attributes)).allowed


async def bind_authorized(authorizer: Authorizer, user: UserInfo, role_ref: dict, namespace: str) -> bool:
    """May ``user`` ``bind`` the referenced role in ``namespace`` ("" for a ClusterRoleBinding)?"""
    resource = {"ClusterRole": "clusterroles", "Role": "roles"}.get(role_ref.get("kind") or "")
    if resource is None:
        return False
    attributes = Attributes(verb="bind", api_group=role_ref.get("apiGroup") or GROUP, api_version="*",
                            resource=resource, namespace=namespace, name=role_ref.get("name") or "")
    return (await decide(authorizer, user, attributes)).allowed


def missing_permissions(index: PolicyIndex, user: UserInfo, namespace: str, rules: list[Any]) -> Optional[str]:
    """None if ``user`` holds every permission of ``rules`` in ``namespace``; else upstream's message."""
    owner_rules, errors = index.rules_for(user, namespace)
    ok, missing = covers(owner_rules, [r for r in rules if isinstance(r, dict)])
    if ok:
        return None
    lines = sorted({compact_string(r) for r in compact_rules(missing)})
    message = (f"user {go_quote(user.name)} (groups={go_quote_list(user.groups)}) is attempting to grant RBAC "
               f"permissions not currently held:\n" + "\n".join(lines))
    if errors:
        message += f"; resolution errors: [{aggregate_message(errors)}]"
    return message


def only_gc_fields_changed(new: dict, old: dict) -> bool:
    """Upstream's IsOnlyMutatingGCFields: only ownerReferences, finalizers (or managed fields) differ."""
    def stripped(obj: dict) -> dict:
        md = {k: v for k, v in (obj.get("metadata") or {}).items()
              if k not in ("ownerReferences", "finalizers", "managedFields", "selfLink", "resourceVersion")}
        return {**{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}, "metadata": md}
    return stripped(new) == stripped(old)

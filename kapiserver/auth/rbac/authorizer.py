"""The RBAC authorizer (``authorization.modes: [RBAC]``): allowed when a bound role has a matching rule.

Upstream's RBACAuthorizer: allow with the reason ``RBAC: allowed by
ClusterRoleBinding "x" of ClusterRole "y" to Group "z"``; otherwise no
opinion, with an empty reason unless a binding referenced a missing role
(then ``RBAC: <those errors>``).  ``rules_for`` answers SelfSubjectRulesReview
from the same rules.
"""
from __future__ import annotations

from typing import Optional

from kapiserver.auth.authorizer import NO_OPINION, Attributes, Decision, Rules
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.auth.union import aggregate_message
from kapiserver.machinery.user import UserInfo


class RBACAuthorizer:
    def __init__(self, index: PolicyIndex) -> None:
        self.index = index

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        source, errors = self.index.allowed_by(user, attributes)
        if source is not None:
            return Decision(True, f"RBAC: allowed by {source}")
        if errors:
            return Decision(False, f"RBAC: {aggregate_message(errors)}")
        return NO_OPINION

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        rules, errors = self.index.rules_for(user, namespace)
        resource_rules, non_resource_rules = [], []
        for rule in rules:
            if rule.get("resources"):
                info: dict = {"verbs": list(rule.get("verbs") or [])}
                for key in ("apiGroups", "resources", "resourceNames"):
                    if rule.get(key):
                        info[key] = list(rule[key])
                resource_rules.append(info)
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": list(rule.get("verbs") or []),
                                           "nonResourceURLs": list(rule["nonResourceURLs"])})
        return Rules(resource_rules, non_resource_rules, False, aggregate_message(errors))

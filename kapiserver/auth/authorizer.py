"""Who may do what: the one authorizer every request and every access review asks.

kapiserver has no RBAC enforcement yet, so the authorizer allows every
authenticated request (upstream's AlwaysAllow mode).  Requests are filtered
by it (``APIServer.authorize``) and the access-review APIs
(``kubectl auth can-i``) answer from it, so the two can never disagree; an
RBAC authorizer will replace this class behind the same two methods.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kapiserver.auth.user import UserInfo


@dataclass(frozen=True)
class Attributes:
    """What a request does (upstream's authorizer.Attributes)."""

    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass(frozen=True)
class Rules:
    """Everything a user may do in a namespace (SelfSubjectRulesReview's answer)."""

    resource_rules: list[dict] = field(default_factory=list)
    non_resource_rules: list[dict] = field(default_factory=list)
    incomplete: bool = False


class AlwaysAllow:
    """Allows everything (upstream's ``--authorization-mode=AlwaysAllow``)."""

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        return Decision(True)

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        return Rules(resource_rules=[{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                     non_resource_rules=[{"verbs": ["*"], "nonResourceURLs": ["*"]}])

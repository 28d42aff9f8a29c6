"""Who may do what: the one authorizer every request and every access review asks.

Requests are filtered by it (the authorization filter) and the access-review
APIs (``kubectl auth can-i``) answer from it, so the two can never disagree.
An authorizer may decide at once or through a Deferred (a webhook);
:func:`decide` awaits either.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, Union

from twisted.internet import defer

from kapiserver.auth.user import UserInfo
from kapiserver.machinery import errors


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


class Authorizer(Protocol):
    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Union[Decision, "defer.Deferred[Decision]"]:
        ...

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules: ...


def forbidden(user: Optional[UserInfo], attributes: Attributes, reason: str = "") -> errors.StatusError:
    """The 403 for a denied request, worded as upstream's responsewriters.Forbidden."""
    name = user.name if user is not None else ""
    if not attributes.resource_request:
        message = f'User "{name}" cannot {attributes.verb} path "{attributes.path}"'
    else:
        resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
        where = (f'in the namespace "{attributes.namespace}"' if attributes.namespace else "at the cluster scope")
        message = (f'User "{name}" cannot {attributes.verb} resource "{resource}" in API group '
                   f'"{attributes.api_group}" {where}')
    if reason:
        message = f"{message}: {reason}"
    return errors.forbidden(attributes.resource, attributes.api_group, attributes.name, message)


async def decide(authorizer: Authorizer, user: Optional[UserInfo], attributes: Attributes) -> Decision:
    """The authorizer's decision, whether it answers at once or later."""
    decision = authorizer.authorize(user, attributes)
    if isinstance(decision, defer.Deferred):
        return await decision
    return decision


class AlwaysAllow:
    """Allows everything (upstream's ``--authorization-mode=AlwaysAllow``)."""

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        return Decision(True)

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        return Rules(resource_rules=[{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                     non_resource_rules=[{"verbs": ["*"], "nonResourceURLs": ["*"]}])

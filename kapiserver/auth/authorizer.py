"""Who may do what: the one authorizer every request and every access review asks.

Requests are filtered by it (the authorization filter) and the access-review
APIs (``kubectl auth can-i``) answer from it, so the two can never disagree.
An authorizer may decide at once or through a Deferred (a webhook);
:func:`decide` awaits either.

A decision is upstream's three-valued one: allow, deny, or no opinion.  Only
an allow lets a request through; the difference between the other two
matters where authorizers are chained (auth/union.py: a deny stops the
chain, no opinion asks the next one).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Protocol, Union, runtime_checkable

from twisted.internet import defer

from kapiserver.machinery.user import UserInfo
from kapiserver.machinery import errors
from kapiserver.machinery.fields import FieldRequirement


class Attributes(NamedTuple):
    """What a request does (upstream's authorizer.Attributes).

    ``field_selector``: the requirements of a list, watch or deletecollection's
    ``fieldSelector`` (AuthorizeWithSelectors, on by default in v1.32); empty
    when there is none or it does not parse.
    """

    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""
    field_selector: tuple[FieldRequirement, ...] = ()


class Decision(NamedTuple):
    """``allowed``; else ``denied`` (an explicit deny) or neither (no opinion).

    ``error`` is an evaluation error (a webhook that could not be asked): the
    request is answered 500 when nothing allowed it, as upstream does.
    """

    allowed: bool
    reason: str = ""
    denied: bool = False
    error: str = ""

    @property
    def no_opinion(self) -> bool:
        return not self.allowed and not self.denied


ALLOW = Decision(True)
NO_OPINION = Decision(False)


@dataclass(frozen=True)
class Rules:
    """Everything a user may do in a namespace (SelfSubjectRulesReview's answer)."""

    resource_rules: list[dict] = field(default_factory=list)
    non_resource_rules: list[dict] = field(default_factory=list)
    incomplete: bool = False
    evaluation_error: str = ""


class Authorizer(Protocol):
    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Union[Decision, "defer.Deferred[Decision]"]:
        ...

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules: ...


@runtime_checkable
class Closeable(Protocol):
    """An authorizer that holds something to release at shutdown (a webhook's connections)."""

    async def close(self) -> None: ...


def _sanitize(message: str) -> str:
    """Upstream escapes what could pass for HTML in a 403's message (quotes stay)."""
    return message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
    message = _sanitize(message)
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
        return ALLOW

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        return Rules(resource_rules=[{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                     non_resource_rules=[{"verbs": ["*"], "nonResourceURLs": ["*"]}])


class AlwaysDeny:
    """Has no opinion on anything, so nothing is allowed (``--authorization-mode=AlwaysDeny``)."""

    REASON = "Everything is forbidden."

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        return Decision(False, self.REASON)

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        return Rules()

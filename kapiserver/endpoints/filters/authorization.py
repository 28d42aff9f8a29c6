"""Authorization: may this user make this request?  Otherwise 403.

Upstream's ``WithAuthorization``: the request's attributes (from the request
info and the user it acts as) go to the one authorizer, which also answers the
access-review APIs.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.auth.authorizer import Attributes, Authorizer, Decision, forbidden
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery import errors
from kapiserver.machinery.fields import FieldRequirement, parse_field_selector
from kapiserver.request.info import RequestInfo


def attributes_for(info: RequestInfo) -> Attributes:
    namespace = info.namespace
    if info.is_resource_request and info.resource == "namespaces" and info.name and not info.name_from_selector:
        # upstream's request info puts /namespaces/<name>[/status|/finalize] in namespace <name>, so a
        # RoleBinding there (view: "read access to namespaces at the namespace scope") covers it; a list
        # of namespaces by metadata.name stays cluster-wide
        namespace = info.name
    return Attributes(verb=info.verb, resource_request=info.is_resource_request, namespace=namespace,
                      api_group=info.group, api_version=info.version, resource=info.resource,
                      subresource=info.subresource, name=info.name, path=info.path,
                      field_selector=_field_requirements(info.field_selector))


def _field_requirements(raw: str) -> tuple[FieldRequirement, ...]:
    """A selector that does not parse selects nothing here (upstream keeps the parse error beside
    no requirements; no authorizer allows on it) and gets its 400 from the list handler."""
    if not raw:
        return ()
    try:
        return tuple(parse_field_selector(raw).requirements)
    except errors.StatusError:
        return ()


class WithAuthorization(Filter):
    def __init__(self, wrapped, authorizer: Authorizer) -> None:
        super().__init__(wrapped)
        self.authorizer = authorizer

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        attributes = attributes_for(ctx.require_info())
        decision = self.authorizer.authorize(ctx.user, attributes)
        if isinstance(decision, defer.Deferred):
            return decision.addCallback(self._enforce, ctx, attributes)
        self._enforce(decision, ctx, attributes)
        return None

    @staticmethod
    def _enforce(decision: Decision, ctx: RequestContext, attributes: Attributes) -> None:
        if ctx.audit is not None:  # upstream's annotations of every audited request
            ctx.audit.add_annotation("authorization.k8s.io/decision", "allow" if decision.allowed else "forbid")
            ctx.audit.add_annotation("authorization.k8s.io/reason", decision.reason)
        if decision.allowed:
            return
        if decision.error:  # nothing allowed it and an authorizer could not decide: 500, as upstream
            raise errors.StatusError(500, "InternalError",
                                     f'Internal Server Error: "{attributes.path}": {decision.error}')
        raise forbidden(ctx.user, attributes, decision.reason)

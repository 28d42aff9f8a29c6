"""Impersonation: the request continues as the user named by ``Impersonate-*`` headers.

Upstream's ``WithImpersonation``; each impersonated attribute must be allowed
by the authorizer (kapiserver.auth.impersonation has the rules).
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.auth import impersonation
from kapiserver.auth.authorizer import Authorizer
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext


class WithImpersonation(Filter):
    def __init__(self, wrapped, authorizer: Authorizer) -> None:
        super().__init__(wrapped)
        self.authorizer = authorizer

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        if ctx.authenticated_user is None or not impersonation.requested(request):
            return None

        def acting_as(user):
            ctx.user = user
        return defer.Deferred.fromCoroutine(
            impersonation.impersonate(request, ctx.authenticated_user, self.authorizer)).addCallback(acting_as)

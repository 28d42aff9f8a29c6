"""Authentication: who sent the request, or 401.

Upstream's ``WithAuthentication``.  The connection usually authenticated the
request already, as soon as its headers were complete and before reading its
body (``RequestContext.authentication``); this filter then only reads that
decision, waiting for it if the authenticator answers later.  The
authenticated user goes on the context; the ``Authorization`` header is
removed once it has been used, so no later step (a proxy to an extension
server, an audit log) can leak it.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.logger import Logger
from twisted.web import server

from kapiserver.auth.authenticator import Authenticator
from kapiserver.auth.decision import AuthenticationDecision
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery import errors

log = Logger()


class WithAuthentication(Filter):
    def __init__(self, wrapped, authenticator: Authenticator) -> None:
        super().__init__(wrapped)
        self.authenticator = authenticator

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        decision = ctx.authentication
        if decision is None:  # not authenticated by the connection (a Site other than APISite)
            decision = ctx.authentication = AuthenticationDecision.start(self.authenticator, request)
        if decision.known:
            self._conclude(request, ctx, decision)
            return None
        return decision.wait().addCallback(lambda _: self._conclude(request, ctx, decision))

    @staticmethod
    def _conclude(request: Any, ctx: RequestContext, decision: AuthenticationDecision) -> None:
        if decision.failure is not None:
            invalid = decision.invalid_credential
            if invalid is None:
                decision.failure.raiseException()  # the authenticator failed: a 500
            log.info("authentication failed for {method} {path}: {error}", method=request.method,
                     path=request.path, error=invalid)
            raise errors.unauthorized()
        if decision.result is None:
            raise errors.unauthorized()
        ctx.authenticated_user = ctx.user = decision.result.user
        ctx.audiences = decision.result.audiences
        request.requestHeaders.removeHeader(b"authorization")

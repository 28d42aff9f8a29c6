"""Authentication: who sent the request, or 401.

Upstream's ``WithAuthentication``.  The authenticated user goes on the
context; the ``Authorization`` header is removed once it has been used, so
no later step (a proxy to an extension server, an audit log) can leak it.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.logger import Logger
from twisted.web import server

from kapiserver.auth.authenticator import AuthenticationError, Authenticator, AuthResult
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery import errors

log = Logger()


class WithAuthentication(Filter):
    def __init__(self, wrapped, authenticator: Authenticator) -> None:
        super().__init__(wrapped)
        self.authenticator = authenticator

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        try:
            outcome = self.authenticator.authenticate(request)
        except AuthenticationError as e:
            self._fail(request, e)
        if isinstance(outcome, defer.Deferred):
            return outcome.addCallbacks(lambda result: self._accept(request, ctx, result),
                                        lambda failure: self._rejected(request, failure))
        self._accept(request, ctx, outcome)
        return None

    @staticmethod
    def _accept(request: Any, ctx: RequestContext, result: Optional[AuthResult]) -> None:
        if result is None:
            raise errors.unauthorized()
        ctx.authenticated_user = ctx.user = result.user
        ctx.audiences = result.audiences
        request.requestHeaders.removeHeader(b"authorization")

    def _rejected(self, request: Any, failure: Any) -> None:
        failure.trap(AuthenticationError)
        self._fail(request, failure.value)

    @staticmethod
    def _fail(request: Any, error: Any) -> None:
        log.info("authentication failed for {method} {path}: {error}", method=request.method,
                 path=request.path, error=error)
        raise errors.unauthorized()

"""The handler chain: small wrapper resources, one per concern, around the delegation chain.

Upstream builds its chain by wrapping ``http.Handler``s
(``DefaultBuildHandlerChain``); here each concern is a :class:`Filter`, a
leaf resource holding the next resource.  A filter looks at the request (and
its :class:`~kapiserver.endpoints.request_context.RequestContext`), then
either answers it (raising a ``StatusError``) or passes it on.  Most filters
decide synchronously; one that must wait (a token review, a queue seat)
returns a Deferred and the request continues when it fires.

Because filters are ordinary resources, the whole tree (filters included) runs
under any ``twisted.web`` Site: the real server's, or ``treq.testing.StubTreq``
in memory.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.web import resource, server
from twisted.web.resource import IResource

from kapiserver.endpoints import respond
from kapiserver.endpoints.request_context import RequestContext, context_of


class Filter(resource.Resource):
    """One link of the handler chain.

    Subclasses implement :meth:`apply`: return None to continue at once, a
    Deferred to continue when it fires, or raise to answer (a ``StatusError``
    becomes its Status; anything else a 500, by the panic-recovery filter).
    """

    isLeaf = True

    def __init__(self, wrapped: IResource) -> None:
        super().__init__()
        self.wrapped = wrapped

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        raise NotImplementedError

    def render(self, request: server.Request) -> Any:
        ctx = context_of(request)
        waiting = self.apply(request, ctx)
        if waiting is None:
            return self.proceed(request)
        waiting.addCallback(lambda _: self.proceed_later(request))
        waiting.addErrback(respond.failure_writer(request))
        return server.NOT_DONE_YET

    def proceed(self, request: server.Request) -> Any:
        """Hand the request to the next resource, in this reactor turn."""
        return resource.getChildForRequest(self.wrapped, request).render(request)

    def proceed_later(self, request: server.Request) -> None:
        """Continue after an asynchronous step (the request's own render has returned)."""
        if request.finished or context_of(request).timed_out:
            return
        try:
            body = self.proceed(request)
        except Exception as e:  # past the panic-recovery filter's frame: answer here
            respond.write_failure(request, e)
            return
        if body is not server.NOT_DONE_YET:
            request.write(body)
            request.finish()

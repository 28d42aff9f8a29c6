"""The wait group: which requests are still being answered, for a graceful shutdown.

Upstream's ``WithWaitGroup``: every request except long-running ones (watches)
is counted from the moment it enters the chain until its response is
finished; shutdown waits for the count to reach zero (bounded by the drain
time) before it ends the watches and stops the server.  Once shutdown has
started waiting (:meth:`RequestWaitGroup.close`), a request arriving on a
connection still open is answered ``503 apiserver is shutting down`` with
``Retry-After: 1``, as upstream's, except health and metrics requests.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery import errors

# upstream's pathPrefixesExemptFromRetryAfter
EXEMPT_PATH_PREFIXES = (b"/readyz", b"/livez", b"/healthz", b"/metrics")


class RequestWaitGroup:
    def __init__(self) -> None:
        self.count = 0
        self.closed = False

    def add(self) -> None:
        self.count += 1

    def done(self) -> None:
        self.count -= 1

    def close(self) -> None:
        """Shutdown waits from now on: new requests are turned away."""
        self.closed = True


class WithWaitGroup(Filter):
    def __init__(self, wrapped, group: RequestWaitGroup) -> None:
        super().__init__(wrapped)
        self.group = group

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        if ctx.require_info().is_long_running:
            return None
        if self.group.closed:
            user_agent = request.getHeader(b"user-agent") or b""
            if not request.path.startswith(EXEMPT_PATH_PREFIXES) and not user_agent.startswith(b"kube-apiserver/"):
                raise errors.StatusError(503, "ServiceUnavailable", "apiserver is shutting down",
                                         headers={"Retry-After": "1"})
        self.group.add()
        ctx.when_finished(request, self.group.done)
        return None

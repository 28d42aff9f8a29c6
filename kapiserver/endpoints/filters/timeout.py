"""Request timeout: a request that has not started its answer in time gets 504;
one still writing its answer then (a list to a client that reads slowly) loses
its connection, so it cannot hold its seat and its buffers for ever.

Upstream's ``WithTimeoutForNonLongRunningRequests``: watches and other
long-running requests are exempt; ``?timeout=`` (a Go duration) may shorten the
server's limit, never lengthen it.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.web import server

from kapiserver.endpoints import respond
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.list_stream import abort_connection
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery import errors
from kapiserver.machinery.duration import parse_go_duration


def _truthy(args: Optional[dict], key: bytes) -> bool:
    values = (args or {}).get(key) or []
    return bool(values) and values[0].lower() in (b"true", b"1")


class WithTimeout(Filter):
    def __init__(self, wrapped, reactor: IReactorTime, seconds: float) -> None:
        super().__init__(wrapped)
        self.reactor = reactor
        self.seconds = seconds

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        info = ctx.require_info()
        if info.is_long_running or (info.verb == "list" and _truthy(request.args, b"watch")):
            return None
        seconds = self.seconds
        raw = (request.args or {}).get(b"timeout")
        if raw:
            parsed = parse_go_duration(raw[0].decode("latin-1"))
            if parsed is None:
                raise errors.bad_request(f"invalid timeout specified in the request URL: {raw[0]!r}")
            if parsed > 0:
                seconds = min(seconds, parsed)
        call = self.reactor.callLater(seconds, self._expire, request, ctx)
        ctx.when_finished(request, lambda: call.cancel() if call.active() else None)
        return None

    @staticmethod
    def _expire(request: Any, ctx: RequestContext) -> None:
        if request.finished:
            return
        if request.startedWriting:
            # mid-answer (a long list to a slow reader): a 504 cannot be sent any more, so,
            # as upstream's timeout handler does, the connection is dropped
            ctx.timed_out = True
            abort_connection(request)
            return
        respond.write_status(request, errors.timeout("request did not complete within the allowed duration"))
        ctx.timed_out = True

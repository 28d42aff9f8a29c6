"""Panic recovery: no exception escapes as a traceback or a dropped connection.

Outermost filter, as upstream's ``WithPanicRecovery``: anything the rest of
the chain raises while the request is being handled becomes a 500 Status
(the details go to the log).
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.endpoints import respond
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext


class PanicRecovery(Filter):
    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        return None

    def proceed(self, request: server.Request) -> Any:
        try:
            return super().proceed(request)
        except Exception as e:
            respond.write_failure(request, e)
            return server.NOT_DONE_YET

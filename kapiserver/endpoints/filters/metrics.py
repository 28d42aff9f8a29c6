"""Request metrics: every finished request is counted and timed (upstream's instrumentation)."""
from __future__ import annotations

import time
from typing import Callable, Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.request.info import RequestInfo

# (request info, response code, seconds from arrival to the end of the response)
Recorder = Callable[[RequestInfo, int, float], None]


class WithRequestMetrics(Filter):
    def __init__(self, wrapped, record: Recorder) -> None:
        super().__init__(wrapped)
        self.record = record

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        info = ctx.require_info()
        ctx.when_finished(request, lambda: self.record(info, request.code, time.monotonic() - ctx.received_at))
        return None

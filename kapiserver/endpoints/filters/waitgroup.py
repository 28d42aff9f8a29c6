"""The wait group: which requests are still being answered, for a graceful shutdown.

Upstream's ``WithWaitGroup``: every request except long-running ones (watches)
is counted from the moment it enters the chain until its response is
finished; shutdown waits for the count to reach zero (bounded by the drain
time) before it stops the server.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext


class RequestWaitGroup:
    def __init__(self) -> None:
        self.count = 0

    def add(self) -> None:
        self.count += 1

    def done(self) -> None:
        self.count -= 1


class WithWaitGroup(Filter):
    def __init__(self, wrapped, group: RequestWaitGroup) -> None:
        super().__init__(wrapped)
        self.group = group

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        if ctx.require_info().is_long_running:
            return None
        self.group.add()
        request.notifyFinish().addBoth(lambda _: self.group.done())
        return None

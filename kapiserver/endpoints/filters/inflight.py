"""Max-in-flight: at most so many requests at once, the rest get 429 + Retry-After (plain text).

Upstream's ``WithMaxInFlightLimit`` (``--max-requests-inflight``,
``--max-mutating-requests-inflight``): read-only and mutating requests have
separate limits; long-running requests (watches) and ``system:masters`` are
exempt.  A request holds its seat until its response is finished.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.machinery.user import MASTERS_GROUP
from kapiserver.endpoints import respond
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext

# upstream's maxinflight.go: a constant "1"
RETRY_AFTER_SECONDS = 1

MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class InflightLimiter:
    """The seats: ``counts[mutating]`` requests in flight against ``limits[mutating]`` (0 = no limit)."""

    def __init__(self, readonly: int, mutating: int,
                 on_change: Callable[[int, int], None] = lambda readonly, mutating: None) -> None:
        self.limits = {False: readonly, True: mutating}
        self.counts = {False: 0, True: 0}
        self.on_change = on_change

    def acquire(self, mutating: bool) -> bool:
        """Take a seat; False when every seat is taken."""
        if self.limits[mutating] and self.counts[mutating] >= self.limits[mutating]:
            return False
        self.counts[mutating] += 1
        self.on_change(self.counts[False], self.counts[True])
        return True

    def release(self, mutating: bool) -> None:
        self.counts[mutating] -= 1
        self.on_change(self.counts[False], self.counts[True])

    def total(self) -> int:
        return self.counts[False] + self.counts[True]


class WithMaxInFlightLimit(Filter):
    def __init__(self, wrapped, limiter: InflightLimiter) -> None:
        super().__init__(wrapped)
        self.limiter = limiter

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        info = ctx.require_info()
        if info.is_long_running or (ctx.user is not None and MASTERS_GROUP in ctx.user.groups):
            return None
        mutating = info.verb in MUTATING_VERBS
        if not self.limiter.acquire(mutating):
            respond.write_too_many_requests(request, RETRY_AFTER_SECONDS)
            return defer.succeed(None)  # answered: the chain does not go on
        ctx.when_finished(request, lambda: self.limiter.release(mutating))
        return None

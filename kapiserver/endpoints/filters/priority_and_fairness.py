"""API Priority and Fairness: every request is classified, then runs, waits its turn, or gets 429.

Upstream's ``WithPriorityAndFairness``, in max-in-flight's place in the chain
(after authentication and impersonation: schemas match users and groups).
The matching FlowSchema picks the priority level and the flow; the response
names both (``X-Kubernetes-PF-FlowSchema-UID``, ``X-Kubernetes-PF-PriorityLevel-UID``).
A request of the exempt level (``system:masters``, health probes) runs at
once; any other takes its seats in its level's queue set.  It holds them
until its response is finished (handed to the transport in full: a list
written piece by piece keeps them to its last piece), or, for a watch, until
the watch is initialized (its initial events encoded), as upstream counts
watches.  A request that cannot be queued (its queues are full, or its level
rejects) or that waited longer than a quarter of its request timeout (at most
a minute) gets upstream's answer: 429, ``Retry-After``, and the plain text
``Too many requests, please try again later.``  Other long-running requests
(``proxy``) are not limited, as upstream.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.web import server

from kapiserver.endpoints import respond
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext, client_gone
from kapiserver.flowcontrol import bootstrap, work_estimate
from kapiserver.flowcontrol.controller import APFController, PriorityLevelState
from kapiserver.flowcontrol.queueset import EXECUTING, WAITING, Request
from kapiserver.machinery.duration import parse_go_duration
from kapiserver.request.info import RequestInfo

MAX_WAIT_SECONDS = 60.0
ANONYMOUS = ("system:anonymous", ("system:unauthenticated",))


class RequestDetails(NamedTuple):
    """What the dump of requests tells about one (``includeRequestDetails``)."""

    user_name: str
    info: RequestInfo


def _truthy(args: Optional[dict], key: bytes) -> bool:
    values = (args or {}).get(key) or []
    return bool(values) and values[0].lower() in (b"true", b"1")


class WithPriorityAndFairness(Filter):
    def __init__(self, wrapped, controller: APFController, count: work_estimate.ObjectCounter, reactor: IReactorTime,
                 request_timeout_seconds: float) -> None:
        super().__init__(wrapped)
        self.controller = controller
        self.count = count
        self.reactor = reactor
        self.request_timeout_seconds = request_timeout_seconds

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        info = ctx.require_info()
        watch = info.verb == "watch"
        if info.is_long_running and not watch:
            return None
        user_name, groups = (ctx.user.name, tuple(ctx.user.groups)) if ctx.user is not None else ANONYMOUS
        found = self.controller.classify(user_name, groups, info)
        level = found.level
        request.setHeader(bootstrap.FLOW_SCHEMA_UID_HEADER.encode(), found.flow_schema_uid.encode())
        request.setHeader(bootstrap.PRIORITY_LEVEL_UID_HEADER.encode(), level.uid.encode())
        estimate = work_estimate.estimate(info, request.args or {}, self.count, level.max_seats)
        ticket = level.queues.start_request(estimate, found.hash_value, found.flow_schema_name, found.distinguisher,
                                            RequestDetails(user_name, info))
        if ticket is None:
            self._reject(request, level)
            return defer.succeed(None)  # answered: the chain does not go on
        release = self._releaser(level, ticket)
        ctx.when_finished(request, release)
        if watch:
            ctx.watch_initialized = release
        if ticket.state == EXECUTING:
            return None
        return self._wait(request, level, ticket)

    def _releaser(self, level: PriorityLevelState, ticket: Request) -> Callable[[], None]:
        def release() -> None:
            if ticket.state == WAITING:
                level.queues.cancel(ticket)
            elif ticket.state == EXECUTING:
                level.queues.finish(ticket)
        return release

    def _wait(self, request: server.Request, level: PriorityLevelState, ticket: Request) -> defer.Deferred:
        """Wait in the queue: go on once dispatched; 429 past the wait limit."""
        proceed: defer.Deferred = defer.Deferred()

        def expire() -> None:
            if ticket.state != WAITING:
                return
            level.queues.cancel(ticket)
            self._reject(request, level)
            proceed.callback(None)

        timer = self.reactor.callLater(self._wait_limit(request), expire)

        def dispatched(_: Any) -> None:
            if timer.active():
                timer.cancel()
            if client_gone(request):
                level.queues.finish(ticket)  # the client left while it waited
                return
            proceed.callback(None)
        ticket.dispatched.addCallback(dispatched)
        return proceed

    def _wait_limit(self, request: server.Request) -> float:
        """A quarter of the request's deadline (upstream's getRequestWaitContext), at most a minute."""
        seconds = self.request_timeout_seconds
        raw = (request.args or {}).get(b"timeout")
        if raw:
            parsed = parse_go_duration(raw[0].decode("latin-1"))
            if parsed is not None and parsed > 0:
                seconds = min(seconds, parsed)
        return min(seconds / 4, MAX_WAIT_SECONDS)

    def _reject(self, request: server.Request, level: PriorityLevelState) -> None:
        """Upstream's tooManyRequests: http.Error's plain text, with Retry-After."""
        self.controller.dropped.record(level.name)
        if client_gone(request):
            return
        respond.write_too_many_requests(request, self.controller.dropped.retry_after(level.name))

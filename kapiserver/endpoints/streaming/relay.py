"""A backend's HTTP response body relayed to a client's request as it arrives, under backpressure.

Used by the kubelet streams (logs, proxies) and the aggregator's proxy: the
client's transport is the producer's consumer, so a client that stops reading
pauses the backend's connection and holds no more than the transport's buffer.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web.client import ResponseDone
from twisted.web.http import PotentialDataLoss

from kapiserver.endpoints.request_context import writable

log = Logger()


async def while_client_waits(request: server.Request, pending: "defer.Deferred[Any]") -> Any:
    """A backend's response to a request of ``request``'s client, or None once that client has
    gone (the backend request is then cancelled, or its answer drained and dropped)."""
    gone: list[bool] = []

    def client_gone(_: Any) -> None:
        gone.append(True)
        pending.cancel()
    request.notifyFinish().addErrback(client_gone)
    try:
        response = await pending
    except defer.CancelledError:
        if gone:
            return None
        raise
    if gone or not writable(request):
        response.deliverBody(protocol.Protocol())
        return None
    return response


async def relay_body(response: Any, request: server.Request) -> None:
    """The backend's body written to the client as it arrives; the client's transport pauses and
    resumes the backend's (a slow reader holds no more than the transport's buffer)."""
    done: defer.Deferred[None] = defer.Deferred()
    response.deliverBody(BodyRelay(request, done))
    await done
    if writable(request):
        request.finish()


class BodyRelay(protocol.Protocol):
    """A backend's response body, written to the client as it comes (a push producer for the
    client's transport: pausing the client pauses the backend connection)."""

    transport: Optional[IPushProducer]  # type: ignore[assignment]  # what Response.deliverBody gives

    def __init__(self, request: server.Request, done: "defer.Deferred[None]") -> None:
        self.request = request
        self.done = done
        self.finished = False

    def connectionMade(self) -> None:
        self.request.registerProducer(self, True)
        self.request.notifyFinish().addErrback(lambda _: self.stopProducing())

    def dataReceived(self, data: bytes) -> None:
        if not self.finished and writable(self.request):
            self.request.write(data)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if self.finished:
            return
        self.finished = True
        if self.request.channel is not None:  # None once the client went away
            self.request.unregisterProducer()
        if not reason.check(ResponseDone, PotentialDataLoss):
            log.info("backend response ended early: {err}", err=reason.getErrorMessage())
        self.done.callback(None)

    # IPushProducer, driven by the client's connection
    def pauseProducing(self) -> None:
        if self.transport is not None:
            self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        if self.transport is not None:
            self.transport.resumeProducing()

    def stopProducing(self) -> None:
        if self.transport is not None:
            self.transport.stopProducing()


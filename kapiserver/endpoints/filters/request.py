"""The connection side of a request: what happens before the handler chain sees it.

:class:`APIRequest` bounds the body while it arrives (past the limit nothing
more is stored; the request-info filter answers 413) and turns any failure
that escapes the chain into a Status instead of Twisted's HTML page.
:class:`APISite` serves the handler chain with such requests.  The handler
chain itself is plain resources (``filters/chain.py``), so it also runs under
any other Site, such as ``treq.testing.StubTreq``'s in memory.
"""
from __future__ import annotations

from twisted.logger import Logger
from twisted.web import resource, server

from kapiserver.endpoints import respond
from kapiserver.endpoints.request_context import context_of
from kapiserver.machinery import errors

log = Logger()


class APIRequest(server.Request):
    """A twisted.web request whose body is bounded while it arrives."""

    _body_bytes = 0

    def handleContentChunk(self, data: bytes) -> None:
        self._body_bytes += len(data)
        if self._body_bytes > self.channel.site.max_body_bytes:  # type: ignore[attr-defined]
            context_of(self).body_too_large = True
            return  # stop storing: the request will be answered 413
        super().handleContentChunk(data)

    def processingFailed(self, reason):  # last resort: a Status, not Twisted's HTML page
        log.failure("request processing failed", reason)
        respond.write_status(self, errors.internal_error())


class APISite(server.Site):
    """The Site of the handler chain; requests are :class:`APIRequest` bounded to ``max_body_bytes``."""

    requestFactory = APIRequest
    displayTracebacks = False

    def __init__(self, handler_chain: resource.IResource, max_body_bytes: int, **kwargs) -> None:
        super().__init__(handler_chain, **kwargs)
        self.noisy = False
        self.max_body_bytes = max_body_bytes

    def buildProtocol(self, addr):
        proto = super().buildProtocol(addr)
        channel = getattr(proto, "_channel", None)
        if channel is not None:
            # Go's net/http (kube-apiserver) reads up to 1 MiB of request line and headers (long
            # selectors in a URL work) and answers 431 beyond; Twisted would drop the connection at 16 KiB
            channel.MAX_LENGTH = channel.totalHeadersSize = MAX_HEADER_BYTES
            channel.lineLengthExceeded = lambda line: _headers_too_large(channel)
            channel._respondToBadRequestAndDisconnect = lambda: _headers_too_large(channel)
        return proto


MAX_HEADER_BYTES = 1 << 20


def _headers_too_large(channel) -> None:
    channel.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; "
                            b"charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")
    channel.loseConnection()

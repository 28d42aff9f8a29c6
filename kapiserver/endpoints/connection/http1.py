"""HTTP/1.1 with the limits of Go's net/http server as kube-apiserver configures it.

Twisted's :class:`~twisted.web.http.HTTPChannel`, with:

* time limits: a request line and headers must arrive within
  ``request_header_timeout`` of their first byte (the first request's: of the
  TLS handshake's end), an idle keep-alive connection is closed after
  ``idle_timeout``; a request being answered has no limit here (the timeout
  filter bounds non-watch requests);
* the request head bounded by ``max_header_bytes`` (+ Go's 4 KiB slack) and
  ``max_header_fields``: more is answered ``431 Request Header Fields Too
  Large`` at once, in Go's words, and the connection closed;
* the body gate: when the headers are complete the request is authenticated
  (:meth:`APIRequest.begin`); while the authenticator has not answered, the
  transport is paused and what already arrived is held back; an
  unauthenticated request, or one declaring a body over the limit, goes to the
  chain without its body (which answers 401 / 413) and the connection closes
  without reading it; ``Expect: 100-continue`` is answered only once the body
  may be read;
* closes that cannot hang: after a refused body or a 431 the connection is
  half-closed and aborted shortly after (Go's ``closeWriteAndWait``); during a
  graceful shutdown responses carry ``Connection: close`` and idle
  connections are closed;
* hijacking (Go's ``http.Hijacker``): an upgrade (exec, attach, port-forward,
  proxied WebSockets) takes the connection out of HTTP once the handler chain
  has passed the request; from then on its bytes belong to another protocol,
  no deadline applies, and the request counts as finished (101) when the
  connection ends.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IProtocol
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import http
from zope.interface import implementer

from kapiserver.endpoints.connection.interfaces import ChannelConnection
from kapiserver.endpoints.filters.request import APIRequest, BodyVerdict
from kapiserver.endpoints.streaming.interfaces import IHijackableChannel

log = Logger()

# Go's answer to a request it cannot parse: status line, these headers, the status as body
_ERROR_HEADERS = b"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
HEADERS_TOO_LARGE = b"431 Request Header Fields Too Large"
BAD_REQUEST = b"400 Bad Request"


# bytes a hijacked connection holds before its new protocol is attached (reading pauses then)
HIJACK_BUFFER_BYTES = 64 * 1024


class HijackedHTTPConnection:
    """The connection of an upgraded request, handed to the protocol attached to it."""

    def __init__(self, channel: "APIHTTPChannel", request: Any) -> None:
        self.channel = channel
        self.request = request
        self.protocol: Optional[IProtocol] = None
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._lost = False

    def attach(self, protocol: IProtocol) -> None:
        if self.protocol is not None:
            raise RuntimeError("a hijacked connection is attached once")
        self.protocol = protocol
        transport = self.channel.transport
        if self._lost:  # the client went away before the upgrade was answered
            protocol.makeConnection(transport)
            protocol.connectionLost(Failure(ConnectionDone("the client left before the upgrade")))
            return
        # the HTTP channel no longer produces for the transport: the relay registers its own
        transport.unregisterProducer()
        protocol.makeConnection(transport)
        pending, self._pending, self._pending_bytes = b"".join(self._pending), [], 0
        self.channel._reading_paused = False
        transport.resumeProducing()
        if pending:
            protocol.dataReceived(pending)

    def received(self, data: bytes) -> None:
        if self.protocol is not None:
            self.protocol.dataReceived(data)
            return
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes > HIJACK_BUFFER_BYTES:
            self.channel._pause_reading()

    def lost(self, reason: Failure) -> None:
        self._lost = True
        request = self.request
        if not request.finished:  # the request's bookkeeping ends with the stream, as a 101
            request.code = 101
            request.code_message = b"Switching Protocols"
            request.startedWriting = 1
            request.chunked = 0
            request.finish()
        if self.protocol is not None:
            self.protocol.connectionLost(reason)


@implementer(IHijackableChannel)
class APIHTTPChannel(http.HTTPChannel):
    transport: Any
    _networkProducer: Any

    def __init__(self, connection: ChannelConnection) -> None:
        super().__init__()
        self.connection = connection
        policy = connection.policy
        self.MAX_LENGTH = policy.header_read_limit
        self.totalHeadersSize = policy.header_read_limit
        self.maxHeaders = policy.max_header_fields
        self.timeOut = None  # Twisted's idle timer is replaced by the phase deadlines below
        self._deadline: Any = None
        self._on_deadline: Any = None  # what the deadline's passing means in this phase
        self._idle = False          # between requests: the next byte starts a request head
        self._head_bytes = 0        # bytes of the current request head, line ends included
        self._held: Optional[list[bytes]] = None  # body bytes held while authentication is pending
        self._refused = False       # nothing more is read; the connection closes after the answer
        self._reading_paused = False
        self._lost = False
        self._requests_seen = 0
        self._host: Any = None
        self._hijacked: Optional[HijackedHTTPConnection] = None

    def getHost(self) -> Any:
        # every request asks (twisted.web's Request keeps it); the local address of a
        # connection does not change, and asking the socket is a system call each time
        if self._host is None:
            self._host = super().getHost()
        return self._host

    # ------------------------------------------------------------ phases and deadlines

    def connectionMade(self) -> None:
        super().connectionMade()
        self._expect_head()

    # One timer per connection serves every phase: a keep-alive request moves it
    # (idle -> head -> answering -> idle) instead of scheduling and cancelling
    # two timers, which cost each request a few percent of its CPU.

    def _set_deadline(self, seconds: float, expire: Any) -> None:
        self._on_deadline = expire
        if self._deadline is not None and self._deadline.active():
            self._deadline.reset(seconds)
        else:
            self._deadline = self.connection.reactor.callLater(seconds, self._deadline_passed)

    def _disarm_deadline(self) -> None:
        """No limit for now (the answer); the timer stays, for the next phase to move."""
        self._on_deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        expire, self._on_deadline = self._on_deadline, None
        if expire is not None:
            expire()

    def _cancel_deadline(self) -> None:
        self._on_deadline = None
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    def _expect_head(self) -> None:
        self._idle = False
        self._set_deadline(self.connection.policy.request_header_timeout, self._head_timed_out)

    def _expect_next_request(self) -> None:
        self._idle = True
        self._set_deadline(self.connection.policy.idle_timeout, self._idle_timed_out)

    def _head_timed_out(self) -> None:
        # Go closes without an answer when ReadHeaderTimeout passes
        log.debug("closing {peer}: no complete request head in time", peer=self.connection.peer)
        self.connection.abort()

    def _idle_timed_out(self) -> None:
        self.loseConnection()

    # ------------------------------------------------------------ receiving

    def dataReceived(self, data: bytes) -> None:
        if self._hijacked is not None:
            self._hijacked.received(data)
            return
        if self._refused:
            return
        if self._idle:
            self._expect_head()
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        self._head_bytes += len(line) + 2
        if self._head_bytes > self.totalHeadersSize:
            self._answer_and_close(HEADERS_TOO_LARGE)
            return
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        self._answer_and_close(HEADERS_TOO_LARGE)

    def headerReceived(self, line: bytes) -> bool:
        if self._receivedHeaderCount >= self.maxHeaders:
            self._answer_and_close(HEADERS_TOO_LARGE)
            return False
        return bool(super().headerReceived(line))

    def allHeadersReceived(self) -> None:
        self._disarm_deadline()
        self._head_bytes = 0
        self._requests_seen += 1
        request = self.requests[-1]
        self.persistent = self.checkPersistence(request, self._version)
        if self.connection.draining:
            self._close_after(request)
        request.gotLength(self.length)
        if not isinstance(request, APIRequest):
            return
        decision = request.begin(self._command, self._path, self._version)
        if self.length == 0:
            return  # no body: the chain gets the request now and waits for a pending decision
        verdict = request.body_verdict(decision, self.length)
        if verdict is BodyVerdict.WAIT:
            assert decision is not None
            self._held = []
            self._pause_reading()
            decision.wait().addCallback(lambda _: self._decided(request, decision))
        elif verdict is BodyVerdict.READ:
            self._continue(request)
        else:
            self._hand_over_without_body(request)

    def _decided(self, request: APIRequest, decision: Any) -> None:
        if self._lost or self._held is None or not self.requests or self.requests[-1] is not request:
            return
        held, self._held = self._held, None
        if request.body_verdict(decision, self.length) is BodyVerdict.READ:
            self._continue(request)
            self._resume_reading()
            if held:
                self.rawDataReceived(b"".join(held))
        else:
            self._hand_over_without_body(request)

    def _continue(self, request: APIRequest) -> None:
        if self._version == b"HTTP/1.1" and request.expects_continue():
            self._send100Continue()

    def rawDataReceived(self, data: bytes) -> None:
        if self._hijacked is not None:  # what followed the request in its segment, for a handler
            self._hijacked.received(data)  # that hijacked while the request was being parsed
            return
        if self._refused:
            return
        if self._held is not None:
            self._held.append(data)  # bounded: reading is paused
            return
        super().rawDataReceived(data)

    def _finishRequestBody(self, data: bytes) -> None:
        if self._refused:  # the request was handed over already (its body exceeded the limit)
            return
        super()._finishRequestBody(data)

    def refuse_body(self, request: APIRequest) -> None:
        """The body went past what is read and dropped: answer now, read no more."""
        if self._refused or not self.requests or self.requests[-1] is not request:
            return
        self._refused = True
        self._pause_reading()
        # not from inside the transfer decoder that called us
        self.connection.reactor.callLater(0, self._hand_over_without_body, request)

    def _hand_over_without_body(self, request: APIRequest) -> None:
        """Give the request to the chain with no body; the connection closes after its answer."""
        if self._lost:
            return
        self._refused = True
        self._held = None
        self._pause_reading()
        self._close_after(request)
        self._transferDecoder = None
        self._handlingRequest = True
        self.setRawMode()
        request.requestReceived(self._command, self._path, self._version)

    # ------------------------------------------------------------ flow control

    def _pause_reading(self) -> None:
        if not self._reading_paused:
            self._reading_paused = True
            self._networkProducer.pauseProducing()

    def _resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            self._networkProducer.resumeProducing()

    def resumeProducing(self) -> None:
        if self._reading_paused:  # the transport may write again; reading stays paused
            self._waitingForTransport = False
            if self._requestProducer is not None:
                self._requestProducer.resumeProducing()
            return
        super().resumeProducing()

    # ------------------------------------------------------------ ending requests and the connection

    def _close_after(self, request: Any) -> None:
        self.persistent = False
        if not request.startedWriting:
            request.responseHeaders.setRawHeaders(b"connection", [b"close"])

    # ------------------------------------------------------------ hijacking

    def hijack(self, request: Any) -> HijackedHTTPConnection:
        if self._hijacked is not None or self._refused or self._lost or not self.requests \
                or self.requests[-1] is not request or request.startedWriting:
            raise RuntimeError("only the unanswered last request of a live connection can be hijacked")
        self._cancel_deadline()
        self.persistent = False
        self._hijacked = HijackedHTTPConnection(self, request)
        # what arrived after the request (a client that did not wait for the 101) is the new protocol's
        buffered, self._dataBuffer = b"".join(self._dataBuffer), []
        if buffered:
            self._hijacked.received(buffered)
        return self._hijacked

    def requestDone(self, request: Any) -> None:
        if self._hijacked is not None:  # the upgraded stream ended: nothing more of HTTP
            if self.requests and self.requests[0] is request:
                del self.requests[0]
            return
        if self.persistent and not self._refused:
            self._expect_next_request()  # before super(): it replays pipelined bytes
        elif self._refused:
            self._reading_paused = False  # super() resumes the transport; the close pauses it again
        super().requestDone(request)

    def drain(self) -> None:
        """Graceful shutdown: no new request on this connection (as Go's Shutdown: idle
        keep-alive connections close now, new ones get a moment for their first request).
        A hijacked connection is not HTTP's any more (Go's Shutdown leaves it alone too)."""
        if self._lost or self._refused or self._hijacked is not None:
            return
        if self.requests:
            self._close_after(self.requests[-1])
        elif self._buffer:
            self.persistent = False  # a request head is arriving: answered, then closed
        elif self._requests_seen:
            self.loseConnection()  # idle between requests
        else:
            self._set_deadline(min(self.connection.policy.new_connection_grace,
                                   self.connection.policy.request_header_timeout), self._head_timed_out)

    def _answer_and_close(self, status: bytes) -> None:
        """Go's answer to a request it will not read (431, 400), then a lingering close."""
        if self._refused or self._lost:
            return
        self._refused = True
        self._cancel_deadline()
        self._pause_reading()
        self.transport.write(b"HTTP/1.1 " + status + _ERROR_HEADERS + status)
        self.loseConnection()

    def _respondToBadRequestAndDisconnect(self) -> None:
        self._answer_and_close(BAD_REQUEST)

    def loseConnection(self) -> None:
        self._cancel_deadline()
        self._networkProducer.unregisterProducer()
        if self._refused:
            self._networkProducer.pauseProducing()
        self.connection.close(linger=self._refused)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._lost = True
        self._held = None
        self._cancel_deadline()
        if self._hijacked is not None:
            self._hijacked.lost(reason)
        super().connectionLost(reason)

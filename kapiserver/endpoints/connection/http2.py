"""HTTP/2 with the limits of Go's x/net/http2 server as kube-apiserver configures it.

Twisted's :class:`H2Connection` and :class:`H2Stream`, with:

* SETTINGS_MAX_CONCURRENT_STREAMS (upstream's 100 default) and Go's
  SETTINGS_MAX_HEADER_LIST_SIZE; a header list over it is answered 431 on its
  stream (Go's ``handleHeaderListTooLong``), one far over it ends the connection;
* the same body gate as HTTP/1.1: a stream's request is authenticated when
  its headers are complete; while that is pending its DATA is held without
  opening the flow-control window; an unauthenticated request, or one
  declaring a body over the limit, goes to the chain without its body, and
  after the answer the stream is reset (RST_STREAM NO_ERROR, as RFC 9113
  8.1 allows) so the client stops sending;
* an idle timeout (no open stream), a first-request time limit, and PINGs:
  a connection silent for ``http2_ping_interval`` is pinged and closed if it
  stays silent for ``http2_ping_timeout`` (a dead peer holding watches);
* graceful drain: GOAWAY naming the last stream taken, streams opened after it
  refused (REFUSED_STREAM, so clients retry elsewhere), the connection closed
  once its streams are done; on shutdown, and after a request with the
  policy's ``goaway_chance`` (upstream's ``--goaway-chance``), so long-lived
  clients spread again over the workers;
* streams with data to send take turns (x/net/http2's default round-robin write
  scheduler), in place of Twisted's RFC 7540 priority tree.
"""
from __future__ import annotations

import os
import random
from collections import deque
from typing import Any, Optional

import h2.connection
import h2.errors
import h2.exceptions
import h2.settings
import priority
from hyperframe.frame import GoAwayFrame
from twisted.internet import defer
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.logger import Logger
from twisted.web._http2 import H2Connection, H2Stream, _addHeaderToRequest

from kapiserver.endpoints.connection.interfaces import ChannelConnection
from kapiserver.endpoints.filters.request import APIRequest, BodyVerdict

log = Logger()

MAX_FRAME_SIZE = 256 * 1024
HEADER_LIST_TOO_LARGE_BODY = b"<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>"


class RoundRobinStreams:
    """The streams of a connection with data to send, taking turns: what Twisted's
    ``H2Connection.priority`` is asked (upstream's round-robin write scheduler).

    Twisted's ``priority.PriorityTree`` walked every blocked stream (a client's idle watches,
    tens on kube-controller-manager's or the scheduler's connection) for each frame it sent:
    2-3 % of a pod-start burst's server CPU.  PRIORITY signals are ignored, as upstream's
    scheduler ignores them (RFC 9113 deprecated them); so a PRIORITY frame for a stream not
    open yet is not kept either.
    """

    def __init__(self) -> None:
        self._known: set[int] = set()
        self._ready: dict[int, None] = {}  # insertion-ordered: the next turn is the first

    def insert_stream(self, stream_id: int, depends_on: Optional[int] = None, weight: int = 16,
                      exclusive: bool = False) -> None:
        if stream_id in self._known:
            raise priority.DuplicateStreamError(stream_id)
        self._known.add(stream_id)
        self._ready[stream_id] = None

    def reprioritize(self, stream_id: int, depends_on: Optional[int] = None, weight: int = 16,
                     exclusive: bool = False) -> None:
        """Ignored (never MissingStreamError: Twisted would insert the stream to keep the signal)."""

    def block(self, stream_id: int) -> None:
        self._check(stream_id)
        self._ready.pop(stream_id, None)

    def unblock(self, stream_id: int) -> None:
        self._check(stream_id)
        self._ready.setdefault(stream_id, None)

    def remove_stream(self, stream_id: int) -> None:
        self._check(stream_id)
        self._known.discard(stream_id)
        self._ready.pop(stream_id, None)

    def _check(self, stream_id: int) -> None:
        if stream_id not in self._known:
            raise priority.MissingStreamError(stream_id)

    def __iter__(self) -> "RoundRobinStreams":
        return self

    def __next__(self) -> int:
        """The stream whose turn it is (it goes to the back of the line)."""
        for stream_id in self._ready:
            del self._ready[stream_id]
            self._ready[stream_id] = None
            return stream_id
        raise priority.DeadlockError("No unblocked streams to schedule.")


class _H2State(h2.connection.H2Connection):
    """h2's state machine, keeping the decoder's own limit above the advertised one (h2 lowers
    it to the advertised size once the peer acknowledges our SETTINGS)."""

    decoder_limit = 0

    def _local_settings_acked(self) -> Any:
        changes = super()._local_settings_acked()
        self.decoder.max_header_list_size = self.decoder_limit
        return changes


def header_list_size(headers: list) -> int:
    """RFC 9113's size of a header list: name + value + 32 per field."""
    return sum(len(name) + len(value) + 32 for name, value in headers)


class APIH2Stream(H2Stream):
    def __init__(self, streamID: int, connection: "APIH2Connection", headers: list, requestFactory: Any,
                 site: Any, factory: Any) -> None:
        self.declared_length: Optional[int] = None
        self.body_refused = False
        self._holding = False
        self._discarded = 0  # flow-controlled bytes dropped, acknowledged on the connection later
        super().__init__(streamID, connection, headers, requestFactory, site, factory)

    def _convertHeaders(self, headers: list) -> None:
        # Twisted's, without its immediate 100 Continue: that waits for the body gate
        got_length = False
        for name, value in headers:
            if not name.startswith(b":"):
                got_length = _addHeaderToRequest(self._request, (name, value)) or got_length
                if name == b"content-length":
                    self.declared_length = int(value)
            elif name == b":method":
                self.command = value
            elif name == b":path":
                self.path = value
            elif name == b":authority":
                _addHeaderToRequest(self._request, (b"host", value))
        if not got_length:
            self._request.gotLength(0 if self.command in (b"GET", b"HEAD") else None)

    def begin(self, body_expected: bool) -> None:
        """The headers are complete: authenticate, then decide about the body."""
        request = self._request
        if not isinstance(request, APIRequest):
            return
        decision = request.begin(self.command or b"", self.path or b"", b"HTTP/2")
        if not body_expected:
            return
        verdict = request.body_verdict(decision, self.declared_length)
        if verdict is BodyVerdict.WAIT:
            assert decision is not None
            self._holding = True
            self.producing = False  # DATA is buffered without opening the window
            decision.wait().addCallback(lambda _: self._decided(decision))
        elif verdict is BodyVerdict.READ:
            self._continue()
        else:
            self._hand_over_without_body()

    def _decided(self, decision: Any) -> None:
        if not self._holding or not self._conn._streamIsActive(self.streamID):
            return
        self._holding = False
        request = self._request
        if request.body_verdict(decision, self.declared_length) is BodyVerdict.READ:
            self._continue()
            self.resumeProducing()  # replays what arrived meanwhile and opens the window
        else:
            self._hand_over_without_body()

    def _continue(self) -> None:
        if self._request.expects_continue():
            self._send100Continue()

    def refuse_body(self, request: Any) -> None:
        """The body went past what is read and dropped: answer now, read no more."""
        if not self.body_refused:
            self._hand_over_without_body()

    def _hand_over_without_body(self) -> None:
        self.body_refused = True
        self._holding = False
        for chunk, length in self._inboundDataBuffer:
            if isinstance(chunk, bytes):
                self._discarded += length
        self._inboundDataBuffer.clear()
        self.producing = True
        self._request.requestReceived(self.command, self.path, b"HTTP/2")

    def receiveDataChunk(self, data: bytes, flowControlledLength: int) -> None:
        if self.body_refused:
            self._conn.discard_data(self.streamID, flowControlledLength)
            return
        super().receiveDataChunk(data, flowControlledLength)

    def requestComplete(self) -> None:
        if self.body_refused:
            return  # already handed over
        super().requestComplete()


class APIH2Connection(H2Connection):
    transport: Any
    requestFactory: Any

    def __init__(self, connection: ChannelConnection) -> None:
        super().__init__(connection.reactor)
        self.connection = connection
        policy = connection.policy
        self.timeOut = None  # Twisted's idle timer is replaced by the timers below
        self.conn = _H2State(config=self.conn.config)
        self.priority = RoundRobinStreams()
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: policy.http2_max_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: policy.http2_header_list_size,
            # upstream's MaxReadFrameSize: most request bodies fit one frame, and a header
            # block of the allowed size fits h2's 64 CONTINUATION frames
            h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_FRAME_SIZE})
        # frames that large are taken from the start: a client may send them as soon as it has our
        # SETTINGS, in the same flight as its acknowledgement (h2 would apply the new size only to
        # the next read, and end the connection with FRAME_SIZE_ERROR)
        self.conn.max_inbound_frame_size = MAX_FRAME_SIZE
        # hpack's own stop, for lists far over the advertised size (those end the connection);
        # between the two a stream is answered 431
        self.conn.decoder_limit = self.conn.decoder.max_header_list_size = 2 * policy.http2_header_list_size
        self._goaway_last_stream: Optional[int] = None
        self._idle_call: Any = None
        self._watchdog: Any = None
        self._last_read = 0.0
        self._ping_sent_at: Optional[float] = None
        self._lost = False
        self._streams_seen = 0
        # drain() came before any stream: the first ones to arrive are served, then GOAWAY
        self._drain_on_first_stream = False
        self._drain_due = False

    # ------------------------------------------------------------ life cycle

    def connectionMade(self) -> None:
        super().connectionMade()
        self._last_read = self._reactor.seconds()
        # the first request must come as soon as one over HTTP/1.1 would
        self._arm_idle(self.connection.policy.request_header_timeout)
        self._watchdog = self._reactor.callLater(self.connection.policy.http2_ping_interval, self._check_alive)

    def connectionLost(self, reason: Failure = connectionDone, _cancelTimeouts: bool = True) -> None:
        self._lost = True
        self._cancel_idle()
        if self._watchdog is not None and self._watchdog.active():
            self._watchdog.cancel()
        self._watchdog = None
        super().connectionLost(reason, _cancelTimeouts)
        # Twisted ends the protocol itself on a GOAWAY from the peer or a protocol error, and
        # asks the transport to close; with this protocol still registered as its producer the
        # TLS layer would wait: close through the connection, which also bounds the wait
        self.connection.close()

    def dataReceived(self, data: bytes) -> None:
        self._last_read = self._reactor.seconds()
        super().dataReceived(data)
        if self._drain_due and not self._lost:  # after every stream of this read was taken
            self._drain_due = False
            self.drain()

    # ------------------------------------------------------------ idle and ping

    def _arm_idle(self, seconds: float) -> None:
        self._cancel_idle()
        self._idle_call = self._reactor.callLater(seconds, self._idle_timed_out)

    def _cancel_idle(self) -> None:
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.cancel()
        self._idle_call = None

    def _idle_timed_out(self) -> None:
        self._idle_call = None
        if not self.streams:
            self.close_gracefully()

    def _check_alive(self) -> None:
        """PING a silent connection; close it if the PING goes unanswered."""
        self._watchdog = None
        if self._lost:
            return
        policy = self.connection.policy
        now = self._reactor.seconds()
        # Each limit is a point in time, compared and waited for as one: were ``now - since``
        # compared with the limit and ``limit - (now - since)`` waited, rounding could leave a
        # wait too short to move the clock, and the check would run again and again.
        if self._ping_sent_at is not None and self._last_read < self._ping_sent_at:
            due = self._ping_sent_at + policy.http2_ping_timeout
            if now >= due:
                log.info("closing HTTP/2 connection from {peer}: no answer to PING", peer=self.connection.peer)
                self.connection.abort()
                return
        else:
            self._ping_sent_at = None
            due = self._last_read + policy.http2_ping_interval
            if now >= due:
                self.conn.ping(os.urandom(8))
                self._tryToWriteControlData()
                self._ping_sent_at = now
                due = now + policy.http2_ping_timeout
        self._watchdog = self._reactor.callLater(due - now, self._check_alive)

    # ------------------------------------------------------------ streams

    def _requestReceived(self, event: Any) -> None:
        stream_id = event.stream_id
        ended = event.stream_ended is not None
        if self._goaway_last_stream is not None and stream_id > self._goaway_last_stream:
            self._reset(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        if header_list_size(event.headers) > self.connection.policy.http2_header_list_size:
            self._answer_header_list_too_large(stream_id, ended)
            return
        self._cancel_idle()
        self._streams_seen += 1
        if self._drain_on_first_stream:
            self._drain_on_first_stream = False
            self._drain_due = True
        elif self.connection.policy.goaway_chance and random.random() < self.connection.policy.goaway_chance:
            self._drain_due = True  # upstream's WithProbabilisticGoaway: this request is answered, then GOAWAY
        stream = APIH2Stream(stream_id, self, event.headers, self.requestFactory, self.site, self.factory)
        self.streams[stream_id] = stream
        self._streamCleanupCallbacks[stream_id] = defer.Deferred()
        self._outboundStreamQueues[stream_id] = deque()
        try:
            self.priority.insert_stream(stream_id)
        except priority.DuplicateStreamError:  # a PRIORITY frame came first and set it up
            pass
        else:
            self.priority.block(stream_id)
        stream.begin(body_expected=not ended)

    def _answer_header_list_too_large(self, stream_id: int, ended: bool) -> None:
        body = HEADER_LIST_TOO_LARGE_BODY
        self.conn.send_headers(stream_id, [(b":status", b"431"), (b"content-type", b"text/html; charset=utf-8"),
                                           (b"content-length", str(len(body)).encode())])
        self.conn.send_data(stream_id, body, end_stream=True)
        if not ended:
            self.conn.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
        self._tryToWriteControlData()

    def _reset(self, stream_id: int, code: int) -> None:
        try:
            self.conn.reset_stream(stream_id, code)
        except h2.exceptions.ProtocolError:
            return
        self._tryToWriteControlData()

    def _requestDataReceived(self, event: Any) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is None:  # refused, answered 431, or already answered and reset
            self.discard_data(event.stream_id, event.flow_controlled_length)
            return
        stream.receiveDataChunk(event.data, event.flow_controlled_length)

    def _requestEnded(self, event: Any) -> None:
        if event.stream_id in self.streams:
            super()._requestEnded(event)

    def _requestAborted(self, event: Any) -> None:
        if event.stream_id in self.streams:
            super()._requestAborted(event)

    def discard_data(self, stream_id: int, length: int) -> None:
        """Give dropped DATA back to the connection's window, so other streams keep flowing."""
        if not length:
            return
        try:
            self.conn.acknowledge_received_data(length, stream_id)
        except h2.exceptions.ProtocolError:
            return
        self._tryToWriteControlData()

    def _requestDone(self, streamID: int) -> None:
        stream = self.streams.get(streamID)
        super()._requestDone(streamID)
        if self._lost:
            return
        if isinstance(stream, APIH2Stream) and stream.body_refused:
            # answered without reading the body: tell the client to stop sending it
            h2_stream = self.conn.streams.get(streamID)
            if h2_stream is not None and not h2_stream.closed:
                self._reset(streamID, h2.errors.ErrorCodes.NO_ERROR)
            self.discard_data(streamID, stream._discarded)
        if not self.streams:
            if self._goaway_last_stream is not None:
                self.close_gracefully()
            else:
                self._arm_idle(self.connection.policy.idle_timeout)

    # ------------------------------------------------------------ closing

    def drain(self) -> None:
        """Graceful shutdown: GOAWAY, finish the streams taken, then close."""
        if self._lost or self._goaway_last_stream is not None:
            return
        if not self._streams_seen:
            # new: its first request may be on the way; served if it comes within the grace
            self._drain_on_first_stream = True
            self._arm_idle(min(self.connection.policy.new_connection_grace,
                               self.connection.policy.request_header_timeout))
            return
        if not self.streams:
            self.close_gracefully()
            return
        # h2 cannot send a GOAWAY and keep its streams going: the frame is written by hand
        self._goaway_last_stream = self.conn.highest_inbound_stream_id
        frame = GoAwayFrame(0)
        frame.last_stream_id = self._goaway_last_stream
        frame.error_code = h2.errors.ErrorCodes.NO_ERROR
        self._tryToWriteControlData()
        if self._consumerBlocked is None and not self._bufferedControlFrames:
            self.transport.write(frame.serialize())
        else:
            self._bufferedControlFrames.append(frame.serialize())
            self._bufferedControlFrameBytes += len(frame.serialize())

    def close_gracefully(self) -> None:
        """GOAWAY (NO_ERROR) and close, once nothing is open."""
        if self._lost:
            return
        if self._goaway_last_stream is None:  # (a drain has sent its GOAWAY already)
            try:
                self.conn.close_connection()
            except h2.exceptions.ProtocolError:
                pass
            self._tryToWriteControlData()
        self.connection.close()

    def timeoutConnection(self) -> None:  # Twisted's timer is off; kept for safety
        self.close_gracefully()

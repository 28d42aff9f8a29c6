"""Taking an HTTP/1.1 connection out of HTTP (``APIHTTPChannel.hijack``, Go's ``http.Hijacker``), in memory:
the upgraded protocol gets every byte the client sent after its request, the request is finished as a
``101`` when the connection ends, a graceful shutdown leaves the connection alone, and only the
unanswered last request of a connection can be hijacked."""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.endpoints.connection.http1 import HIJACK_BUFFER_BYTES, HijackedHTTPConnection
from kapiserver.endpoints.connection.site import APISite

LIMIT = 1024 * 1024
UPGRADE = (b"GET /upgrade HTTP/1.1\r\nHost: kapiserver\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
           b"Content-Length: 0\r\n\r\n")


class Recorder(Protocol):
    """The protocol an upgrade attaches: what it got, and how it ended."""

    def __init__(self) -> None:
        self.received = b""
        self.ended: Optional[Failure] = None

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = Failure(Exception())) -> None:
        self.ended = reason


class Handlers(resource.Resource):
    """``/upgrade`` is held (or hijacked at once: ``hijack_now``); ``/plain`` answered; ``/answered``
    writes part of an answer and then tries to hijack."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[server.Request] = []
        self.hijack_now = False
        self.hijacked: Optional[HijackedHTTPConnection] = None
        self.refusals: list[str] = []

    def render(self, request: server.Request) -> Any:
        self.requests.append(request)
        if request.path == b"/plain":
            return b"plain answer"
        if request.path == b"/answered":
            request.write(b"begun")
            try:
                request.channel.hijack(request)  # type: ignore[union-attr]
            except RuntimeError as e:
                self.refusals.append(str(e))
            request.finish()
            return server.NOT_DONE_YET
        if self.hijack_now:
            self.hijacked = request.channel.hijack(request)  # type: ignore[union-attr]
        return server.NOT_DONE_YET


class HijackTests(unittest.TestCase):
    def setUp(self) -> None:
        self.clock = MemoryReactorClock()
        self.handlers = Handlers()
        self.site = APISite(self.handlers, LIMIT, reactor=self.clock, access_log=False)
        self.connection = self.site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.connection.makeConnection(self.transport)

    def send(self, data: bytes) -> None:
        self.connection.dataReceived(data)

    def hijack_last(self) -> HijackedHTTPConnection:
        request = self.handlers.requests[-1]
        return request.channel.hijack(request)  # type: ignore[union-attr]

    def test_bytes_sent_with_the_request_reach_the_protocol_when_the_handler_hijacks_at_once(self):
        # a client that does not wait for the 101 (its first frames in the request's segment)
        self.handlers.hijack_now = True
        self.send(UPGRADE + b"first frames")
        hijacked = self.handlers.hijacked
        assert hijacked is not None
        self.send(b", more before the attach")
        recorder = Recorder()
        hijacked.attach(recorder)
        self.assertEqual(recorder.received, b"first frames, more before the attach")
        self.send(b", then after")
        self.assertEqual(recorder.received, b"first frames, more before the attach, then after")
        self.assertEqual(self.transport.value(), b"")  # HTTP wrote nothing: the protocol answers itself
        recorder.transport.write(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")  # type: ignore[union-attr]
        self.assertEqual(self.transport.value(), b"HTTP/1.1 101 Switching Protocols\r\n\r\n")

    def test_bytes_that_arrived_while_the_handler_worked_reach_the_protocol(self):
        self.send(UPGRADE)
        self.send(b"early")  # the handler has not hijacked yet: HTTP holds these
        hijacked = self.hijack_last()
        self.send(b" and pending")
        recorder = Recorder()
        hijacked.attach(recorder)
        self.send(b" and live")
        self.assertEqual(recorder.received, b"early and pending and live")

    def test_reading_pauses_while_nobody_is_attached_and_resumes_on_attach(self):
        self.send(UPGRADE)
        hijacked = self.hijack_last()
        self.send(b"x" * (HIJACK_BUFFER_BYTES + 1))
        self.assertEqual(self.transport.producerState, "paused")
        recorder = Recorder()
        hijacked.attach(recorder)
        self.assertEqual(self.transport.producerState, "producing")
        self.assertEqual(len(recorder.received), HIJACK_BUFFER_BYTES + 1)

    def test_the_request_finishes_as_a_101_when_the_connection_ends(self):
        self.send(UPGRADE)
        request = self.handlers.requests[-1]
        finished: list[Any] = []
        request.notifyFinish().addBoth(finished.append)
        hijacked = self.hijack_last()
        recorder = Recorder()
        hijacked.attach(recorder)
        self.assertEqual(finished, [])
        self.connection.connectionLost(Failure(ConnectionError("client gone")))
        self.assertEqual(finished, [None])  # finished, not failed: audit and metrics count a 101
        self.assertEqual(request.code, 101)
        self.assertIsNotNone(recorder.ended)
        self.assertEqual(self.transport.value(), b"")  # no HTTP answer was written on the stream

    def test_a_client_gone_before_the_attach_ends_the_protocol_at_once(self):
        self.send(UPGRADE)
        request = self.handlers.requests[-1]
        hijacked = self.hijack_last()
        self.connection.connectionLost(Failure(ConnectionError("client gone")))
        self.assertEqual(request.code, 101)
        recorder = Recorder()
        hijacked.attach(recorder)
        self.assertIsNotNone(recorder.ended)

    def test_a_graceful_shutdown_leaves_a_hijacked_connection_alone(self):
        idle_transport = StringTransport()
        idle = self.site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40001))
        idle.makeConnection(idle_transport)
        idle.dataReceived(b"GET /plain HTTP/1.1\r\nHost: kapiserver\r\n\r\n")
        self.assertIn(b"plain answer", idle_transport.value())
        self.send(UPGRADE)
        recorder = Recorder()
        self.hijack_last().attach(recorder)
        self.site.connections.drain()
        self.assertTrue(idle_transport.disconnecting)  # an idle keep-alive connection closes
        self.assertFalse(self.transport.disconnecting)  # the stream goes on
        self.send(b"still flowing")
        self.assertEqual(recorder.received, b"still flowing")
        self.clock.advance(3600)  # no request deadline applies to it either
        self.assertFalse(self.transport.disconnecting)

    def test_only_the_unanswered_last_request_can_be_hijacked(self):
        self.send(b"GET /answered HTTP/1.1\r\nHost: kapiserver\r\n\r\n")
        self.assertEqual(self.handlers.refusals,
                         ["only the unanswered last request of a live connection can be hijacked"])
        self.assertIn(b"begun", self.transport.value())  # the answer it had begun went on as HTTP
        answered = self.handlers.requests[-1]
        channel = self.connection.channel
        self.send(b"GET /plain HTTP/1.1\r\nHost: kapiserver\r\n\r\n")
        self.assertIn(b"plain answer", self.transport.value())
        self.send(UPGRADE)
        # an earlier request of the connection is no longer its to give
        self.assertRaises(RuntimeError, channel.hijack, answered)
        hijacked = self.hijack_last()
        self.assertRaises(RuntimeError, self.hijack_last)  # and a connection is hijacked once
        recorder = Recorder()
        hijacked.attach(recorder)
        self.assertRaises(RuntimeError, hijacked.attach, Recorder())

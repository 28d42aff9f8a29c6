"""The time limits of a client connection, on a fake clock: the TLS handshake, the request head
(Go's ``ReadHeaderTimeout``), the idle keep-alive connection (``IdleTimeout``), and HTTP/2's
PINGs to a silent peer (client-go's ``ReadIdleTimeout``/``PingTimeout``, on the server side).

The connection is :class:`APIConnection` of the server's :class:`APISite` over an in-memory
transport; its timers run on a ``MemoryReactorClock`` the tests step, so each limit is shown to
the hundredth of a second whatever the machine's load.  ``tests/e2e/test_connection_hygiene.py``
shows the same limits on a real server process, without timing them.
"""
from __future__ import annotations

from typing import Any, Optional

import h2.config
import h2.connection
import h2.events
from hyperframe.frame import DataFrame, Frame, GoAwayFrame
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import INegotiated
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial import unittest
from twisted.web import resource, server
from zope.interface import alsoProvides

from kapiserver.endpoints.connection.policy import ConnectionPolicy
from kapiserver.endpoints.connection.site import APISite

HANDSHAKE, HEAD, IDLE = 2.0, 2.0, 3.0
PING_INTERVAL, PING_TIMEOUT = 2.0, 1.0
JUST_BEFORE = 0.01  # how far before a limit the connection is seen still open
GET = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Answers(resource.Resource):
    """``/readyz`` answers at once; ``/watch`` keeps its request open (as a watch does)."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.open: list[server.Request] = []

    def render_GET(self, request: server.Request) -> Any:
        if request.path == b"/watch":
            self.open.append(request)
            request.write(b"{}\n")
            return server.NOT_DONE_YET
        return b"ok"


class Transport(StringTransport):
    """The in-memory transport, with what the HTTP/2 channel asks of a TCP one (and of TLS)."""

    negotiatedProtocol: Optional[bytes] = None

    def setTcpNoDelay(self, enabled: bool) -> None:
        pass


class ConnectionTestCase(unittest.TestCase):
    policy = ConnectionPolicy(tls_handshake_timeout=HANDSHAKE, request_header_timeout=HEAD, idle_timeout=IDLE,
                              http2_ping_interval=PING_INTERVAL, http2_ping_timeout=PING_TIMEOUT)

    def connect(self, alpn: Optional[bytes] = None) -> Transport:
        """A new client connection: plain (HTTP/1.1 at once) or TLS, whose handshake ends with
        ``handshake_done`` and then speaks ``alpn``."""
        self.clock = MemoryReactorClock()
        self.answers = Answers()
        site = APISite(self.answers, max_body_bytes=1024, policy=self.policy, reactor=self.clock,
                       access_log=False)
        address = IPv4Address("TCP", "192.0.2.1", 40000)
        self.connection = site.buildProtocol(address)
        self.transport = Transport(peerAddress=address)
        if alpn is not None:
            alsoProvides(self.transport, INegotiated)
            self.transport.negotiatedProtocol = alpn
        self.connection.makeConnection(self.transport)
        return self.transport

    def assert_open_until(self, seconds: float, closed: Any) -> None:
        """Still open ``JUST_BEFORE`` ahead of ``seconds`` from now, ``closed()`` at ``seconds``."""
        self.clock.advance(seconds - JUST_BEFORE)
        self.assertFalse(self.transport.disconnecting, "closed before its limit")
        self.clock.advance(JUST_BEFORE)
        self.assertTrue(closed(), "still open at its limit")


class HTTP1DeadlineTests(ConnectionTestCase):
    def aborted(self) -> bool:
        return bool(self.transport.disconnected)  # abortConnection: no answer, no lingering

    def closed(self) -> bool:
        return bool(self.transport.disconnecting) and not self.transport.disconnected

    def test_an_unfinished_request_head_is_cut_off_at_the_limit_unanswered(self) -> None:
        self.connect()
        self.connection.dataReceived(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")
        self.assert_open_until(HEAD, self.aborted)
        self.assertEqual(self.transport.value(), b"")  # as Go's ReadHeaderTimeout: no answer

    def test_a_header_trickle_does_not_extend_the_limit(self) -> None:
        self.connect()
        self.connection.dataReceived(b"GET /api/v1/namespaces HTTP/1.1\r\n")
        for _ in range(3):
            self.clock.advance(0.5)
            self.connection.dataReceived(b"X-Trickle: 1\r\n")
        self.assert_open_until(HEAD - 1.5, self.aborted)
        self.assertEqual(self.transport.value(), b"")

    def test_an_unfinished_tls_handshake_is_cut_off_at_the_limit(self) -> None:
        self.connect(alpn=b"http/1.1")
        self.assert_open_until(HANDSHAKE, self.aborted)

    def test_the_head_limit_counts_from_the_end_of_the_handshake(self) -> None:
        self.connect(alpn=b"http/1.1")
        self.clock.advance(HANDSHAKE - 0.5)
        self.connection.handshakeCompleted()
        self.assert_open_until(HEAD, self.aborted)  # past the handshake's limit by now, not the head's

    def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(self) -> None:
        self.connect()
        self.connection.dataReceived(GET)
        self.assertTrue(self.transport.value().startswith(b"HTTP/1.1 200 OK\r\n"))
        self.assert_open_until(IDLE, self.closed)  # closed after what was written, not aborted

    def test_a_keep_alive_connection_moves_between_its_limits(self) -> None:
        # one timer per connection serves the head, answer and idle phases: a pause longer than
        # the head limit (shorter than the idle one) between requests keeps the connection; a
        # slow head of the next request is then cut off at the head limit
        self.connect()
        for _ in range(2):
            self.transport.clear()
            self.connection.dataReceived(GET)
            self.assertTrue(self.transport.value().startswith(b"HTTP/1.1 200 OK\r\n"))
            self.clock.advance(HEAD + 0.5)
            self.assertFalse(self.transport.disconnecting)
        self.transport.clear()
        self.connection.dataReceived(b"GET /readyz HTTP/1.1\r\n")
        self.assert_open_until(HEAD, self.aborted)
        self.assertEqual(self.transport.value(), b"")

    def test_a_request_being_answered_has_no_connection_limit(self) -> None:
        self.connect()
        self.connection.dataReceived(b"GET /watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.clock.advance(10 * (HEAD + IDLE))  # the timeout filter bounds requests, not the connection
        self.assertFalse(self.transport.disconnecting)
        self.answers.open[0].finish()
        self.assert_open_until(IDLE, self.closed)  # then idle, from the end of the answer


class HTTP2TestCase(ConnectionTestCase):
    """An HTTP/2 connection, and h2's client on its other end."""

    def setUp(self) -> None:
        self.connect(alpn=b"h2")
        self.connection.handshakeCompleted()
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                            header_encoding="utf-8"))
        self.client.initiate_connection()
        self.send()
        self.receive()

    def send(self) -> None:
        data = self.client.data_to_send()
        if data:  # a read of nothing would count as a sign of life
            self.connection.dataReceived(data)

    def receive(self, answer: bool = True) -> list[h2.events.Event]:
        """What the server sent (the fake clock's zero-delay writes done first); what h2 answers
        (SETTINGS and PING acknowledgements) goes back unless ``answer`` is false: a dead peer."""
        self.clock.advance(0)
        events = self.client.receive_data(self.transport.value())
        self.transport.clear()
        if answer:
            self.send()
        else:
            self.client.data_to_send()
        return events

    def request(self, path: str) -> int:
        stream = self.client.get_next_available_stream_id()
        self.client.send_headers(stream, [(":method", "GET"), (":path", path), (":scheme", "https"),
                                          (":authority", "127.0.0.1")], end_stream=True)
        self.send()
        return stream

    def pings(self, events: list[h2.events.Event]) -> int:
        return sum(isinstance(event, h2.events.PingReceived) for event in events)


class HTTP2DeadlineTests(HTTP2TestCase):
    def test_a_live_client_keeps_its_quiet_watch(self) -> None:
        stream = self.request("/watch")
        self.receive()
        pinged = 0
        for _ in range(100):  # ten times the ping interval, answering every PING
            self.clock.advance(PING_INTERVAL / 5)
            pinged += self.pings(self.receive())
        self.assertFalse(self.transport.disconnecting)
        self.assertGreaterEqual(pinged, 10)
        self.assertIn(stream, self.client.streams)  # the watch is still open

    def test_a_dead_peer_is_closed_after_an_unanswered_ping(self) -> None:
        self.request("/watch")
        self.receive()
        self.clock.advance(PING_INTERVAL - JUST_BEFORE)  # a silent connection is pinged at the interval
        self.assertEqual(self.pings(self.receive(answer=False)), 0)
        self.clock.advance(JUST_BEFORE)
        self.assertEqual(self.pings(self.receive(answer=False)), 1)
        self.assert_open_until(PING_TIMEOUT, lambda: bool(self.transport.disconnected))  # aborted

    def test_idle_connection_is_closed_with_goaway(self) -> None:
        stream = self.request("/readyz")
        ended = [e for e in self.receive() if isinstance(e, h2.events.StreamEnded)]
        self.assertEqual([e.stream_id for e in ended], [stream])
        self.clock.advance(IDLE - JUST_BEFORE)
        events = self.receive()
        self.assertFalse([e for e in events if isinstance(e, h2.events.ConnectionTerminated)])
        self.assertFalse(self.transport.disconnecting)
        self.clock.advance(JUST_BEFORE)
        terminated = [e for e in self.receive() if isinstance(e, h2.events.ConnectionTerminated)]
        self.assertEqual([(e.last_stream_id, e.error_code) for e in terminated], [(stream, 0)])
        self.assertTrue(self.transport.disconnecting)



class HTTP2GoawayChanceTests(HTTP2TestCase):
    """``goaway_chance`` (upstream's ``--goaway-chance``), here 1: every request is answered, then
    its connection is sent GOAWAY; what is under way finishes, and the client opens a new connection
    (a worker's accept balancer gives it to the worker with the fewest).

    h2's own client stops reading streams once it has a GOAWAY (Go's goes on, as RFC 9113 says),
    so the server's frames are read here with hyperframe."""

    policy = HTTP2TestCase.policy._replace(goaway_chance=1.0)

    def frames(self) -> list[Frame]:
        self.clock.advance(0)
        data = memoryview(self.transport.value())
        self.transport.clear()
        frames = []
        while data:
            frame, length = Frame.parse_frame_header(data[:9])
            frame.parse_body(data[9:9 + length])
            frames.append(frame)
            data = data[9 + length:]
        return frames

    def test_a_request_is_answered_then_the_connection_goes_away(self) -> None:
        stream = self.request("/readyz")
        frames = self.frames()
        self.assertEqual([(f.last_stream_id, f.error_code) for f in frames if isinstance(f, GoAwayFrame)],
                         [(stream, 0)])  # NO_ERROR, naming the stream it answers
        self.assertEqual(b"".join(f.data for f in frames if isinstance(f, DataFrame) and f.stream_id == stream), b"ok")
        self.assertTrue(any("END_STREAM" in f.flags for f in frames if f.stream_id == stream))
        self.assertTrue(self.transport.disconnecting)

    def test_a_watch_under_way_goes_on_after_the_goaway(self) -> None:
        stream = self.request("/watch")
        frames = self.frames()
        self.assertEqual([f.last_stream_id for f in frames if isinstance(f, GoAwayFrame)], [stream])
        self.assertFalse(self.transport.disconnecting)  # the watch is still being served
        self.answers.open[0].write(b'{"type":"ADDED"}\n')
        self.assertEqual([f.data for f in self.frames() if isinstance(f, DataFrame)], [b'{"type":"ADDED"}\n'])
        self.answers.open[0].finish()
        self.frames()
        self.assertTrue(self.transport.disconnecting)  # closed once its last stream is done


class HTTP2NoGoawayChanceTests(HTTP2TestCase):
    """With the default chance (0) a connection serves request after request."""

    def test_many_requests_on_one_connection(self) -> None:
        for _ in range(200):
            self.request("/readyz")
            events = self.receive()
            self.assertFalse([e for e in events if isinstance(e, h2.events.ConnectionTerminated)])
        self.assertFalse(self.transport.disconnecting)

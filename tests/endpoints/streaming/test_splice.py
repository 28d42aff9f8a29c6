"""The byte relay of upgraded connections (SPDY or WebSocket passed through to the kubelet):
both directions, backpressure, half-close, teardown, and the upgrade-aware answers."""
from __future__ import annotations

from twisted.internet import defer, endpoints, protocol, reactor
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial import unittest
from zope.interface import implementer

from kapiserver.endpoints.streaming.splice import serve_upgrade
from tests.endpoints.streaming.fakes import FakeClient, FakeDialer, HalfCloseTransport, HijackedTCP, TCPDialer

PATH = b"/exec/default/pod/c?command=sh&output=1"
REQUEST = [(b"Connection", b"Upgrade"), (b"Upgrade", b"SPDY/3.1"), (b"X-Stream-Protocol-Version", b"v4.channel.k8s.io")]
UPGRADED = [(b"Connection", b"Upgrade"), (b"Upgrade", b"SPDY/3.1"), (b"X-Stream-Protocol-Version", b"v4.channel.k8s.io")]
HEAD_101 = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
            b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")


class SpliceTests(unittest.TestCase):

    def setUp(self):
        self.clock = Clock()
        self.dialer = FakeDialer(self.clock)
        self.results: list[int] = []

    def serve(self, client: FakeClient) -> None:
        serve_upgrade(client, self.dialer, PATH, REQUEST, clock=self.clock).addCallback(self.results.append)

    def settle(self) -> None:
        for _ in range(5):
            self.clock.advance(0)

    def test_bytes_both_ways_after_the_kubelets_101(self):
        client = FakeClient(self.clock, early=b"frames sent right after the request")
        self.serve(client)
        [call] = self.dialer.calls
        self.assertEqual((call.path, call.headers), (PATH, REQUEST))
        kubelet = call.upgrade(UPGRADED, after_head=b"kubelet's first frame")
        # the client sees the kubelet's head, then what followed it; the kubelet what the client sent early
        self.assertEqual(client.transport.value(), HEAD_101 + b"kubelet's first frame")
        self.assertEqual(kubelet.value(), b"frames sent right after the request")
        client.send(b" and more")
        kubelet.protocol.dataReceived(b" and an answer")
        self.assertEqual(kubelet.value(), b"frames sent right after the request and more")
        self.assertEqual(client.transport.value(), HEAD_101 + b"kubelet's first frame and an answer")
        # either side's end closes the other
        kubelet.end()
        self.assertTrue(client.transport.disconnecting)
        self.settle()
        self.assertEqual(self.results, [101])

    def test_a_side_that_does_not_read_pauses_the_other(self):
        client = FakeClient(self.clock)
        self.serve(client)
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        self.assertEqual((client.transport.producerState, kubelet.producerState), ("producing", "producing"))
        client.transport.producer.pauseProducing()
        self.assertEqual(kubelet.producerState, "paused")
        kubelet.producer.pauseProducing()
        self.assertEqual(client.transport.producerState, "paused")
        client.transport.producer.resumeProducing()
        self.assertEqual(kubelet.producerState, "producing")
        self.assertEqual(client.transport.producerState, "paused")

    def test_half_closes_pass_through_tcp_transports(self):
        client = FakeClient(self.clock, transport=HalfCloseTransport(self.clock))
        self.serve(client)
        kubelet = self.dialer.calls[0].upgrade(UPGRADED, transport=HalfCloseTransport(self.clock))
        client.transport.peer_half_closes()  # the client has sent all it will send
        self.assertTrue(kubelet.write_closed)
        self.assertFalse(kubelet.disconnecting)
        kubelet.protocol.dataReceived(b"still answering")  # the other way still flows
        self.assertEqual(client.transport.value(), HEAD_101 + b"still answering")
        kubelet.peer_half_closes()
        self.assertTrue(client.transport.write_closed)
        self.settle()  # each side, closed both ways, closes
        self.assertTrue(client.transport.ended)
        self.assertTrue(kubelet.ended)
        self.assertEqual(self.results, [101])

    def test_a_half_close_towards_a_transport_without_one_closes_it(self):
        client = FakeClient(self.clock, transport=HalfCloseTransport(self.clock))
        self.serve(client)
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)  # not an ITCPTransport (like TLS)
        client.transport.peer_half_closes()
        self.assertTrue(kubelet.disconnecting)
        self.settle()
        self.assertTrue(client.transport.ended)

    def test_no_upgrade_is_answered_as_the_upgrade_aware_proxy_does(self):
        client = FakeClient(self.clock)
        self.serve(client)
        self.dialer.calls[0].answer(404, b"Not Found", [(b"Content-Type", b"text/plain")], b"no such pod")
        self.assertEqual(client.transport.value(),
                         b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
                         b"Connection: close\r\n\r\nno such pod")
        self.settle()
        self.assertEqual(self.results, [404])


@implementer(IHalfCloseableProtocol)
class EchoKubelet(protocol.Protocol):
    """Echoes, and when its peer has finished sending, says goodbye and closes."""

    def dataReceived(self, data: bytes) -> None:
        self.transport.write(data)

    def readConnectionLost(self) -> None:
        self.transport.write(b"bye")
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass


@implementer(IHalfCloseableProtocol)
class HalfClosingClient(protocol.Protocol):
    """Sends, ends its sending, and collects the answer until the connection ends."""

    def __init__(self) -> None:
        self.received = b""
        self.finished: defer.Deferred[bytes] = defer.Deferred()

    def connectionMade(self) -> None:
        self.transport.write(b"hello")
        self.transport.loseWriteConnection()

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def readConnectionLost(self) -> None:
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.finished.callback(self.received)


class LoopbackSpliceTests(unittest.TestCase):
    """The relay between real loopback TCP connections: Twisted's own half-close and producers."""

    async def test_a_half_close_crosses_the_relay_and_the_answer_comes_back(self):
        kubelet_port = reactor.listenTCP(0, protocol.Factory.forProtocol(EchoKubelet), interface="127.0.0.1")
        self.addCleanup(kubelet_port.stopListening)
        served: list[defer.Deferred[int]] = []

        class Hijacking(protocol.Protocol):
            def connectionMade(self) -> None:
                served.append(serve_upgrade(HijackedTCP(self.transport), TCPDialer(kubelet_port.getHost().port, UPGRADED),
                                            PATH, REQUEST, clock=reactor))

        api_port = reactor.listenTCP(0, protocol.Factory.forProtocol(Hijacking), interface="127.0.0.1")
        self.addCleanup(api_port.stopListening)
        client = HalfClosingClient()
        await endpoints.connectProtocol(
            endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", api_port.getHost().port), client)
        received = await client.finished
        self.assertEqual(received, HEAD_101 + b"hellobye")
        self.assertEqual(await served[0], 101)

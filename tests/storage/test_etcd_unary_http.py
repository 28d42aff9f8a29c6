"""The gateway's unary HTTP/1.1 client: framing, connection reuse, and failures that say
whether the request may have been carried out."""
from __future__ import annotations

from twisted.internet import defer, reactor
from twisted.internet.testing import StringTransport
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.storage.etcd.keepalive import KeepAliveEndpointFactory
from kapiserver.storage.etcd.unary_http import ConnectionBroke, GatewayConnection, UnaryHTTPClient

HEAD = b"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"


class Connection:
    """A GatewayConnection on a StringTransport, recording what its pool hears."""

    def __init__(self) -> None:
        self.idle: list[GatewayConnection] = []
        self.gone: list[GatewayConnection] = []
        self.protocol = GatewayConnection(self.idle.append, self.gone.append)
        self.transport = StringTransport()
        self.protocol.makeConnection(self.transport)

    def ask(self) -> defer.Deferred:
        return self.protocol.post(HEAD, b"{}")

    def answer(self, data: bytes, piecewise: bool = False) -> None:
        for piece in ([data[i:i + 1] for i in range(len(data))] if piecewise else [data]):
            self.protocol.dataReceived(piece)


CHUNKED = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nTrailer: Grpc-Trailer-Content-Type\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n"
           b"5\r\n{\"a\":\r\n4;ext=1\r\n\"xy\"\r\n1\r\n}\r\n0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n")


class FramingTests(unittest.TestCase):

    def test_content_length_answer_in_one_piece_or_byte_by_byte(self):
        for piecewise in (False, True):
            c = Connection()
            d = c.ask()
            c.answer(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
                     piecewise)
            self.assertEqual(self.successResultOf(d), (200, b'{"a":1}'))
            self.assertEqual(c.idle, [c.protocol])  # ready for the next request
            self.assertEqual(c.transport.value(), HEAD + b"{}")

    def test_chunked_answer_with_extensions_and_trailers(self):
        for piecewise in (False, True):
            c = Connection()
            d = c.ask()
            c.answer(CHUNKED, piecewise)
            self.assertEqual(self.successResultOf(d), (400, b'{"a":"xy"}'))
            self.assertEqual(c.idle, [c.protocol])

    def test_a_large_chunk_arriving_in_many_reads(self):
        big = bytes(range(256)) * 800  # 200 KiB: one chunk, as the gateway writes a large answer
        answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(big) + big +
                  b"\r\n3\r\nend\r\n0\r\n\r\n")
        for step in (1000, 4096, 65536, 7):
            c = Connection()
            d = c.ask()
            for i in range(0, len(answer), step):
                c.answer(answer[i:i + step])
            self.assertEqual(self.successResultOf(d), (200, big + b"end"), step)
            self.assertEqual(c.idle, [c.protocol])

    def test_connection_reused_for_the_next_answer(self):
        c = Connection()
        first = c.ask()
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1")
        second = c.ask()
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2")
        self.assertEqual((self.successResultOf(first), self.successResultOf(second)), ((200, b"1"), (200, b"2")))

    def test_connection_close_and_http10_are_not_reused(self):
        for answer in (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n1",
                       b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n1"):
            c = Connection()
            d = c.ask()
            c.answer(answer)
            self.assertEqual(self.successResultOf(d), (200, b"1"))
            self.assertEqual(c.idle, [])
            self.assertTrue(c.transport.disconnecting)

    def test_body_without_framing_ends_with_the_connection(self):
        c = Connection()
        d = c.ask()
        c.answer(b"HTTP/1.1 200 OK\r\n\r\nall of ")
        c.answer(b"it")
        self.assertNoResult(d)
        c.protocol.connectionLost(None)
        self.assertEqual(self.successResultOf(d), (200, b"all of it"))
        self.assertEqual(c.gone, [c.protocol])

    def test_connection_lost_mid_answer_is_a_broken_call(self):
        c = Connection()
        d = c.ask()
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
        c.protocol.connectionLost(None)
        self.failureResultOf(d, ConnectionBroke)
        self.assertEqual((c.idle, c.gone), ([], [c.protocol]))

    def test_malformed_answers_fail_the_call_and_drop_the_connection(self):
        for answer in (b"SMTP ready\r\n\r\n",
                       b"HTTP/1.1 abc OK\r\n\r\n",
                       b"HTTP/1.1 0 Zero\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd",
                       b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n12",
                       b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000):
            c = Connection()
            d = c.ask()
            c.answer(answer)
            f = self.failureResultOf(d, ConnectionBroke)
            self.assertIn("etcd", f.getErrorMessage())
            self.assertTrue(c.transport.disconnecting, answer)
            self.assertEqual(c.idle, [])

    def test_cancelled_call_drops_its_connection(self):
        c = Connection()
        d = c.ask()
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertTrue(c.transport.disconnecting)
        c.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1")  # the late answer is nobody's
        self.assertEqual(c.idle, [])


class Answers(resource.Resource):
    """Answers a POST with its own body, chunked in two writes; ``?close`` closes afterwards."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.peers: list[object] = []

    def render_POST(self, request: server.Request) -> bytes:
        self.peers.append(request.transport.getPeer())
        body = request.content.read()
        if request.args.get(b"close"):
            request.setHeader(b"connection", b"close")
        request.write(body[:1])
        request.write(body[1:])
        request.finish()
        return server.NOT_DONE_YET


class ClientTests(unittest.TestCase):
    """Against a real HTTP server on loopback."""

    def setUp(self) -> None:
        self.answers = Answers()
        site = server.Site(self.answers)
        site.displayTracebacks = False
        self.port = reactor.listenTCP(0, site, interface="127.0.0.1")
        self.endpoint = f"http://127.0.0.1:{self.port.getHost().port}"
        self.client = UnaryHTTPClient(KeepAliveEndpointFactory(reactor))

    async def tearDown(self) -> None:
        await self.client.close()
        await defer.maybeDeferred(self.port.stopListening)

    async def test_sequential_calls_share_one_connection(self):
        for i in range(3):
            self.assertEqual(await self.client.post(self.endpoint, "/echo", b'{"n":%d}' % i), (200, b'{"n":%d}' % i))
        self.assertEqual(len(set(map(str, self.answers.peers))), 1)

    async def test_concurrent_calls_each_get_a_connection(self):
        results = await defer.gatherResults([defer.Deferred.fromCoroutine(
            self.client.post(self.endpoint, "/echo", b"%d" % i)) for i in range(4)])
        self.assertEqual(results, [(200, b"%d" % i) for i in range(4)])
        self.assertEqual(len(set(map(str, self.answers.peers))), 4)

    async def test_closed_connection_is_not_reused(self):
        await self.client.post(self.endpoint, "/echo?close=1", b"a")
        await self.client.post(self.endpoint, "/echo", b"b")
        self.assertEqual(len(set(map(str, self.answers.peers))), 2)

    async def test_refused_connection_raises_connect_error(self):
        await self.port.stopListening()
        from twisted.internet.error import ConnectError
        with self.assertRaises(ConnectError):
            await self.client.post(self.endpoint, "/echo", b"a")

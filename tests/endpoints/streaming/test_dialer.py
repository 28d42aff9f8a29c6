"""The upgrade dialer (``HTTPUpgradeDialer``) against a backend on a loopback port: the request it
sends; on ``101`` the connection and whatever followed the head go to the caller's protocol; any
other answer is read whole (Content-Length, chunked or until the close) and the connection closed;
a head that never ends, and a backend that is not there, fail the dial."""
from __future__ import annotations

from typing import Callable, Optional

from twisted.internet import defer, protocol, reactor
from twisted.python.failure import Failure
from twisted.trial import unittest

from kapiserver.endpoints.streaming.dialer import MAX_HEAD_BYTES, DialError, HTTPUpgradeDialer, UpgradeHeadError
from kapiserver.endpoints.streaming.interfaces import UpgradeResponse

PATH = b"/exec/default/web/c?command=sh&input=1&output=1"
HEADERS = [(b"Connection", b"Upgrade"), (b"Upgrade", b"SPDY/3.1"), (b"X-Stream-Protocol-Version", b"v4.channel.k8s.io")]


class Backend(protocol.Protocol):
    """The backend's side: reads the request head, then lets the test answer."""

    def __init__(self, answer: Callable[["Backend"], None]) -> None:
        self.answer = answer
        self.head = b""
        self.after_head = b""
        self.lost: defer.Deferred[BaseException] = defer.Deferred()
        self.got_more: Optional[defer.Deferred[bytes]] = None

    def dataReceived(self, data: bytes) -> None:
        if b"\r\n\r\n" not in self.head:
            self.head += data
            if b"\r\n\r\n" in self.head:
                self.head, _, rest = self.head.partition(b"\r\n\r\n")
                self.head += b"\r\n\r\n"
                self.after_head = rest
                self.answer(self)
            return
        self.after_head += data
        if self.got_more is not None:
            waiting, self.got_more = self.got_more, None
            waiting.callback(self.after_head)

    def more(self) -> "defer.Deferred[bytes]":
        self.got_more = defer.Deferred()
        return self.got_more

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.lost.callback(reason.value)  # the reason as a value: awaiting it does not raise


class Upgraded(protocol.Protocol):
    """The caller's protocol for the upgraded connection."""

    def __init__(self) -> None:
        self.received = b""
        self.connected_first = False
        self.got: Optional[defer.Deferred[bytes]] = None
        self.lost: defer.Deferred[BaseException] = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        if self.got is not None:
            waiting, self.got = self.got, None
            waiting.callback(self.received)

    def more(self) -> "defer.Deferred[bytes]":
        self.got = defer.Deferred()
        return self.got

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.lost.callback(reason.value)  # the reason as a value: awaiting it does not raise


class DialerTests(unittest.TestCase):
    def listen(self, answer: Callable[[Backend], None]) -> list[Backend]:
        backends: list[Backend] = []

        def build() -> Backend:
            backend = Backend(answer)
            backends.append(backend)
            return backend
        port = reactor.listenTCP(0, protocol.Factory.forProtocol(build), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.dialer = HTTPUpgradeDialer(reactor, "127.0.0.1", port.getHost().port, None, timeout_seconds=5)
        return backends

    def cleanup_connection(self, backend: Backend) -> None:
        self.addCleanup(lambda: backend.lost)
        self.addCleanup(lambda: backend.transport.abortConnection() if backend.transport.connected else None)

    async def test_a_101_hands_the_connection_and_what_followed_the_head_to_the_protocol(self):
        def answer(backend: Backend) -> None:
            backend.transport.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                                    b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\nfirst frame")
        backends = self.listen(answer)
        upgraded = Upgraded()
        response = await self.dialer.upgrade(PATH, HEADERS, upgraded, method=b"POST")
        [backend] = backends
        self.cleanup_connection(backend)
        self.assertEqual(backend.head, b"POST " + PATH + b" HTTP/1.1\r\nHost: " + self.dialer.netloc +
                         b"\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io"
                         b"\r\n\r\n")
        self.assertEqual((response.code, response.phrase, response.header(b"x-stream-protocol-version")),
                         (101, b"Switching Protocols", b"v4.channel.k8s.io"))
        self.assertTrue(response.raw_head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"))
        self.assertTrue(response.raw_head.endswith(b"\r\n\r\n"))
        if upgraded.received != b"first frame":
            await upgraded.more()
        self.assertEqual(upgraded.received, b"first frame")
        # the connection is the protocol's now, both ways
        sent = backend.more()
        upgraded.transport.write(b"client frames")
        self.assertEqual(await sent, b"client frames")
        got = upgraded.more()
        backend.transport.write(b" and answers")
        self.assertEqual(await got, b"first frame and answers")
        backend.transport.loseConnection()
        await upgraded.lost

    async def dial_refused(self, answer: Callable[[Backend], None]) -> tuple[UpgradeResponse, Backend, Upgraded]:
        backends = self.listen(answer)
        upgraded = Upgraded()
        response = await self.dialer.upgrade(PATH, HEADERS, upgraded, method=b"POST")
        [backend] = backends
        self.cleanup_connection(backend)
        return response, backend, upgraded

    async def test_a_refusal_with_a_content_length_is_read_to_its_length(self):
        body = b'{"kind":"Status","message":"container not found"}'

        def answer(backend: Backend) -> None:  # the backend keeps its connection open
            backend.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                                    b"Content-Length: %d\r\n\r\n" % len(body))
            backend.transport.write(body)
        response, backend, upgraded = await self.dial_refused(answer)
        self.assertEqual((response.code, response.phrase, response.body), (404, b"Not Found", body))
        self.assertEqual(response.header(b"content-type"), b"application/json")
        await backend.lost  # the dialer closed it
        self.assertIsNone(upgraded.transport)  # the caller's protocol never saw the connection

    async def test_a_chunked_refusal_is_decoded(self):
        def answer(backend: Backend) -> None:
            backend.transport.write(b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n"
                                    b"5\r\nhello\r\n")
            reactor.callLater(0.01, backend.transport.write, b"6;ext=1\r\n world\r\n0\r\n\r\n")
        response, backend, upgraded = await self.dial_refused(answer)
        self.assertEqual((response.code, response.body), (400, b"hello world"))
        await backend.lost

    async def test_a_refusal_without_a_length_ends_with_the_connection(self):
        def answer(backend: Backend) -> None:
            backend.transport.write(b"HTTP/1.1 403 Forbidden\r\n\r\nForbidden (user=kube-apiserver, ")
            reactor.callLater(0.01, backend.transport.write, b"verb=create, resource=nodes, subresource=proxy)")
            reactor.callLater(0.02, backend.transport.loseConnection)
        response, backend, upgraded = await self.dial_refused(answer)
        self.assertEqual((response.code, response.body),
                         (403, b"Forbidden (user=kube-apiserver, verb=create, resource=nodes, subresource=proxy)"))

    async def test_a_head_past_the_limit_fails_the_dial_and_closes(self):
        def answer(backend: Backend) -> None:
            backend.transport.write(b"HTTP/1.1 101 Switching Protocols\r\nX-Filler: " + b"x" * (MAX_HEAD_BYTES + 10))
        backends = self.listen(answer)
        with self.assertRaises(UpgradeHeadError) as raised:
            await self.dialer.upgrade(PATH, HEADERS, Upgraded(), method=b"POST")
        self.assertEqual(str(raised.exception), "the response head is too large")
        await backends[0].lost

    async def test_a_garbled_head_and_a_backend_that_closes_without_answering_fail_the_dial(self):
        self.listen(lambda backend: backend.transport.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))
        with self.assertRaises(UpgradeHeadError) as raised:
            await self.dialer.upgrade(PATH, HEADERS, Upgraded(), method=b"POST")
        self.assertEqual(str(raised.exception), "malformed HTTP response b'SSH-2.0-OpenSSH_9.6'")
        self.listen(lambda backend: backend.transport.loseConnection())
        with self.assertRaises(UpgradeHeadError) as raised:
            await self.dialer.upgrade(PATH, HEADERS, Upgraded(), method=b"POST")
        self.assertEqual(str(raised.exception), "the backend closed the connection without an answer")

    async def test_nobody_listening_fails_the_dial(self):
        port = reactor.listenTCP(0, protocol.Factory.forProtocol(protocol.Protocol), interface="127.0.0.1")
        number = port.getHost().port
        await port.stopListening()
        dialer = HTTPUpgradeDialer(reactor, "127.0.0.1", number, None, timeout_seconds=5)
        upgraded = Upgraded()
        with self.assertRaises(DialError) as raised:
            await dialer.upgrade(PATH, HEADERS, upgraded, method=b"POST")
        # Go's words, which the client gets after "error dialing backend: "
        self.assertEqual(str(raised.exception), f"dial tcp 127.0.0.1:{number}: connect: connection refused")
        self.assertIsNone(upgraded.transport)

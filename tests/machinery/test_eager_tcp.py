"""Eager TCP transports over real loopback sockets: a write reaches the socket
before the reactor turns, and what the socket cannot take waits, in order, with Twisted's
flow control."""
from __future__ import annotations

import socket

from twisted.internet import defer, endpoints, protocol, reactor, task
from twisted.trial import unittest

from kapiserver.machinery.eager_tcp import EagerWriteClient, EagerWriteServer, send_writes_at_once, write_at_once


class Held(protocol.Protocol):
    """The server side: handed to the test once connected."""

    def connectionMade(self) -> None:
        self.factory.connected.callback(self)


class EagerWriteTests(unittest.TestCase):

    async def connect(self) -> tuple[Held, socket.socket]:
        factory = protocol.Factory.forProtocol(Held)
        factory.connected = defer.Deferred()  # type: ignore[attr-defined]
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        send_writes_at_once(port)
        client = socket.create_connection(("127.0.0.1", port.getHost().port))
        self.addCleanup(client.close)
        server = await factory.connected  # type: ignore[attr-defined]
        self.addCleanup(server.transport.abortConnection)
        return server, client

    async def test_a_write_is_on_the_socket_before_the_reactor_turns(self):
        server, client = await self.connect()
        self.assertIsInstance(server.transport, EagerWriteServer)
        server.transport.write(b"answer")
        client.settimeout(0)  # no reactor turn has happened since the write: it is there already
        self.assertEqual(client.recv(100), b"answer")
        self.assertFalse(server.transport.dataBuffer or server.transport._tempDataBuffer)

    async def test_nothing_is_sent_after_an_abort(self):
        server, client = await self.connect()
        server.transport.abortConnection()
        server.transport.write(b"late")  # before the abort's connectionLost has run
        await task.deferLater(reactor, 0.01, lambda: None)
        client.settimeout(1)
        try:
            received = client.recv(100)
        except ConnectionResetError:
            received = b""
        self.assertEqual(received, b"")

    async def test_what_the_socket_cannot_take_follows_in_order(self):
        server, client = await self.connect()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        pieces = [bytes([i % 251]) * (256 * 1024 + i) for i in range(24)] + [b"small", b"end"]
        for piece in pieces:
            server.transport.write(piece)
        # more than the kernel buffers take: the rest is queued, and reading drains it
        self.assertTrue(server.transport._tempDataLen or len(server.transport.dataBuffer))
        expected = b"".join(pieces)
        received = bytearray()
        client.setblocking(False)
        while len(received) < len(expected):
            try:
                received += client.recv(1 << 20)
            except BlockingIOError:
                await task.deferLater(reactor, 0.001, lambda: None)
        self.assertEqual(bytes(received), expected)

    async def test_a_producer_is_paused_while_the_queue_is_full(self):
        server, client = await self.connect()

        class Producer:
            paused = 0

            def pauseProducing(self) -> None:
                self.paused += 1

            def resumeProducing(self) -> None:
                pass

            def stopProducing(self) -> None:
                pass
        producer = Producer()
        server.transport.registerProducer(producer, True)
        for _ in range(64):
            server.transport.write(b"x" * 256 * 1024)
        self.assertGreater(producer.paused, 0)
        server.transport.unregisterProducer()


class EagerClientTests(unittest.TestCase):
    """A connected client transport made eager: its writes leave before the reactor turns."""

    async def test_a_client_write_is_on_the_socket_before_the_reactor_turns(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        self.addCleanup(listener.close)
        client = await endpoints.connectProtocol(
            endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", listener.getsockname()[1]), protocol.Protocol())
        self.addCleanup(client.transport.abortConnection)
        accepted, _ = listener.accept()
        self.addCleanup(accepted.close)
        write_at_once(client.transport)
        self.assertIsInstance(client.transport, EagerWriteClient)
        client.transport.write(b"request")
        client.transport.writeSequence([b" head", b" body"])
        accepted.settimeout(0)
        self.assertEqual(accepted.recv(100), b"request head body")

    def test_other_transports_are_left_alone(self):
        transport = object()
        write_at_once(transport)
        self.assertIs(type(transport), object)

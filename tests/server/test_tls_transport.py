"""The serving port's TLS transport over a real loopback TLS connection: what a client
reads is exactly what the server wrote, in large writes, small ones, and writes made
before the handshake finished."""
from __future__ import annotations

import hashlib

from twisted.internet import defer, endpoints, protocol, reactor, ssl
from twisted.trial import unittest

from kapiserver.server.certs import ensure_certificates, serving_context_factory
from kapiserver.server.tls_transport import RECORD_BYTES, ServingTLSFactory, ServingTLSTransport


class Writer(protocol.Protocol):
    """Writes the factory's pieces as soon as the connection is made (before the handshake)."""

    def connectionMade(self) -> None:
        for piece in self.factory.pieces:
            self.transport.write(piece)
        self.transport.loseConnection()


class Reader(protocol.Protocol):
    def __init__(self) -> None:
        self.received = bytearray()
        self.done: defer.Deferred = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason=None) -> None:
        self.done.callback(bytes(self.received))


class ServingTLSTransportTests(unittest.TestCase):

    def setUp(self) -> None:
        self.bundle = ensure_certificates(self.mktemp())

    async def exchange(self, pieces: list[bytes]) -> bytes:
        """What a TLS client reads from a server that writes ``pieces``."""
        writers = protocol.Factory.forProtocol(Writer)
        writers.pieces = pieces  # type: ignore[attr-defined]
        tls = ServingTLSFactory(serving_context_factory(self.bundle), False, writers)
        port = reactor.listenTCP(0, tls, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        trust = ssl.Certificate.loadPEM(self.bundle.ca_cert_pem)
        client = endpoints.wrapClientTLS(ssl.optionsForClientTLS("localhost", trust),
                                         endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port))
        reader = await endpoints.connectProtocol(client, Reader())
        return await reader.done

    async def test_connections_use_the_serving_transport(self):
        tls = ServingTLSFactory(serving_context_factory(self.bundle), False, protocol.Factory())
        self.assertIs(tls.protocol, ServingTLSTransport)

    async def test_a_large_write_arrives_whole_and_in_order(self):
        data = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(40_000))  # 1.28 MB, not repetitive
        self.assertGreater(len(data), 50 * RECORD_BYTES)
        received = await self.exchange([data])
        self.assertEqual(len(received), len(data))
        self.assertEqual(received, data)

    async def test_small_and_large_writes_keep_their_order(self):
        pieces = [b"head\r\n", b"x" * (3 * RECORD_BYTES + 17), b"tail", b"y" * RECORD_BYTES, b"end"]
        self.assertEqual(await self.exchange(pieces), b"".join(pieces))

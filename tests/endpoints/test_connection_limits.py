"""The accept-time caps: in total and per client address, counted until each connection ends."""
from __future__ import annotations

from twisted.internet import protocol, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.trial import unittest

from kapiserver.endpoints.connection.limits import ConnectionLimiter, descriptor_budget
from kapiserver.endpoints.connection.policy import ConnectionPolicy


class ConnectionLimiterTests(unittest.TestCase):
    def setUp(self) -> None:
        inner = protocol.Factory.forProtocol(protocol.Protocol)
        self.limiter = ConnectionLimiter(inner, ConnectionPolicy(max_connections=5, max_connections_per_address=3),
                                         task.Clock())

    def accept(self, host: str):
        address = IPv4Address("TCP", host, 40000)
        p = self.limiter.buildProtocol(address)
        if p is not None:
            p.makeConnection(StringTransport(peerAddress=address))
        return p

    def test_per_address_cap(self) -> None:
        accepted = [self.accept("192.0.2.1") for _ in range(4)]
        self.assertEqual([p is not None for p in accepted], [True, True, True, False])
        self.assertIsNotNone(self.accept("192.0.2.2"))  # another client is not affected
        accepted[0].connectionLost(None)
        self.assertIsNotNone(self.accept("192.0.2.1"))  # a slot came free
        self.assertEqual(self.limiter.refused_total, 1)

    def test_total_cap(self) -> None:
        for i in range(5):
            self.assertIsNotNone(self.accept(f"192.0.2.{i}"))
        self.assertIsNone(self.accept("192.0.2.200"))
        self.assertEqual(self.limiter.open, 5)

    def test_descriptor_budget_never_exceeds_the_limit(self) -> None:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.assertLessEqual(descriptor_budget(10 ** 9), max(1, soft - 256))
        self.assertEqual(descriptor_budget(10), 10)

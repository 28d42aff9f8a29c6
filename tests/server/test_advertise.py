"""The advertised address (the kubernetes Service's endpoints): --advertise-address, else the bind
address, else for a wildcard bind the default-route interface's address."""
from __future__ import annotations

import ipaddress

from twisted.trial import unittest

from kapiserver.server.advertise import advertise_address, default_route_address


class AdvertiseAddressTests(unittest.TestCase):
    def test_configured_address_wins(self) -> None:
        self.assertEqual(advertise_address("192.0.2.10", "127.0.0.1"), "192.0.2.10")

    def test_a_specific_bind_address_is_advertised(self) -> None:
        self.assertEqual(advertise_address("", "127.0.0.2"), "127.0.0.2")
        self.assertEqual(advertise_address("", "::1"), "::1")

    def test_a_wildcard_bind_advertises_the_default_route_address(self) -> None:
        chosen = advertise_address("", "0.0.0.0")
        self.assertEqual(ipaddress.ip_address(chosen).version, 4)
        self.assertFalse(ipaddress.ip_address(chosen).is_unspecified)
        self.assertEqual(chosen, default_route_address(4) or "127.0.0.1")

"""Where a node's kubelet is reached (upstream's ``NodeConnectionInfoGetter.GetConnectionInfo``): the
first address of the most preferred type, the port the Node reports or the configured default, and
upstream's error, word for word, when no address fits; and which addresses ``nodes/proxy`` refuses."""
from __future__ import annotations

from twisted.internet import defer
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver
from twisted.trial import unittest
from zope.interface import implementer

from kapiserver.endpoints.streaming.kubelet import (KubeletClientConfig, KubeletEndpoint, kubelet_endpoint,
                                                    proxyable_host_problem)
from kapiserver.machinery import errors

ADDRESSES = [{"type": "ExternalIP", "address": "203.0.113.7"}, {"type": "InternalIP", "address": "10.200.0.2"},
             {"type": "InternalIP", "address": "10.200.0.3"}, {"type": "Hostname", "address": "node-a"}]


def node(addresses: list[dict], port: object = None) -> dict:
    status: dict = {"addresses": addresses}
    if port is not None:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"metadata": {"name": "node-a"}, "status": status}


class KubeletEndpointTests(unittest.TestCase):
    def test_kube_apiservers_default_order_prefers_the_hostname(self):
        # --kubelet-preferred-address-types' default: Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP
        self.assertEqual(kubelet_endpoint(node(ADDRESSES), KubeletClientConfig()), KubeletEndpoint("node-a", 10250))
        without_hostname = [a for a in ADDRESSES if a["type"] != "Hostname"]
        self.assertEqual(kubelet_endpoint(node(without_hostname), KubeletClientConfig()).host, "10.200.0.2")

    def test_the_configured_order_decides_and_the_first_address_of_a_type_wins(self):
        config = KubeletClientConfig(preferred_address_types=("InternalIP", "Hostname"))
        self.assertEqual(kubelet_endpoint(node(ADDRESSES), config).host, "10.200.0.2")
        config = KubeletClientConfig(preferred_address_types=("InternalDNS", "ExternalIP"))
        self.assertEqual(kubelet_endpoint(node(ADDRESSES), config).host, "203.0.113.7")

    def test_the_port_the_node_reports_or_the_configured_default(self):
        config = KubeletClientConfig(port=10333)
        self.assertEqual(kubelet_endpoint(node(ADDRESSES, port=12345), config).port, 12345)
        self.assertEqual(kubelet_endpoint(node(ADDRESSES), config).port, 10333)
        self.assertEqual(kubelet_endpoint(node(ADDRESSES, port=0), config).port, 10333)  # "not reported"

    def test_no_address_of_a_preferred_type_is_upstreams_error(self):
        config = KubeletClientConfig(preferred_address_types=("InternalDNS",))
        with self.assertRaises(errors.StatusError) as raised:
            kubelet_endpoint(node(ADDRESSES[:2]), config)
        # Go's %v of a []NodeAddress: each struct as {Type Address}, space-separated
        self.assertEqual((raised.exception.code, raised.exception.reason, raised.exception.message),
                         (500, "", "no preferred addresses found; known addresses: "
                                   "[{ExternalIP 203.0.113.7} {InternalIP 10.200.0.2}]"))
        with self.assertRaises(errors.StatusError) as raised:
            kubelet_endpoint({"metadata": {"name": "bare"}}, config)
        self.assertEqual(raised.exception.message, "no preferred addresses found; known addresses: []")


@implementer(IHostnameResolver)
class Resolver:
    """Names resolved from a table, as the reactor's resolver reports them."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def resolveHostName(self, resolutionReceiver, hostName, portNumber=0, addressTypes=None,
                        transportSemantics="TCP"):
        self.asked.append(hostName)
        resolutionReceiver.resolutionBegan(None)
        for host in self.table.get(hostName, []):
            address = IPv6Address("TCP", host, 0) if ":" in host else IPv4Address("TCP", host, 0)
            resolutionReceiver.addressResolved(address)
        resolutionReceiver.resolutionComplete()
        return resolutionReceiver


class ProxyableHostTests(unittest.TestCase):
    """upstream's isProxyableHostname for nodes/proxy: every address must be global unicast."""

    def problem(self, host: str, resolver: Resolver | None = None) -> str | None:
        result = defer.Deferred.fromCoroutine(proxyable_host_problem(resolver or Resolver({}), host))
        return self.successResultOf(result)

    def test_addresses_that_are_refused(self):
        for host in ("127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "::", "169.254.169.254", "fe80::1", "224.0.0.1",
                     "239.1.2.3", "ff02::1", "255.255.255.255", "::ffff:127.0.0.1"):
            self.assertEqual(self.problem(host), "address not allowed", host)

    def test_addresses_that_are_proxied_to(self):
        for host in ("10.200.0.2", "192.168.1.10", "172.16.0.1", "203.0.113.7", "2001:db8::1", "fd00::5"):
            self.assertIsNone(self.problem(host), host)

    def test_a_name_is_judged_by_every_address_it_resolves_to(self):
        resolver = Resolver({"node-a": ["10.200.0.2", "2001:db8::2"], "sneaky": ["10.200.0.3", "127.0.0.1"]})
        self.assertIsNone(self.problem("node-a", resolver))
        self.assertEqual(self.problem("sneaky", resolver), "address not allowed")
        self.assertEqual(self.problem("nowhere", resolver), "lookup nowhere: no such host")
        self.assertEqual(resolver.asked, ["node-a", "sneaky", "nowhere"])
        self.assertIsNone(self.problem("10.200.0.2", resolver))  # an address is not looked up
        self.assertEqual(resolver.asked, ["node-a", "sneaky", "nowhere"])

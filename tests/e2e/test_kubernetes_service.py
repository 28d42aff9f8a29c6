"""The ``kubernetes`` Service of a real kapiserver process (SQLite): what kubectl shows, and a
client finding the API server the way in-cluster code does (Service → Endpoints → connect)."""
from __future__ import annotations

import copy

from twisted.trial import unittest

from kapiserver.testing import TEST_ADVERTISE_ADDRESS
from kapiserver.testing.process import E2E_CONFIG, shared_server


class KubernetesServiceTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.port = int(self.server.server_url.rsplit(":", 1)[1])

    def test_kubectl_shows_the_service_and_its_endpoints(self):
        rows = [line.split() for line in self.server.kubectl("get", "svc", "kubernetes", "-n", "default")
                .stdout.splitlines()]
        self.assertEqual(rows[0], ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"])
        self.assertEqual(rows[1][:5], ["kubernetes", "ClusterIP", "10.0.0.1", "<none>", "443/TCP"])
        target = self.server.kubectl("get", "svc", "kubernetes", "-n", "default", "-o",
                                     "jsonpath={.spec.ports[0].name} {.spec.ports[0].targetPort}").stdout
        self.assertEqual(target, f"https {self.port}")
        rows = [line.split() for line in self.server.kubectl("get", "endpoints", "kubernetes", "-n", "default")
                .stdout.splitlines()]
        self.assertEqual(rows[1][:2], ["kubernetes", f"{TEST_ADVERTISE_ADDRESS}:{self.port}"])
        rows = [line.split() for line in self.server.kubectl(
            "get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes").stdout.splitlines()]
        self.assertEqual(rows[0], ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"])
        self.assertEqual(rows[1][:4], ["kubernetes", "IPv4", str(self.port), TEST_ADVERTISE_ADDRESS])

    def test_a_client_reaches_the_server_through_the_endpoints(self):
        from kubernetes import client
        api = self.server.python_client()
        core = client.CoreV1Api(api)
        svc = core.read_namespaced_service("kubernetes", "default")
        self.assertEqual((svc.spec.cluster_ip, svc.spec.type, svc.metadata.labels),
                         ("10.0.0.1", "ClusterIP", {"component": "apiserver", "provider": "kubernetes"}))
        https = svc.spec.ports[0]
        self.assertEqual((https.name, https.port, https.protocol, https.target_port), ("https", 443, "TCP", self.port))
        endpoints = core.read_namespaced_endpoints("kubernetes", "default")
        (subset,) = endpoints.subsets
        (address,) = subset.addresses
        (port,) = subset.ports
        self.assertEqual((port.name, port.port), ("https", https.target_port))
        slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
            "default", label_selector="kubernetes.io/service-name=kubernetes").items
        self.assertEqual([(s.metadata.name, s.address_type, [e.addresses for e in s.endpoints],
                           [p.port for p in s.ports]) for s in slices],
                         [("kubernetes", "IPv4", [[address.ip]], [port.port])])
        # connect to the port the endpoints name, as a pod would through the Service; the address is
        # a documentation one here (Endpoints refuse loopback addresses, as upstream's), so go by loopback
        self.assertEqual(address.ip, TEST_ADVERTISE_ADDRESS)
        configuration = copy.copy(api.configuration)
        configuration.host = f"https://127.0.0.1:{port.port}"
        with client.ApiClient(configuration) as direct:
            version = client.VersionApi(direct).get_code()
            self.assertEqual(version.major, "1")
            names = [n.metadata.name for n in client.CoreV1Api(direct).list_namespace().items]
            self.assertIn("default", names)

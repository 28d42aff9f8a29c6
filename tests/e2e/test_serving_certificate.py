"""The serving certificate of a started kapiserver, as a TLS client checks it: it must name the
``kubernetes`` Service (its cluster IP and DNS names: what a pod's client-go dials) as
kube-apiserver's does, the advertise and bind addresses, and ``tls.extra_sans``."""
from __future__ import annotations

import os
import socket
import ssl
from urllib.parse import urlsplit

from twisted.trial import unittest

from kapiserver.testing import TEST_ADVERTISE_ADDRESS
from kapiserver.testing.process import ServerProcess

EXTRA = "api.example.test"


class ServingCertificateTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = ServerProcess(extra_config={"service_cluster_ip_range": "10.0.0.0/24",
                                                  "tls": {"extra_sans": [EXTRA]}}).start()
        self.addCleanup(self.server.stop)
        url = urlsplit(self.server.server_url)
        self.address = (url.hostname, url.port)

    def handshake(self, server_hostname: str) -> dict:
        """A TLS handshake with the server (on loopback) as a client that dialled ``server_hostname``
        and trusts the cluster CA; ssl checks the chain and that the certificate names it."""
        context = ssl.create_default_context(cafile=os.path.join(self.server.workdir, "certs", "ca.crt"))
        with socket.create_connection(self.address, timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=server_hostname) as tls:
                return tls.getpeercert()

    def test_the_kubernetes_service_and_the_servers_addresses_are_named(self) -> None:
        for name in ("10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                     "kubernetes.default.svc.cluster.local", "localhost", "127.0.0.1", TEST_ADVERTISE_ADDRESS, EXTRA):
            self.assertTrue(self.handshake(name)["subjectAltName"], name)

    def test_other_names_are_refused(self) -> None:
        for name in ("10.0.0.2", "kubernetes.default.svc.example", "example.test"):
            with self.assertRaises(ssl.SSLCertVerificationError, msg=name) as caught:
                self.handshake(name)
            self.assertIn("Hostname mismatch" if not name[0].isdigit() else "IP address mismatch",
                          caught.exception.verify_message)

"""The admin kubeconfig: embedded credentials, 0600, rewritten when the port changes."""
from __future__ import annotations

import base64
import os
import stat

import yaml
from twisted.trial import unittest

from kapiserver.server.certs import ensure_certificates
from kapiserver.server.kubeconfig import server_url, write_admin_kubeconfig


class KubeconfigTests(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        self.bundle = ensure_certificates(os.path.join(self.dir, "certs"))
        self.path = os.path.join(self.dir, "admin.kubeconfig")

    def read(self) -> dict:
        with open(self.path) as f:
            return yaml.safe_load(f)

    def test_content(self) -> None:
        self.assertTrue(write_admin_kubeconfig(self.path, self.bundle, "127.0.0.1", 6443))
        doc = self.read()
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        cluster = doc["clusters"][0]["cluster"]
        self.assertEqual(cluster["server"], "https://127.0.0.1:6443")
        self.assertEqual(base64.b64decode(cluster["certificate-authority-data"]), self.bundle.ca_cert_pem)
        user = doc["users"][0]["user"]
        self.assertEqual(base64.b64decode(user["client-certificate-data"]), self.bundle.admin_cert_pem)
        self.assertEqual(base64.b64decode(user["client-key-data"]), self.bundle.admin_key_pem)
        context = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
        self.assertEqual(context, {"cluster": doc["clusters"][0]["name"], "user": doc["users"][0]["name"]})

    def test_rewritten_only_when_port_changes(self) -> None:
        write_admin_kubeconfig(self.path, self.bundle, "127.0.0.1", 0)
        self.assertTrue(write_admin_kubeconfig(self.path, self.bundle, "127.0.0.1", 41234))
        self.assertEqual(self.read()["clusters"][0]["cluster"]["server"], "https://127.0.0.1:41234")
        self.assertFalse(write_admin_kubeconfig(self.path, self.bundle, "127.0.0.1", 41234))

    def test_server_url_forms(self) -> None:
        self.assertEqual(server_url("::1", 6443), "https://[::1]:6443")
        self.assertEqual(server_url("0.0.0.0", 6443), "https://127.0.0.1:6443")
        self.assertEqual(server_url("::", 6443), "https://[::1]:6443")

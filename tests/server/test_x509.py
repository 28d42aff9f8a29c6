"""Client certificates name users: CN is the user, O the groups."""
from __future__ import annotations

import os

from cryptography import x509
from twisted.trial import unittest

from kapiserver.machinery.user import ANONYMOUS
from kapiserver.auth.x509 import user_from_certificate
from kapiserver.server.certs import ensure_certificates, issue_client_certificate


class X509Tests(unittest.TestCase):
    def test_admin_certificate_is_cluster_admin(self) -> None:
        bundle = ensure_certificates(os.path.abspath(self.mktemp()))
        user = user_from_certificate(x509.load_pem_x509_certificate(bundle.admin_cert_pem))
        self.assertEqual(user.name, "kapiserver-admin")
        self.assertEqual(user.groups, ("system:masters", "system:authenticated"))

    def test_groups_in_order(self) -> None:
        cert_dir = os.path.abspath(self.mktemp())
        ensure_certificates(cert_dir)
        pem, _ = issue_client_certificate(cert_dir, "jane", ["dev", "ops"])
        user = user_from_certificate(x509.load_pem_x509_certificate(pem))
        self.assertEqual((user.name, user.groups), ("jane", ("dev", "ops", "system:authenticated")))

    def test_anonymous(self) -> None:
        self.assertEqual((ANONYMOUS.name, ANONYMOUS.groups), ("system:anonymous", ("system:unauthenticated",)))

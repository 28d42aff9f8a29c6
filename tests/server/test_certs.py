"""Certificates: generated on first start, reused after, the serving one re-issued when SANs change."""
from __future__ import annotations

import ipaddress
import os
import stat

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from twisted.trial import unittest

from kapiserver.server.certs import CertificateError, ensure_certificates


def _load(path: str) -> x509.Certificate:
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read())


def _sans(cert: x509.Certificate) -> tuple[set, set]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(ext.get_values_for_type(x509.DNSName)), {str(i) for i in ext.get_values_for_type(x509.IPAddress)}


class CertificateTests(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())

    def test_first_start_creates_ca_serving_and_admin(self) -> None:
        bundle = ensure_certificates(self.dir, ["api.example.com", "10.0.0.7"])
        for name in ("ca.key", "apiserver.key", "admin.key"):
            mode = stat.S_IMODE(os.stat(os.path.join(self.dir, name)).st_mode)
            self.assertEqual(mode, 0o600, name)
        ca = _load(os.path.join(self.dir, "ca.crt"))
        serving = _load(os.path.join(self.dir, "apiserver.crt"))
        admin = _load(os.path.join(self.dir, "admin.crt"))
        serving.verify_directly_issued_by(ca)
        admin.verify_directly_issued_by(ca)
        dns, ips = _sans(serving)
        self.assertTrue({"localhost", "api.example.com"} <= dns)
        self.assertTrue({"127.0.0.1", "::1", "10.0.0.7"} <= ips)
        self.assertEqual(admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value, "kapiserver-admin")
        self.assertEqual(admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value, "system:masters")
        self.assertEqual(bundle.ca_cert_pem, open(os.path.join(self.dir, "ca.crt"), "rb").read())

    def test_restart_reuses_everything(self) -> None:
        first = ensure_certificates(self.dir, ["api.example.com"])
        second = ensure_certificates(self.dir, ["api.example.com"])
        self.assertEqual(first, second)

    def test_changed_sans_reissue_only_the_serving_certificate(self) -> None:
        first = ensure_certificates(self.dir, [])
        second = ensure_certificates(self.dir, ["new.example.com"])
        self.assertEqual(first.ca_cert_pem, second.ca_cert_pem)
        self.assertEqual(first.admin_cert_pem, second.admin_cert_pem)
        self.assertNotEqual(first.serving_cert_pem, second.serving_cert_pem)
        self.assertIn("new.example.com", _sans(x509.load_pem_x509_certificate(second.serving_cert_pem))[0])

    def test_new_ca_reissues_leaves(self) -> None:
        first = ensure_certificates(self.dir, [])
        os.remove(os.path.join(self.dir, "ca.crt"))
        os.remove(os.path.join(self.dir, "ca.key"))
        second = ensure_certificates(self.dir, [])
        x509.load_pem_x509_certificate(second.admin_cert_pem).verify_directly_issued_by(
            x509.load_pem_x509_certificate(second.ca_cert_pem))
        self.assertNotEqual(first.admin_cert_pem, second.admin_cert_pem)

    def test_garbage_certificate_is_one_line_error(self) -> None:
        ensure_certificates(self.dir, [])
        with open(os.path.join(self.dir, "apiserver.crt"), "w") as f:
            f.write("garbage")
        with self.assertRaises(CertificateError) as cm:
            ensure_certificates(self.dir, [])
        self.assertEqual(str(cm.exception), f"{self.dir}/apiserver.crt: not a PEM certificate")

    def test_mismatched_key_is_reported(self) -> None:
        ensure_certificates(self.dir, [])
        with open(os.path.join(self.dir, "admin.key"), "rb") as f:
            admin_key = f.read()
        with open(os.path.join(self.dir, "apiserver.key"), "wb") as f:
            f.write(admin_key)
        with self.assertRaises(CertificateError) as cm:
            ensure_certificates(self.dir, [])
        self.assertIn("apiserver.crt: certificate does not match its private key", str(cm.exception))

    def test_ip_sans_are_ip_entries(self) -> None:
        bundle = ensure_certificates(self.dir, ["192.168.1.5"])
        ext = x509.load_pem_x509_certificate(bundle.serving_cert_pem).extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
        self.assertIn(ipaddress.ip_address("192.168.1.5"), ext.get_values_for_type(x509.IPAddress))
        self.assertNotIn("192.168.1.5", ext.get_values_for_type(x509.DNSName))

    def test_front_proxy_and_service_account_key_beside_the_others(self) -> None:
        bundle = ensure_certificates(self.dir, [])
        for name in ("front-proxy-ca.key", "front-proxy-client.key", "sa.key"):
            mode = stat.S_IMODE(os.stat(os.path.join(self.dir, name)).st_mode)
            self.assertEqual(mode, 0o600, name)
        proxy_ca = _load(os.path.join(self.dir, "front-proxy-ca.crt"))
        client = _load(os.path.join(self.dir, "front-proxy-client.crt"))
        client.verify_directly_issued_by(proxy_ca)
        self.assertEqual(client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value, "front-proxy-client")
        self.assertNotEqual(proxy_ca.subject, _load(os.path.join(self.dir, "ca.crt")).subject)
        self.assertEqual(bundle.front_proxy_ca_pem, open(os.path.join(self.dir, "front-proxy-ca.crt"), "rb").read())
        with open(os.path.join(self.dir, "sa.key"), "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
        self.assertIsInstance(key, rsa.RSAPrivateKey)
        with open(os.path.join(self.dir, "sa.pub"), "rb") as f:
            self.assertEqual(serialization.load_pem_public_key(f.read()).public_numbers(),
                             key.public_key().public_numbers())
        # every token ever issued depends on the key: a restart keeps it
        with open(os.path.join(self.dir, "sa.key"), "rb") as f:
            before = f.read()
        ensure_certificates(self.dir, [])
        with open(os.path.join(self.dir, "sa.key"), "rb") as f:
            self.assertEqual(f.read(), before)

    def test_operator_named_files_are_not_generated(self) -> None:
        ensure_certificates(self.dir, [], front_proxy=False, front_proxy_client=False, service_account_key=False)
        for name in ("front-proxy-ca.crt", "front-proxy-client.crt", "sa.key"):
            self.assertFalse(os.path.exists(os.path.join(self.dir, name)), name)

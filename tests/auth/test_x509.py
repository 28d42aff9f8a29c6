"""Reading a PEM bundle of CA certificates with OpenSSL, as strictly as cryptography's reader."""
from __future__ import annotations

import base64
import os

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from twisted.trial import unittest

from kapiserver.auth.x509 import load_pem_certificates
from kapiserver.server.certs import ensure_certificates


def _pem(der: bytes, label: str = "CERTIFICATE") -> bytes:
    body = base64.b64encode(der)
    lines = b"\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label.encode(), lines, label.encode())


class LoadPEMCertificatesTests(unittest.TestCase):
    def setUp(self) -> None:
        bundle = ensure_certificates(os.path.abspath(self.mktemp()), service_account_key=False)
        self.ca, self.admin = bundle.ca_cert_pem, bundle.admin_cert_pem
        self.ca_der = x509.load_pem_x509_certificate(self.ca).public_bytes(Encoding.DER)

    def test_every_certificate_in_order_other_blocks_skipped(self) -> None:
        bundle = b"a comment\n" + self.ca + b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n" + \
            _pem(x509.load_pem_x509_certificate(self.admin).public_bytes(Encoding.DER), "X509 CERTIFICATE")
        self.assertEqual([c.to_cryptography() for c in load_pem_certificates(bundle)],
                         [x509.load_pem_x509_certificate(self.ca), x509.load_pem_x509_certificate(self.admin)])

    def test_no_certificate_is_refused(self) -> None:
        for bundle in (b"", b"garbage", b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"):
            with self.assertRaises(ValueError) as cm:
                load_pem_certificates(bundle)
            self.assertEqual(str(cm.exception), "no PEM certificate found")

    def test_a_malformed_certificate_is_refused_as_cryptography_refuses_it(self) -> None:
        for bad, why in ((_pem(self.ca_der[:-1]), "certificate 2 is malformed"),
                         (_pem(b"not DER"), "certificate 2 is malformed"),
                         (self.ca.replace(b"\n-----END", b"!\n-----END"), "certificate 2 is malformed"),
                         (_pem(self.ca_der + b"\x00"), "certificate 2 is not in DER (or has trailing data)")):
            with self.assertRaises(ValueError) as cm:
                load_pem_certificates(self.admin + bad)
            self.assertEqual(str(cm.exception), why)
            self.assertRaises(ValueError, x509.load_pem_x509_certificates, self.admin + bad)

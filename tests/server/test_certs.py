"""Certificates: generated on first start, reused after, the serving one re-issued when SANs change;
its names as kube-apiserver's (the ``kubernetes`` Service's), an operator's certificate kept."""
from __future__ import annotations

import ipaddress
import json
import os
import stat
import time

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.trial import unittest

from kapiserver.server import certs
from kapiserver.server.certs import (SERVING_NAME, CertificateError, _cert_pem, _Checked, _Issuer, _key_pem, _make_ca,
                                     _make_leaf, ensure_certificates, serving_sans)
from kapiserver.server.config import Config, TLSConfig


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


def _verifies_for(bundle, name: str) -> bool:
    """Whether a TLS client trusting the cluster CA accepts the serving certificate for ``name``
    (cryptography's server verification: chain, validity, serverAuth, the name in the SANs)."""
    try:
        subject: verification.Subject = verification.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        subject = verification.DNSName(name)
    verifier = (verification.PolicyBuilder()
                .store(verification.Store([x509.load_pem_x509_certificate(bundle.ca_cert_pem)]))
                .build_server_verifier(subject))
    try:
        verifier.verify(x509.load_pem_x509_certificate(bundle.serving_cert_pem), [])
        return True
    except verification.VerificationError:
        return False


class CheckedRecordTests(unittest.TestCase):
    """``.checked.json``: a restart reuses the files an earlier start checked without parsing
    them again; any other bytes are checked in full."""

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        self.first = ensure_certificates(self.dir, ["api.example.com"])
        self.parsed: list[str] = []
        load_cert = certs._load_cert

        def counting(path: str, data: bytes) -> x509.Certificate:
            self.parsed.append(os.path.basename(path))
            return load_cert(path, data)
        self.patch(certs, "_load_cert", counting)

    def test_a_restart_parses_nothing_an_earlier_start_checked(self) -> None:
        self.assertEqual(ensure_certificates(self.dir, ["api.example.com"]), self.first)
        self.assertEqual(self.parsed, [])

    def test_a_replaced_certificate_is_checked_again(self) -> None:
        with open(os.path.join(self.dir, "admin.crt"), "rb") as f:
            admin = f.read()
        with open(os.path.join(self.dir, "apiserver.crt"), "wb") as f:
            f.write(admin)
        with self.assertRaises(CertificateError) as cm:
            ensure_certificates(self.dir, ["api.example.com"])
        self.assertEqual(str(cm.exception), f"{self.dir}/apiserver.crt: certificate does not match its private key")

    def test_other_names_are_checked_again(self) -> None:
        second = ensure_certificates(self.dir, ["other.example.com"])
        self.assertIn("apiserver.crt", self.parsed)
        self.assertIn("other.example.com", _sans(x509.load_pem_x509_certificate(second.serving_cert_pem))[0])

    def test_a_certificate_near_its_renewal_time_is_checked_again(self) -> None:
        path = os.path.join(self.dir, ".checked.json")
        with open(path) as f:
            record = json.load(f)
        self.assertTrue(all(until is None or until > time.time() for until in record.values()))
        with open(path, "w") as f:
            json.dump({digest: (until and 1.0) for digest, until in record.items()}, f)
        self.assertEqual(ensure_certificates(self.dir, ["api.example.com"]), self.first)  # still far from expiry
        self.assertLessEqual({"admin.crt", "apiserver.crt", "front-proxy-client.crt", "apiserver-kubelet-client.crt"},
                             set(self.parsed))
        with open(path) as f:
            self.assertEqual(json.load(f), record)  # checked again, recorded as before

    def test_the_service_account_key_is_recorded_once_checked(self) -> None:
        key_path = os.path.join(self.dir, "sa.key")
        with open(key_path, "rb") as f:
            pem = f.read()
        self.assertTrue(certs.checked_before(self.dir, certs.SIGNING_KEY_CHECK, pem))
        damaged = pem.replace(pem.splitlines()[3], pem.splitlines()[3][::-1])
        with open(key_path, "wb") as f:
            f.write(damaged)
        ensure_certificates(self.dir, ["api.example.com"])
        self.assertFalse(certs.checked_before(self.dir, certs.SIGNING_KEY_CHECK, damaged))  # refused at start

    def test_a_directory_that_cannot_take_the_record_still_starts(self) -> None:
        record = os.path.join(self.dir, ".checked.json")
        os.remove(record)

        def read_only(path: str, data: bytes, private: bool) -> None:
            raise PermissionError(13, "Permission denied", path)
        self.patch(certs, "_write", read_only)  # (as an operator's read-only directory; root may write anyway)
        self.assertEqual(ensure_certificates(self.dir, ["api.example.com"]), self.first)
        self.assertFalse(os.path.exists(record))

    def test_an_unreadable_record_checks_everything(self) -> None:
        with open(os.path.join(self.dir, ".checked.json"), "w") as f:
            f.write("{not json")
        self.assertEqual(ensure_certificates(self.dir, ["api.example.com"]), self.first)
        self.assertIn("ca.crt", self.parsed)
        self.parsed.clear()
        ensure_certificates(self.dir, ["api.example.com"])
        self.assertEqual(self.parsed, [])


class ServingNamesTests(unittest.TestCase):
    """The serving certificate names what kube-apiserver's self-signed one names."""

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())

    def config(self, **settings) -> Config:
        return Config(cert_dir=self.dir, **settings, tls=TLSConfig(extra_sans=["api.example.test"]))

    def test_names_of_the_kubernetes_service_and_the_addresses(self) -> None:
        sans = serving_sans(self.config(bind_address="127.0.0.2", advertise_address="192.0.2.10",
                                        service_cluster_ip_range="10.96.0.0/12"))
        self.assertEqual(sans, ["192.0.2.10", "10.96.0.1", "127.0.0.2", "api.example.test"])
        bundle = ensure_certificates(self.dir, sans)
        for name in ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                     "kubernetes.default.svc.cluster.local", "localhost", "127.0.0.1", "10.96.0.1", "192.0.2.10",
                     "127.0.0.2", "api.example.test"):
            self.assertTrue(_verifies_for(bundle, name), name)
        for name in ("10.96.0.2", "kubernetes.default.svc.example", "example.test"):
            self.assertFalse(_verifies_for(bundle, name), name)
        # an unspecified bind address is not a name (localhost is, always)
        self.assertEqual(serving_sans(self.config(bind_address="0.0.0.0", advertise_address="192.0.2.10")),
                         ["192.0.2.10", "10.0.0.1", "api.example.test"])

    def test_a_certificate_an_earlier_kapiserver_issued_gets_the_names(self) -> None:
        first = ensure_certificates(self.dir, [])
        # what kapiserver issued before it named the Service: loopback and three Service names
        issuer = _Issuer(self.dir, _Checked(self.dir))
        old_sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
                    x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default"),
                    x509.DNSName("kubernetes.default.svc")]
        cert, key = _make_leaf(issuer.ca_cert, issuer.ca_key, x509.Name([x509.NameAttribute(
            NameOID.COMMON_NAME, SERVING_NAME)]), ExtendedKeyUsageOID.SERVER_AUTH, old_sans)
        with open(os.path.join(self.dir, "apiserver.crt"), "wb") as f:
            f.write(_cert_pem(cert))
        with open(os.path.join(self.dir, "apiserver.key"), "wb") as f:
            f.write(_key_pem(key))
        self.assertFalse(_verifies_for(ensure_certificates(self.dir, []), "10.0.0.1"))  # no IP asked for yet
        renewed = ensure_certificates(self.dir, ["10.0.0.1"])
        self.assertNotEqual(renewed.serving_cert_pem, _cert_pem(cert))
        self.assertEqual(renewed.ca_cert_pem, first.ca_cert_pem)
        for name in ("10.0.0.1", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"):
            self.assertTrue(_verifies_for(renewed, name), name)

    def test_an_operators_certificate_is_used_as_it_is(self) -> None:
        ensure_certificates(self.dir, [])
        # one issued by the operator's own CA, and one from the cluster CA with the operator's subject
        own_ca, own_key = _make_ca("operator-ca")
        operators = [_make_leaf(own_ca, own_key, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kapiserver")]),
                                ExtendedKeyUsageOID.SERVER_AUTH, [x509.DNSName("api.example.test")])]
        issuer = _Issuer(self.dir, _Checked(self.dir))
        operators.append(_make_leaf(issuer.ca_cert, issuer.ca_key,
                                    x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "api.example.test")]),
                                    ExtendedKeyUsageOID.SERVER_AUTH, [x509.DNSName("api.example.test")]))
        for cert, key in operators:
            with open(os.path.join(self.dir, "apiserver.crt"), "wb") as f:
                f.write(_cert_pem(cert))
            with open(os.path.join(self.dir, "apiserver.key"), "wb") as f:
                f.write(_key_pem(key))
            bundle = ensure_certificates(self.dir, ["10.0.0.1"])
            self.assertEqual((bundle.serving_cert_pem, bundle.serving_key_pem), (_cert_pem(cert), _key_pem(key)))
            with open(os.path.join(self.dir, "apiserver.crt"), "rb") as f:
                self.assertEqual(f.read(), _cert_pem(cert))

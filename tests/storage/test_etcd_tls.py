"""The etcd backend over mutual TLS, with certificates made by the test."""
from __future__ import annotations

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.trial import unittest

from kapiserver.storage.etcd import EtcdStorage, EtcdTLS
from kapiserver.storage.interface import UnavailableError
from tests.storage.contract import Recorder, until
from kapiserver.testing.etcd import EtcdServer, skip_reason


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key, issuer_name, issuer_key, ca: bool = False, server: bool = False):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
         .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        # etcd's built-in gateway dials its own gRPC server with the serving
        # certificate, so under --client-cert-auth that one needs clientAuth too.
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _write(path: str, *objs) -> str:
    with open(path, "wb") as f:
        for o in objs:
            if isinstance(o, x509.Certificate):
                f.write(o.public_bytes(serialization.Encoding.PEM))
            else:
                f.write(o.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    return path


class EtcdTLSTests(unittest.TestCase):
    skip = skip_reason()

    def setUp(self) -> None:
        d = self.mktemp()
        os.makedirs(d)
        ca_key, srv_key, cli_key, other_key = _key(), _key(), _key(), _key()
        ca = _cert("test-ca", ca_key, None, ca_key, ca=True)
        other_ca = _cert("other-ca", other_key, None, other_key, ca=True)
        self.ca = _write(os.path.join(d, "ca.pem"), ca)
        self.other_ca = _write(os.path.join(d, "other-ca.pem"), other_ca)
        srv = _write(os.path.join(d, "server.pem"), _cert("etcd", srv_key, ca.subject, ca_key, server=True))
        srv_key_path = _write(os.path.join(d, "server-key.pem"), srv_key)
        self.cert = _write(os.path.join(d, "client.pem"), _cert("kapiserver", cli_key, ca.subject, ca_key))
        self.key = _write(os.path.join(d, "client-key.pem"), cli_key)
        self.etcd = EtcdServer(["--cert-file", srv, "--key-file", srv_key_path, "--trusted-ca-file", self.ca,
                                "--client-cert-auth"], scheme="https").start()
        self.addCleanup(self.etcd.cleanup)

    async def open(self, tls: EtcdTLS) -> EtcdStorage:
        store = EtcdStorage([self.etcd.endpoint], tls=tls, request_timeout=3.0)
        self.addCleanup(store.stop)
        await store.start()
        return store

    async def test_mutual_tls_reads_writes_and_watches(self):
        store = await self.open(EtcdTLS(ca_file=self.ca, cert_file=self.cert, key_file=self.key))
        rec = Recorder()
        w = store.watch("/tls/", await store.current_revision(), rec.on_event, rec.on_error)
        self.addCleanup(w.cancel)
        kv = await store.create("/tls/a", b"secret")
        self.assertEqual((await store.get("/tls/a")).value, b"secret")
        await until(lambda: len(rec.events) == 1, what="watch event over TLS")
        self.assertEqual(rec.events[0].revision, kv.mod_revision)

    async def test_without_client_certificate_etcd_refuses(self):
        store = EtcdStorage([self.etcd.endpoint], tls=EtcdTLS(ca_file=self.ca), request_timeout=3.0)
        self.addCleanup(store.stop)
        with self.assertRaises(UnavailableError):
            await store.start()

    async def test_server_not_signed_by_trusted_ca_is_rejected(self):
        store = EtcdStorage([self.etcd.endpoint], request_timeout=3.0,
                            tls=EtcdTLS(ca_file=self.other_ca, cert_file=self.cert, key_file=self.key))
        self.addCleanup(store.stop)
        with self.assertRaises(UnavailableError):
            await store.start()

"""TLS settings for talking to etcd: verify it against a CA, present a client certificate.

etcd clusters in production require mutual TLS (``--client-cert-auth``); this
turns the three PEM files kube-apiserver's ``--etcd-cafile/--etcd-certfile/
--etcd-keyfile`` name into the TLS policy of every https connection to etcd.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from twisted.internet import ssl
from twisted.web.client import IPolicyForHTTPS
from zope.interface import implementer


@dataclass(frozen=True)
class EtcdTLS:
    """PEM file paths; ``server_name`` overrides the host name checked in etcd's certificate."""

    ca_file: Optional[str] = None
    cert_file: Optional[str] = None
    key_file: Optional[str] = None
    server_name: Optional[str] = None

    def policy(self) -> IPolicyForHTTPS:
        """The connection policy for twisted.web's Agent (loads the files now, so errors show early)."""
        trust = None
        if self.ca_file:
            with open(self.ca_file, "rb") as f:
                trust = ssl.trustRootFromCertificates(
                    [ssl.Certificate.loadPEM(pem) for pem in _split_pem(f.read())])
        client_cert = None
        if self.cert_file:
            with open(self.cert_file, "rb") as f:
                cert_pem = f.read()
            with open(self.key_file or self.cert_file, "rb") as f:
                key_pem = f.read()
            client_cert = ssl.PrivateCertificate.loadPEM(cert_pem + b"\n" + key_pem)
        return _EtcdPolicy(trust, client_cert, self.server_name)


def _split_pem(data: bytes) -> list[bytes]:
    end = b"-----END CERTIFICATE-----"
    return [part + end for part in data.split(end) if b"-----BEGIN CERTIFICATE-----" in part]


@implementer(IPolicyForHTTPS)
class _EtcdPolicy:
    def __init__(self, trust, client_cert, server_name: Optional[str]):
        self._trust = trust
        self._client_cert = client_cert
        self._server_name = server_name

    def creatorForNetloc(self, hostname: bytes, port: int):
        name = self._server_name or hostname.decode("ascii")
        kwargs = {}
        if self._trust is not None:
            kwargs["trustRoot"] = self._trust
        if self._client_cert is not None:
            kwargs["clientCertificate"] = self._client_cert
        return ssl.optionsForClientTLS(name, **kwargs)

"""Client certificates: the verified TLS peer certificate names the user.

The TLS listener (kapiserver.server.certs) asks for, but does not require, a
client certificate, and the handshake fails for one that chains to none of
the CAs it trusts: the client CA bundle and the front-proxy CA.  Which of the
two a certificate chains to decides what it may do, so each authenticator
checks the chain again against its own bundle (:class:`CABundle`), as
upstream's x509 and request-header authenticators verify against their own
pools.  For the client CA, the Common Name is the user name, the
Organizations the groups.
"""
from __future__ import annotations

import base64
import hashlib
import re
import weakref
from typing import Any, Optional

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import SSL, crypto
from twisted.internet.interfaces import ISSLTransport, ISystemHandle
from twisted.web._http2 import H2Stream
from twisted.web.server import Request

from kapiserver.machinery.user import AUTHENTICATED_GROUP, CREDENTIAL_ID_KEY, UserInfo

_ANY_EKU = x509.ObjectIdentifier("2.5.29.37.0")
_PEM_CERTIFICATE = re.compile(rb"-----BEGIN ((?:X509 )?)CERTIFICATE-----(.*?)-----END \1CERTIFICATE-----", re.S)


def load_pem_certificates(pem: bytes) -> list[crypto.X509]:
    """The certificates of a PEM bundle, read by OpenSSL; ValueError when there is none or a
    certificate block is not one certificate in DER (as cryptography's and Go's parsers insist).

    What a start reads is read with OpenSSL, whose parser TLS has paged in anyway:
    cryptography's (``x509.load_pem_x509_certificates``) would keep another 0.7 MiB of code
    resident in every process from its first use (bench/README.md, idle RSS).
    """
    certificates: list[crypto.X509] = []
    for block in _PEM_CERTIFICATE.finditer(pem):
        try:
            der = base64.b64decode(b"".join(block.group(2).split()), validate=True)
            certificate = crypto.load_certificate(crypto.FILETYPE_ASN1, der)
        except (ValueError, crypto.Error):
            raise ValueError(f"certificate {len(certificates) + 1} is malformed") from None
        if crypto.dump_certificate(crypto.FILETYPE_ASN1, certificate) != der:
            raise ValueError(f"certificate {len(certificates) + 1} is not in DER (or has trailing data)")
        certificates.append(certificate)
    if not certificates:
        raise ValueError("no PEM certificate found")
    return certificates


# facts about each TLS connection's certificate (its chain first), worked out once per connection
# (HTTP/2 multiplexes many requests on one), by the connection's transport as the request holds
# it: the interface lookup that finds the TLS transport (~2 µs, and a request's authenticators ask
# four or five times) is made on the connection's first request only
_connections: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
# the facts of a connection without TLS (none)
_NO_TLS: dict = {}


def _connection_cache(request: Request) -> Optional[dict]:
    """The facts about the request's TLS connection (None without TLS)."""
    channel = request.channel
    # HTTP/2: the request's channel is a stream, without a transport; its connection holds it
    transport = channel._conn.transport if isinstance(channel, H2Stream) else request.transport
    if transport is None:
        return None
    cache = _connections.get(transport)
    if cache is None:
        tls = ISSLTransport(transport, None)
        cache = _connections[transport] = {"chain": _chain_of(tls)} if tls is not None else _NO_TLS
    return cache if cache is not _NO_TLS else None


def _chain_of(transport: ISSLTransport) -> list[x509.Certificate]:
    try:
        peer = transport.getPeerCertificate()
    except Exception:
        peer = None
    if not isinstance(peer, crypto.X509):
        return []
    leaf = peer.to_cryptography()
    chain = [leaf]
    handle = ISystemHandle(transport, None)
    connection = handle.getHandle() if handle is not None else None
    sent = connection.get_peer_cert_chain() if isinstance(connection, SSL.Connection) else None
    # (a server sees the client's intermediates here, with or without the leaf)
    chain.extend(c.to_cryptography() for c in sent or () if c.to_cryptography() != leaf)
    return chain


def peer_chain(request: Request) -> list[x509.Certificate]:
    """The client's certificate chain, leaf first; empty without TLS or a client certificate."""
    cache = _connection_cache(request)
    return cache["chain"] if cache is not None else []


def describe(cert: x509.Certificate) -> str:
    """``#<serial> S:[CN] I:[issuer CN]`` style one-liner for logs and review errors."""
    def cn(name: x509.Name) -> str:
        values = name.get_attributes_for_oid(NameOID.COMMON_NAME)
        return str(values[0].value) if values else ""
    return f'#{cert.serial_number} S:["{cn(cert.subject)}"] I:["{cn(cert.issuer)}"]'


class CABundle:
    """A PEM bundle of CA certificates that client certificates are checked against
    (ValueError when it holds none, or a malformed one)."""

    def __init__(self, pem: bytes, source: str = "") -> None:
        self.pem = pem
        self.source = source
        self.certificates = load_pem_certificates(pem)
        self._store = crypto.X509Store()
        for cert in self.certificates:
            try:
                self._store.add_cert(cert)
            except crypto.Error:  # listed twice
                pass

    def verify(self, request: Any, chain: list[x509.Certificate]) -> str:
        """Why ``chain`` does not chain to this bundle for client authentication ("" if it does)."""
        cache = _connection_cache(request)
        if cache is None:
            return self.check(chain)
        key = ("verified", id(self))
        if key not in cache:
            cache[key] = self.check(chain)
        return cache[key]

    def check(self, chain: list[x509.Certificate]) -> str:
        leaf = crypto.X509.from_cryptography(chain[0])
        intermediates = [crypto.X509.from_cryptography(c) for c in chain[1:]]
        try:
            crypto.X509StoreContext(self._store, leaf, chain=intermediates).verify_certificate()
        except crypto.X509StoreContextError as e:
            return f"x509: {e.args[0] if e.args else e}"
        try:
            usages = chain[0].extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            return ""
        if ExtendedKeyUsageOID.CLIENT_AUTH not in usages and _ANY_EKU not in usages:
            return "x509: certificate specifies an incompatible key usage"
        return ""


def common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def user_from_certificate(cert: x509.Certificate) -> Optional[UserInfo]:
    """Map a certificate's subject to a user (CN = name, O = groups), with upstream's
    credential ID (``X509SHA256=<hex>``) as an extra."""
    name = common_name(cert)
    if not name:
        return None
    groups = [str(o.value) for o in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if AUTHENTICATED_GROUP not in groups:
        groups.append(AUTHENTICATED_GROUP)
    fingerprint = hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()
    return UserInfo(name=name, groups=tuple(groups), extra={CREDENTIAL_ID_KEY: (f"X509SHA256={fingerprint}",)})


def certificate_user(request: Request, chain: list[x509.Certificate]) -> Optional[UserInfo]:
    """:func:`user_from_certificate` of the connection's leaf, worked out once per connection."""
    cache = _connection_cache(request)
    if cache is None:
        return user_from_certificate(chain[0])
    if "user" not in cache:
        cache["user"] = user_from_certificate(chain[0])
    return cache["user"]


def authenticate_client_certificate(request: Request) -> Optional[UserInfo]:
    """The user named by the request's TLS client certificate, or None if it sent none
    (the chain is trusted as the handshake verified it)."""
    chain = peer_chain(request)
    return certificate_user(request, chain) if chain else None


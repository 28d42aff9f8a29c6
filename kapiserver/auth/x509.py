"""Client-certificate authentication: the verified TLS peer certificate names the user.

The TLS listener (kapiserver.server.certs) asks for, but does not require, a
client certificate and verifies any certificate offered against the cluster
CA during the handshake, so a certificate seen here is already trusted:
its Common Name is the user name and its Organizations are the groups.
"""
from __future__ import annotations

from typing import Any, Optional

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.internet.interfaces import ISSLTransport

from kapiserver.auth.user import AUTHENTICATED_GROUP, UserInfo

_CACHE_ATTR = "_kapiserver_x509_user"


def _tls_transport(request: Any) -> Any:
    """Find the TLS transport under an HTTP/1.1 request or an HTTP/2 stream."""
    channel = getattr(request, "channel", None)
    candidates = (
        getattr(request, "transport", None),
        getattr(channel, "transport", None),
        # HTTP/2: the request's channel is an H2Stream; its connection holds the transport.
        getattr(getattr(channel, "_conn", None), "transport", None),
    )
    for candidate in candidates:
        if candidate is not None and ISSLTransport.providedBy(candidate):
            return candidate
    return None


def user_from_certificate(cert: x509.Certificate) -> Optional[UserInfo]:
    """Map a certificate's subject to a user (CN = name, O = groups)."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or not names[0].value:
        return None
    groups = [str(o.value) for o in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if AUTHENTICATED_GROUP not in groups:
        groups.append(AUTHENTICATED_GROUP)
    return UserInfo(name=str(names[0].value), groups=tuple(groups))


def authenticate_client_certificate(request: Any) -> Optional[UserInfo]:
    """The user named by the request's TLS client certificate, or None if it sent none.

    The result is cached on the connection, so the certificate is parsed once
    per connection rather than once per request (HTTP/2 multiplexes many).
    """
    transport = _tls_transport(request)
    if transport is None:
        return None
    cached = getattr(transport, _CACHE_ATTR, False)
    if cached is not False:
        return cached
    user = None
    try:
        peer = transport.getPeerCertificate()
    except Exception:
        peer = None
    if peer is not None:
        user = user_from_certificate(peer.to_cryptography())
    try:
        setattr(transport, _CACHE_ATTR, user)
    except AttributeError:
        pass
    return user

"""Front-proxy (request-header) authentication: a trusted proxy names the user in headers.

An aggregating API server (or another authenticating proxy) that already
knows the user forwards the request with ``X-Remote-User``,
``X-Remote-Group`` (repeated) and ``X-Remote-Extra-<key>`` headers.  They are
believed only when the connection's client certificate chains to the
request-header CA (not the client CA) and, if ``allowed_names`` is set, has
one of those Common Names; otherwise this authenticator does not recognise
the request and the headers mean nothing (the certificate's own user, if it
is a client certificate, is who the request is from).  The headers are
removed once used, as upstream does.
"""
from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import unquote

from kapiserver.auth import x509
from kapiserver.auth.authenticator import AuthenticationError, AuthResult, Outcome
from kapiserver.machinery.user import UserInfo


class RequestHeaderAuthenticator:
    def __init__(self, ca: x509.CABundle, allowed_names: Sequence[str], username_headers: Sequence[str],
                 group_headers: Sequence[str], extra_headers_prefix: Sequence[str]) -> None:
        self.ca = ca
        self.allowed_names = tuple(allowed_names)
        self.username_headers = tuple(h.lower().encode("latin-1") for h in username_headers)
        self.group_headers = tuple(h.lower().encode("latin-1") for h in group_headers)
        self.extra_prefixes = tuple(p.lower().encode("latin-1") for p in extra_headers_prefix)

    def authenticate(self, request: Any) -> Outcome:
        headers = request.requestHeaders
        user = ""
        for header in self.username_headers:
            values = headers.getRawHeaders(header)
            if values and values[0]:
                user = _text(values[0])
                break
        # Without a user header this cannot recognise the request, whoever signed its
        # certificate, so it says nothing: checking the certificate first (as upstream's
        # wrapper does) made every client-certificate request raise, and keep its stack
        # alive in the garbage until a collection, only for the error to be dropped.
        if not user:
            chain = x509.peer_chain(request)
            if chain and x509.certificate_user(request, chain) is None:
                # ... but a certificate naming no one (no Common Name) has no success of the client
                # certificate to drop that error: it stands, and the request is a 401, not anonymous
                self._verify(request, chain)
            return None
        chain = x509.peer_chain(request)
        if not chain:
            return None
        problem = self.ca.verify(request, chain)
        if problem:
            raise AuthenticationError(problem)
        if self.allowed_names:
            name = x509.common_name(chain[0])
            if name not in self.allowed_names:
                raise AuthenticationError(f"x509: subject with cn={name} is not in the allowed list")
        groups = [_text(v) for header in self.group_headers for v in headers.getRawHeaders(header) or () if v]
        extra: dict[str, list[str]] = {}
        for key, values in list(headers.getAllRawHeaders()):
            lowered = key.lower()
            for prefix in self.extra_prefixes:
                if lowered.startswith(prefix):
                    extra_key = unquote(lowered[len(prefix):].decode("latin-1"))
                    extra.setdefault(extra_key, []).extend(_text(v) for v in values)
        self._clear(headers)
        return AuthResult(UserInfo(name=user, groups=tuple(groups),
                                   extra={k: tuple(v) for k, v in extra.items()}))

    def _verify(self, request: Any, chain: list) -> None:
        """Upstream's x509 wrapper of the front-proxy authenticator, which checks every request's
        certificate before looking at the headers: from the request-header CA, an allowed name."""
        problem = self.ca.verify(request, chain)
        if problem:
            raise AuthenticationError(f"verifying certificate {x509.describe(chain[0])} failed: {problem}")
        if self.allowed_names and x509.common_name(chain[0]) not in self.allowed_names:
            raise AuthenticationError(f"x509: subject with cn={x509.common_name(chain[0])} is not in the "
                                      "allowed list")

    def _clear(self, headers: Any) -> None:
        for header in self.username_headers + self.group_headers:
            headers.removeHeader(header)
        for key, _ in list(headers.getAllRawHeaders()):
            if key.lower().startswith(self.extra_prefixes):
                headers.removeHeader(key)


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")

"""Bearer tokens: ``Authorization: Bearer <token>`` checked by every token authenticator in turn.

As upstream: a request with a bearer token that no token authenticator
recognises is a 401 ("invalid bearer token"), never anonymous.  A token is
presented to the API's audiences; authenticators that know nothing of
audiences (static tokens) are valid for exactly those
(:class:`AudienceAgnosticToken`, upstream's WrapAudienceAgnosticToken).
"""
from __future__ import annotations

import base64
import functools
import re
from typing import Any, Optional, Sequence

from kapiserver.auth.authenticator import (AuthenticationError, AuthResult, Outcome, TokenAuthenticator,
                                           first_recognised, then)

INVALID_TOKEN = "invalid bearer token"


_ASCII_SPACE = b"\t\n\v\f\r "
# the runes above ASCII for which Go's unicode.IsSpace is true, as UTF-8
_UNICODE_SPACES = tuple(c.encode() for c in "\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                        "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def trim_space(value: bytes) -> bytes:
    """Go's ``strings.TrimSpace`` of a header's bytes: ASCII white space and UTF-8-encoded Unicode
    white space at either end. A lone byte 0xA0 is no UTF-8, so it stays (Python's ``str.strip()``
    of the Latin-1 text would remove it, and ``<token>\xa0`` would authenticate as ``<token>``)."""
    while True:
        trimmed = value.strip(_ASCII_SPACE)
        for space in _UNICODE_SPACES:
            trimmed = trimmed.removeprefix(space).removesuffix(space)
        if trimmed == value:
            return value
        value = trimmed


def bearer_token(request: Any) -> str:
    """The token of an ``Authorization: Bearer`` header, or "" when there is none (upstream's
    bearertoken.Authenticator: the first header, trimmed, split on single spaces)."""
    header = request.requestHeaders.getRawHeaders(b"authorization")
    if not header:
        return ""
    parts = trim_space(header[0]).decode("latin-1").split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


class TokenUnion:
    """Each token authenticator in order; the first that recognises the token decides."""

    def __init__(self, authenticators: Sequence[TokenAuthenticator]) -> None:
        self.authenticators = tuple(authenticators)

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        return first_recognised([functools.partial(a.authenticate_token, token, audiences)
                                 for a in self.authenticators])


class AudienceAgnosticToken:
    """A token authenticator unaware of audiences, valid for the API's own (``implicit``) only."""

    def __init__(self, implicit: tuple[str, ...], delegate: TokenAuthenticator) -> None:
        self.implicit = implicit
        self.delegate = delegate

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        if not audiences:
            return self.delegate.authenticate_token(token, audiences)
        shared = tuple(a for a in self.implicit if a in audiences)
        if not shared:
            return None

        def scoped(result: Optional[AuthResult]) -> Optional[AuthResult]:
            return AuthResult(result.user, shared) if result is not None else None
        return then(self.delegate.authenticate_token(token, audiences), scoped)


class BearerTokenAuthenticator:
    """The request authenticator for bearer tokens, presented to the API's audiences."""

    def __init__(self, tokens: TokenAuthenticator, api_audiences: tuple[str, ...]) -> None:
        self.tokens = tokens
        self.api_audiences = api_audiences

    def authenticate(self, request: Any) -> Outcome:
        token = bearer_token(request)
        if not token:
            return None
        return then(self.tokens.authenticate_token(token, self.api_audiences), _recognised)


PROTOCOL_HEADER = b"sec-websocket-protocol"
BEARER_PROTOCOL_PREFIX = "base64url.bearer.authorization.k8s.io."
_RAW_URL_BASE64 = re.compile(r"[A-Za-z0-9_-]*")


def is_websocket_request(request: Any) -> bool:
    """wsstream.IsWebSocketRequest: ``Upgrade: websocket`` and a Connection header naming upgrade."""
    headers = request.requestHeaders
    upgrade = headers.getRawHeaders(b"upgrade")
    if not upgrade or upgrade[0].lower() != b"websocket":
        return False
    return any(b"upgrade" in value.lower() for value in headers.getRawHeaders(b"connection") or ())


class WebSocketProtocolAuthenticator:
    """A bearer token in a WebSocket subprotocol (browsers cannot set Authorization on a WebSocket):
    ``Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.<base64url token>, <protocol>``.
    Upstream's websocket.ProtocolAuthenticator: only for WebSocket upgrades, at most one such
    protocol and at least one other, and once the token is accepted the protocol carrying it is
    taken out of the header, so nothing after authentication sees or echoes it."""

    def __init__(self, tokens: TokenAuthenticator, api_audiences: tuple[str, ...]) -> None:
        self.tokens = tokens
        self.api_audiences = api_audiences

    def authenticate(self, request: Any) -> Outcome:
        if not is_websocket_request(request):
            return None
        headers = request.requestHeaders
        token = ""
        seen = False
        others: list[str] = []
        for value in headers.getRawHeaders(PROTOCOL_HEADER) or ():
            for protocol in value.decode("latin-1").split(","):
                protocol = trim_space(protocol.encode("latin-1")).decode("latin-1")
                if not protocol.startswith(BEARER_PROTOCOL_PREFIX):
                    others.append(protocol)
                    continue
                if seen:
                    raise AuthenticationError("multiple base64.bearer.authorization tokens specified")
                seen = True
                token = _raw_url_base64_text(protocol[len(BEARER_PROTOCOL_PREFIX):])
        if token and not others:
            raise AuthenticationError("missing additional subprotocol")
        if not token:
            return None

        def accepted(result: Optional[AuthResult]) -> AuthResult:
            result = _recognised(result)
            headers.setRawHeaders(PROTOCOL_HEADER, [",".join(others).encode("latin-1")])
            return result
        return then(self.tokens.authenticate_token(token, self.api_audiences), accepted)


def _raw_url_base64_text(encoded: str) -> str:
    """base64.RawURLEncoding (no padding), then UTF-8, with upstream's errors."""
    if _RAW_URL_BASE64.fullmatch(encoded) is None or len(encoded) % 4 == 1:
        raise AuthenticationError("invalid base64.bearer.authorization token encoding")
    raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError("invalid base64.bearer.authorization token") from None


def _recognised(result: Optional[AuthResult]) -> AuthResult:
    if result is None:
        raise AuthenticationError(INVALID_TOKEN)
    return result

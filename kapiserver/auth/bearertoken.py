"""Bearer tokens: ``Authorization: Bearer <token>`` checked by every token authenticator in turn.

As upstream: a request with a bearer token that no token authenticator
recognises is a 401 ("invalid bearer token"), never anonymous.  A token is
presented to the API's audiences; authenticators that know nothing of
audiences (static tokens) are valid for exactly those
(:class:`AudienceAgnosticToken`, upstream's WrapAudienceAgnosticToken).
"""
from __future__ import annotations

import functools
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


def _recognised(result: Optional[AuthResult]) -> AuthResult:
    if result is None:
        raise AuthenticationError(INVALID_TOKEN)
    return result

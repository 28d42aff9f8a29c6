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


def bearer_token(request: Any) -> str:
    """The token of an ``Authorization: Bearer`` header, or "" when there is none."""
    header = request.requestHeaders.getRawHeaders(b"authorization")
    if not header:
        return ""
    parts = header[0].decode("latin-1").strip().split(" ", 2)
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

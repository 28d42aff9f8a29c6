"""Authenticators: who sent a request (upstream's ``authenticator.Request``).

An authenticator looks at a request for one kind of credential.  It answers
``None`` when the request carries none of that kind, an :class:`AuthResult`
when the credential is valid, and raises :class:`AuthenticationError` when
one is present but invalid.  It may answer through a Deferred (a token checked
against storage or a webhook).

:class:`UnionAuthenticator` asks each in turn, as kube-apiserver combines its
authenticators; anonymous access comes last and only when no credential was
presented at all: an invalid token is a 401 even with anonymous enabled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence, Union

from twisted.internet import defer

from kapiserver.auth import x509
from kapiserver.auth.user import ANONYMOUS, UserInfo


class AuthenticationError(Exception):
    """A credential was presented and is not valid (401); ``str()`` goes to the log, not the client."""


@dataclass(frozen=True)
class AuthResult:
    user: UserInfo
    # the audiences the credential is valid for (tokens); empty = the server's own
    audiences: tuple[str, ...] = ()


Outcome = Union[Optional[AuthResult], "defer.Deferred[Optional[AuthResult]]"]


class Authenticator(Protocol):
    def authenticate(self, request: Any) -> Outcome: ...


class ClientCertificateAuthenticator:
    """The TLS client certificate, verified against the client CA during the handshake."""

    def authenticate(self, request: Any) -> Outcome:
        user = x509.authenticate_client_certificate(request)
        return AuthResult(user) if user is not None else None


class UnionAuthenticator:
    """Each authenticator in order; the first that recognises the request decides.

    With ``anonymous``, a request with no credential at all is ``system:anonymous``
    (what it may do is then up to the authorizer); without, it is a 401.
    """

    def __init__(self, authenticators: Sequence[Authenticator], anonymous: bool) -> None:
        self.authenticators = tuple(authenticators)
        self.anonymous = anonymous

    def authenticate(self, request: Any) -> Outcome:
        return self._from(0, request, [])

    def _from(self, index: int, request: Any, failures: list[AuthenticationError]) -> Outcome:
        for position in range(index, len(self.authenticators)):
            try:
                outcome = self.authenticators[position].authenticate(request)
            except AuthenticationError as e:
                failures.append(e)
                continue
            if isinstance(outcome, defer.Deferred):
                return outcome.addCallbacks(
                    lambda result, p=position: result if result is not None else self._from(p + 1, request, failures),
                    lambda failure, p=position: self._after_failure(failure, p, request, failures))
            if outcome is not None:
                return outcome
        return self._nobody(failures)

    def _after_failure(self, failure: Any, position: int, request: Any,
                       failures: list[AuthenticationError]) -> Outcome:
        failure.trap(AuthenticationError)
        failures.append(failure.value)
        return self._from(position + 1, request, failures)

    def _nobody(self, failures: list[AuthenticationError]) -> Optional[AuthResult]:
        if failures:
            raise failures[0]
        return AuthResult(ANONYMOUS) if self.anonymous else None

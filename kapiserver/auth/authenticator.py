"""Authenticators: who sent a request (upstream's ``authenticator.Request`` and ``.Token``).

An authenticator looks at a request for one kind of credential.  It answers
``None`` when the request carries none of that kind, an :class:`AuthResult`
when the credential is valid, and raises :class:`AuthenticationError` when
one is present but invalid.  It may answer through a Deferred (a token checked
against storage or a webhook).  A token authenticator does the same for a
bearer token and the audiences the caller targets.

:class:`UnionAuthenticator` asks each in turn, as kube-apiserver combines its
authenticators; anonymous access comes last and only when no credential was
presented at all: an invalid token is a 401 even with anonymous enabled.
The kinds are built from the configuration by :mod:`kapiserver.app.authentication`.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional, Protocol, Sequence, Union

from twisted.internet import defer

from kapiserver.auth import x509
from kapiserver.machinery.user import ANONYMOUS, UserInfo, with_authenticated_group


class AuthenticationError(Exception):
    """A credential was presented and is not valid (401); ``str()`` goes to the log
    and to a TokenReview's ``status.error``, never into a 401 body."""


class AuthResult(NamedTuple):
    user: UserInfo
    # the audiences the credential is valid for (tokens); empty = the server's own
    audiences: tuple[str, ...] = ()


Outcome = Union[Optional[AuthResult], "defer.Deferred[Optional[AuthResult]]"]


class Authenticator(Protocol):
    def authenticate(self, request: Any) -> Outcome: ...


class TokenAuthenticator(Protocol):
    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        """``audiences``: whom the caller presents the token to (the API's audiences for a request)."""


def aggregate(failures: Sequence[AuthenticationError]) -> AuthenticationError:
    """One error for several, worded as upstream's aggregate (``[a, b]``)."""
    if len(failures) == 1:
        return failures[0]
    return AuthenticationError("[" + ", ".join(str(f) for f in failures) + "]")


def first_recognised(attempts: Sequence[Callable[[], Outcome]]) -> Outcome:
    """Run ``attempts`` in order until one recognises the credential.

    Failures of earlier attempts do not stop later ones (another kind may
    recognise the credential); when none does, the failures are raised
    together, and when none failed the answer is ``None``.  Synchronous
    attempts are answered synchronously.
    """
    return _from(attempts, 0, [])


def _from(attempts: Sequence[Callable[[], Outcome]], index: int, failures: list[AuthenticationError]) -> Outcome:
    for position in range(index, len(attempts)):
        try:
            outcome = attempts[position]()
        except AuthenticationError as e:
            # only its message is used: without its traceback it does not hold the stack
            # (and the request) alive in a reference cycle until the next collection
            failures.append(e.with_traceback(None))
            continue
        if isinstance(outcome, defer.Deferred):
            return outcome.addCallbacks(
                lambda result, p=position: result if result is not None else _from(attempts, p + 1, failures),
                lambda failure, p=position: _after_failure(attempts, failure, p, failures))
        if outcome is not None:
            return outcome
    if failures:
        raise aggregate(failures)
    return None


def _after_failure(attempts: Sequence[Callable[[], Outcome]], failure: Any, position: int,
                   failures: list[AuthenticationError]) -> Outcome:
    failure.trap(AuthenticationError)
    failures.append(failure.value)
    return _from(attempts, position + 1, failures)


def then(outcome: Outcome, callback: Callable[[Optional[AuthResult]], Optional[AuthResult]]) -> Outcome:
    """Apply ``callback`` to an outcome now, or when its Deferred fires."""
    if isinstance(outcome, defer.Deferred):
        return outcome.addCallback(callback)
    return callback(outcome)


class ClientCertificateAuthenticator:
    """The TLS client certificate, verified during the handshake; with ``ca`` it must
    also chain to that bundle (the handshake trusts the front-proxy CA as well)."""

    def __init__(self, ca: Optional[x509.CABundle] = None) -> None:
        self.ca = ca

    def authenticate(self, request: Any) -> Outcome:
        chain = x509.peer_chain(request)
        if not chain:
            return None
        if self.ca is not None:
            problem = self.ca.verify(request, chain)
            if problem:
                raise AuthenticationError(f"verifying certificate {x509.describe(chain[0])} failed: {problem}")
        user = x509.certificate_user(request, chain)
        return AuthResult(user) if user is not None else None


class UnionAuthenticator:
    """Each authenticator in order; the first that recognises the request decides.

    A recognised user is also in ``system:authenticated`` (upstream's
    AuthenticatedGroupAdder).  With ``anonymous``, a request with no credential
    at all is ``system:anonymous`` (what it may do is then up to the
    authorizer); without, it is a 401.
    """

    def __init__(self, authenticators: Sequence[Authenticator], anonymous: bool) -> None:
        self.authenticators = tuple(authenticators)
        self.anonymous = anonymous

    def authenticate(self, request: Any) -> Outcome:
        outcome = first_recognised([functools.partial(a.authenticate, request) for a in self.authenticators])
        return then(outcome, self._decide)

    def _decide(self, result: Optional[AuthResult]) -> Optional[AuthResult]:
        if result is None:
            return AuthResult(ANONYMOUS) if self.anonymous else None
        user = with_authenticated_group(result.user)
        # (a certificate's user is in the group already: its result is kept, not made again)
        return result if user is result.user else AuthResult(user, result.audiences)

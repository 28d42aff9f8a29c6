"""One request's authentication, made once and read by everyone who needs it.

The connection starts it as soon as a request's headers are complete, before
any of the body is read (an unauthenticated client must not make the server
store an upload), and hands it to the authentication filter through the
request context, so the request is not authenticated twice.  An authenticator
may answer through a Deferred; :meth:`AuthenticationDecision.wait` gives each
interested party its own Deferred for the moment the answer is known.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.python.failure import Failure

from kapiserver.auth.authenticator import AuthenticationError, Authenticator, AuthResult


class AuthenticationDecision:
    """The outcome of authenticating one request: a result, no credential (None), or a failure."""

    def __init__(self) -> None:
        self.known = False
        self.result: Optional[AuthResult] = None
        # AuthenticationError: a credential was presented and is invalid (401);
        # anything else: the authenticator itself failed (500)
        self.failure: Optional[Failure] = None
        self._waiters: list[defer.Deferred] = []

    @classmethod
    def start(cls, authenticator: Authenticator, request: Any) -> "AuthenticationDecision":
        decision = cls()
        try:
            outcome = authenticator.authenticate(request)
        except Exception:
            decision._settle(None, Failure())
            return decision
        if isinstance(outcome, defer.Deferred):
            outcome.addCallbacks(lambda result: decision._settle(result, None),
                                 lambda failure: decision._settle(None, failure))
        else:
            decision._settle(outcome, None)
        return decision

    def _settle(self, result: Optional[AuthResult], failure: Optional[Failure]) -> None:
        self.known = True
        self.result = result
        self.failure = failure
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.callback(self)

    @property
    def authenticated(self) -> bool:
        """Known, and someone (possibly ``system:anonymous``) was authenticated."""
        return self.known and self.failure is None and self.result is not None

    @property
    def invalid_credential(self) -> Optional[AuthenticationError]:
        if self.failure is not None and self.failure.check(AuthenticationError):
            return self.failure.value  # type: ignore[return-value]
        return None

    def wait(self) -> "defer.Deferred[AuthenticationDecision]":
        """A new Deferred firing with this decision once it is known (at once if it is)."""
        if self.known:
            return defer.succeed(self)
        waiter: defer.Deferred = defer.Deferred()
        self._waiters.append(waiter)
        return waiter

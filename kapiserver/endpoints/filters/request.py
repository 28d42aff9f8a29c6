"""The connection side of a request: what happens before the handler chain sees it.

:class:`APIRequest` is authenticated as soon as its headers are complete
(:meth:`APIRequest.begin`), before any of its body is read: the connection
(``endpoints/connection/``) reads the body only for an authenticated request
that fits the size limit (:meth:`APIRequest.body_verdict`); any other is handed
to the chain without its body, and the chain answers it (401 from the
authentication filter, which reuses the decision; 413 from the request-info
filter).  The body is held in memory, bounded: past the limit nothing more is
stored.  A failure that escapes the chain becomes a Status instead of Twisted's
HTML page.  ``endpoints/connection/site.py``'s ``APISite`` serves the handler
chain with such requests over the connections of ``endpoints/connection/``.  The handler chain itself is
plain resources (``filters/chain.py``), so it also runs under any other Site,
such as ``treq.testing.StubTreq``'s in memory.
"""
from __future__ import annotations

import enum
import io
from typing import Any, Optional, Protocol

from twisted.logger import Logger
from twisted.web import http, server

from twisted.internet import defer

from kapiserver.auth.authenticator import Authenticator
from kapiserver.auth.authorizer import Authorizer
from kapiserver.auth.decision import AuthenticationDecision
from kapiserver.machinery.user import ANONYMOUS_USER, UserInfo
from kapiserver.endpoints import respond
from kapiserver.endpoints.connection.policy import ConnectionPolicy
from kapiserver.endpoints.filters.authorization import attributes_for
from kapiserver.endpoints.request_context import context_of
from kapiserver.machinery import errors
from kapiserver.request.info import parse_request_info

log = Logger()



class RequestGate(Protocol):
    """What an :class:`APIRequest` reads from its Site (``connection/site.py`` APISite): who
    authenticates and authorizes before the body is read, and the connection limits."""

    authenticator: Optional[Authenticator]
    authorizer: Optional[Authorizer]
    policy: ConnectionPolicy
    max_body_bytes: int


class BodyRefusingChannel(Protocol):
    """The channels an :class:`APIRequest` runs on (``connection/http1.py``, ``http2.py``)."""

    site: RequestGate

    def refuse_body(self, request: "APIRequest") -> None:
        """The body went past what is read and dropped: answer now, read no more."""


class BodyVerdict(enum.Enum):
    READ = "read"        # authenticated and within the limit
    REFUSE = "refuse"    # not read: the chain answers (401, or 413 for a declared length over the limit)
    WAIT = "wait"        # authentication has not answered yet: hold the body back


class APIRequest(server.Request):
    """A twisted.web request authenticated before its body, whose body is bounded in memory."""

    _body_bytes = 0
    # past the limit, or refused: whatever still arrives is dropped
    _body_closed = False
    # past discard_body_bytes: the connection was asked to answer at once
    _refused = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # the API takes no HTML form posts: never parse a body into request.args
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)

    def render(self, resrc: Any) -> None:
        # no "Server: TwistedWeb/<version>" (set by process()): kube-apiserver names no
        # server software, and the version is of no use to a client
        self.responseHeaders.removeHeader(b"server")
        super().render(resrc)

    @property
    def _channel(self) -> BodyRefusingChannel:
        channel: Any = self.channel  # (twisted types it as its HTTPChannel)
        return channel

    @property
    def max_body_bytes(self) -> int:
        return self._channel.site.max_body_bytes

    def gotLength(self, length: Optional[int]) -> None:
        # in memory whatever the declared length (Twisted spools bodies over 100 kB to a
        # temporary file); handleContentChunk keeps it within the limit
        self.content = io.BytesIO()

    def begin(self, method: bytes, uri: bytes, version: bytes) -> Optional[AuthenticationDecision]:
        """The headers are complete: learn the request line now and start authenticating."""
        self.method, self.uri, self.clientproto = method, uri, version
        path, _, query = uri.partition(b"?")
        self.path = path
        self.args = http.parse_qs(query, 1) if query else {}
        authenticator = self._channel.site.authenticator
        if authenticator is None:
            return None
        decision = AuthenticationDecision.start(authenticator, self)
        context_of(self).authentication = decision
        return decision

    @property
    def discard_body_bytes(self) -> int:
        return self._channel.site.policy.discard_body_bytes

    def body_verdict(self, decision: Optional[AuthenticationDecision], declared_length: Optional[int]) -> BodyVerdict:
        """May the body be read?  Anonymous requests (when enabled) are authenticated too.

        An authenticated request declaring a body over the limit is answered 413; its body is
        read and dropped (up to ``discard_body_bytes``) when the client is sending it anyway,
        because most clients (Python's http.client, urllib3) read the answer only once they
        have sent it all; with ``Expect: 100-continue``, or past that, it is not read at all.
        """
        if decision is not None:
            if not decision.known:
                return BodyVerdict.WAIT
            if not decision.authenticated:
                self.close_body()
                return BodyVerdict.REFUSE
            assert decision.result is not None
            if decision.result.user.name == ANONYMOUS_USER and self._forbidden(decision.result.user):
                # as upstream, whose handler would read the body only after authorization:
                # an anonymous upload that will be a 403 is not read into memory
                self.close_body()
                return BodyVerdict.REFUSE
        if declared_length is not None and declared_length > self.max_body_bytes:
            context_of(self).body_too_large = True
            self.close_body()
            if self.expects_continue() or declared_length > self.discard_body_bytes:
                return BodyVerdict.REFUSE
        return BodyVerdict.READ

    def _forbidden(self, user: UserInfo) -> bool:
        """Will the authorization filter refuse this request?  Only when the authorizer says so
        at once (a webhook's answer is not waited for here) and the user is not impersonating."""
        authorizer = self._channel.site.authorizer
        if authorizer is None or any(name.lower().startswith(b"impersonate-")
                                     for name, _ in self.requestHeaders.getAllRawHeaders()):
            return False
        info = parse_request_info(self.method.decode("latin-1"), self.path.decode("utf-8", "replace"),
                                  self.args or {})
        answer = authorizer.authorize(user, attributes_for(info))
        return not isinstance(answer, defer.Deferred) and not answer.allowed and not answer.error

    def expects_continue(self) -> bool:
        expect = self.requestHeaders.getRawHeaders(b"expect") or []
        return bool(expect) and expect[0].lower() == b"100-continue"

    def close_body(self) -> None:
        """Store nothing more of the body (what was stored is dropped)."""
        self._body_closed = True
        self.content = io.BytesIO()

    def handleContentChunk(self, data: bytes) -> None:
        self._body_bytes += len(data)
        if self._body_bytes > self.max_body_bytes:
            ctx = context_of(self)
            if not ctx.body_too_large:
                ctx.body_too_large = True  # the request-info filter answers 413
                self.close_body()
            if self._body_bytes > self.discard_body_bytes and not self._refused:
                self._refused = True
                self._channel.refuse_body(self)  # answer now, read no more
            return  # over the limit: dropped
        if self._body_closed:
            return
        content: Any = self.content
        content.write(data)

    def processingFailed(self, reason):  # last resort: a Status, not Twisted's HTML page
        log.failure("request processing failed", reason)
        respond.write_status(self, errors.internal_error())

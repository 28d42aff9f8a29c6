"""The handler chain in memory (treq.testing.StubTreq): each filter's job, and their order."""
from __future__ import annotations

import json
from typing import Any, Optional

from treq.testing import StubTreq
from twisted.internet import defer, task
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.auth.authenticator import AuthenticationError, AuthResult, UnionAuthenticator
from kapiserver.auth.authorizer import Decision
from kapiserver.machinery.user import AUTHENTICATED_GROUP, MASTERS_GROUP, UserInfo
from kapiserver.endpoints.filters.inflight import InflightLimiter
from kapiserver.endpoints.filters.waitgroup import RequestWaitGroup
from kapiserver.endpoints.request_context import context_of
from kapiserver.server.handler_chain import HandlerChainDeps, build_handler_chain

URL = "https://kapiserver.invalid"
ALICE = UserInfo("alice", (AUTHENTICATED_GROUP,))


class TokenAuthenticator:
    """``Authorization: Bearer <name>`` is user <name>; ``Bearer bad`` is an invalid credential.
    With ``later``, answers through a Deferred the test fires."""

    def __init__(self, later: bool = False) -> None:
        self.later = later
        self.pending: list[tuple[defer.Deferred, Optional[AuthResult]]] = []

    def authenticate(self, request: Any) -> Any:
        header = request.getHeader(b"authorization")
        if header is None:
            return None
        token = header.decode().removeprefix("Bearer ")
        if token == "bad":
            raise AuthenticationError("unknown token")
        groups = (MASTERS_GROUP, AUTHENTICATED_GROUP) if token == "root" else (AUTHENTICATED_GROUP,)
        result = AuthResult(UserInfo(token, groups))
        if not self.later:
            return result
        d: defer.Deferred = defer.Deferred()
        self.pending.append((d, result))
        return d


class RecordingAuthorizer:
    """Allows what ``allow(user, attributes)`` says and remembers every question."""

    def __init__(self, allow=lambda user, attributes: True) -> None:
        self.allow = allow
        self.asked: list[tuple[str, str, str]] = []

    def authorize(self, user, attributes) -> Decision:
        self.asked.append((user.name if user else "", attributes.verb, attributes.resource))
        return Decision(bool(self.allow(user, attributes)))

    def rules_for(self, user, namespace):
        raise NotImplementedError


class Leaf(resource.Resource):
    """The end of the chain: echoes what the filters put on the context, or holds/raises on demand."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.held: list[server.Request] = []

    def render(self, request: server.Request) -> Any:
        if request.path.endswith(b"/boom"):
            raise RuntimeError("a bug in a handler")
        if request.path.endswith(b"/hold") or b"watch=true" in request.uri:
            self.held.append(request)
            return server.NOT_DONE_YET
        ctx = context_of(request)
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"user": ctx.user.name if ctx.user else None,
                           "authenticated": ctx.authenticated_user.name if ctx.authenticated_user else None,
                           "verb": ctx.require_info().verb}).encode()


class HandlerChainTests(unittest.TestCase):
    def build(self, anonymous: bool = False, authorizer: Any = None, readonly_limit: int = 0,
              authenticator: Any = None) -> None:
        self.clock = task.Clock()
        self.leaf = Leaf()
        self.authenticator = authenticator or TokenAuthenticator()
        self.authorizer = authorizer or RecordingAuthorizer()
        self.inflight = InflightLimiter(readonly_limit, 0)
        self.wait_group = RequestWaitGroup()
        self.recorded: list[tuple[str, int]] = []
        chain = build_handler_chain(self.leaf, HandlerChainDeps(
            reactor=self.clock, authenticator=UnionAuthenticator([self.authenticator], anonymous=anonymous),
            authorizer=self.authorizer, inflight=self.inflight, wait_group=self.wait_group,
            record_metrics=lambda info, code, seconds: self.recorded.append((info.verb, code)),
            request_timeout_seconds=60, max_body_bytes=1024))
        self.http = StubTreq(chain)

    def send(self, path: str, token: Optional[str] = None, headers: Optional[dict] = None,
             method: str = "GET") -> defer.Deferred:
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        d = self.http.request(method, URL + path, headers=hdrs)
        self.http.flush()
        return d

    def answer(self, d: defer.Deferred) -> tuple[int, Any]:
        self.http.flush()
        response = self.successResultOf(d)
        body = self.successResultOf(self.http.content(response))
        return response.code, json.loads(body)

    def test_authenticated_request_reaches_the_delegation_chain(self) -> None:
        self.build()
        code, body = self.answer(self.send("/api/v1/namespaces/demo/pods", token="alice"))
        self.assertEqual((code, body), (200, {"user": "alice", "authenticated": "alice", "verb": "list"}))
        self.assertEqual(self.authorizer.asked, [("alice", "list", "pods")])
        self.assertEqual(self.recorded, [("list", 200)])

    def test_no_credential_is_401_before_authorization(self) -> None:
        self.build(anonymous=False)
        code, body = self.answer(self.send("/api/v1/pods"))
        self.assertEqual((code, body["kind"], body["reason"]), (401, "Status", "Unauthorized"))
        self.assertEqual(self.authorizer.asked, [])

    def test_anonymous_is_system_anonymous_and_still_authorized(self) -> None:
        self.build(anonymous=True, authorizer=RecordingAuthorizer(lambda user, a: a.path != "/api/v1/secrets"))
        code, body = self.answer(self.send("/version"))
        self.assertEqual((code, body["user"]), (200, "system:anonymous"))
        code, body = self.answer(self.send("/api/v1/secrets"))
        self.assertEqual(code, 403)

    def test_invalid_credential_is_401_even_with_anonymous(self) -> None:
        self.build(anonymous=True)
        code, body = self.answer(self.send("/version", token="bad"))
        self.assertEqual((code, body["reason"]), (401, "Unauthorized"))

    def test_impersonation_runs_between_authentication_and_authorization(self) -> None:
        self.build()
        code, body = self.answer(self.send("/api/v1/namespaces/demo/secrets", token="alice",
                                           headers={"Impersonate-User": "bob"}))
        self.assertEqual((code, body["user"], body["authenticated"]), (200, "bob", "alice"))
        # alice is asked about impersonating, then bob about the request itself
        self.assertEqual(self.authorizer.asked, [("alice", "impersonate", "users"), ("bob", "list", "secrets")])

    def test_impersonating_an_invalid_service_account_name_is_impersonating_a_user(self) -> None:
        """upstream's SplitUsername: only a valid namespace and name make a service account; anything
        else under system:serviceaccount: is a user name, which takes ``impersonate users``."""
        self.build(authorizer=RecordingAuthorizer(lambda user, a: a.verb != "impersonate" or
                                                  a.resource == "serviceaccounts"))
        for name in ("system:serviceaccount:demo:Bad_Name", "system:serviceaccount:Demo:robot",
                     "system:serviceaccount:demo:robot:x", "system:serviceaccount:demo:"):
            self.authorizer.asked.clear()
            code, body = self.answer(self.send("/api/v1/namespaces/demo/pods", token="alice",
                                               headers={"Impersonate-User": name}))
            self.assertEqual((code, body["reason"]), (403, "Forbidden"), name)
            self.assertEqual(body["message"], f'users "{name}" is forbidden: User "alice" cannot impersonate '
                                              'resource "users" in API group "" at the cluster scope')
            self.assertEqual(self.authorizer.asked, [("alice", "impersonate", "users")])
        self.authorizer.asked.clear()
        code, body = self.answer(self.send("/api/v1/namespaces/demo/pods", token="alice",
                                           headers={"Impersonate-User": "system:serviceaccount:demo:robot.v2"}))
        self.assertEqual((code, body["user"]), (200, "system:serviceaccount:demo:robot.v2"))
        self.assertEqual(self.authorizer.asked[0], ("alice", "impersonate", "serviceaccounts"))

    def test_forbidden_in_upstream_words(self) -> None:
        self.build(authorizer=RecordingAuthorizer(lambda user, attributes: False))
        code, body = self.answer(self.send("/api/v1/namespaces/demo/secrets/db", token="alice", method="DELETE"))
        self.assertEqual(code, 403)
        self.assertEqual(body["message"], 'secrets "db" is forbidden: User "alice" cannot delete resource "secrets" '
                                          'in API group "" in the namespace "demo"')
        self.assertEqual(body["details"], {"name": "db", "kind": "secrets"})
        code, body = self.answer(self.send("/metrics", token="alice"))
        self.assertEqual(body["message"], 'forbidden: User "alice" cannot get path "/metrics"')

    def test_in_flight_limit_holds_the_seat_until_the_answer_is_finished(self) -> None:
        self.build(readonly_limit=1)
        first = self.send("/api/v1/namespaces/demo/configmaps/hold", token="alice")
        self.assertEqual(len(self.leaf.held), 1)
        self.http.flush()
        rejected = self.successResultOf(self.send("/api/v1/configmaps", token="alice"))
        # upstream's tooManyRequests: plain text, Retry-After 1
        self.assertEqual((rejected.code, rejected.headers.getRawHeaders("retry-after")), (429, ["1"]))
        self.assertEqual(self.successResultOf(self.http.content(rejected)),
                         b"Too many requests, please try again later.\n")
        # system:masters is exempt, as upstream
        self.assertEqual(self.answer(self.send("/api/v1/configmaps", token="root"))[0], 200)
        # watches are long-running and exempt
        self.send("/api/v1/configmaps?watch=true", token="alice")
        self.assertEqual(len(self.leaf.held), 2)
        self.leaf.held[0].write(b"{}")
        self.leaf.held[0].finish()
        self.answer(first)
        self.assertEqual(self.answer(self.send("/api/v1/configmaps", token="alice"))[0], 200)

    def test_request_timeout_is_504_and_watches_are_exempt(self) -> None:
        self.build()
        held = self.send("/api/v1/namespaces/demo/configmaps/hold", token="alice")
        self.send("/api/v1/configmaps?watch=true", token="alice")
        self.assertEqual(self.wait_group.count, 1)  # the watch is not waited for on shutdown
        self.clock.advance(61)
        code, body = self.answer(held)
        self.assertEqual((code, body["reason"]), (504, "Timeout"))
        self.assertFalse(self.leaf.held[1].finished)

    def test_panic_in_a_handler_is_a_500_status(self) -> None:
        self.build()
        code, body = self.answer(self.send("/api/v1/boom", token="alice"))
        self.assertEqual((code, body["reason"]), (500, "InternalError"))
        self.assertNotIn("a bug in a handler", json.dumps(body))
        self.flushLoggedErrors(RuntimeError)

    def test_asynchronous_authentication_continues_the_chain(self) -> None:
        authenticator = TokenAuthenticator(later=True)
        self.build(authenticator=authenticator)
        d = self.send("/api/v1/pods", token="alice")
        self.assertNoResult(d)
        self.assertEqual(self.authorizer.asked, [])
        pending, result = authenticator.pending.pop()
        pending.callback(result)
        self.assertEqual(self.answer(d), (200, {"user": "alice", "authenticated": "alice", "verb": "list"}))

    def test_once_shutdown_waits_new_requests_are_turned_away_as_upstream(self) -> None:
        self.build()
        held = self.send("/api/v1/namespaces/demo/configmaps/hold", token="alice")
        self.wait_group.close()  # the drain has begun
        d = self.send("/api/v1/namespaces/demo/configmaps", token="alice")
        self.http.flush()
        response = self.successResultOf(d)
        body = json.loads(self.successResultOf(self.http.content(response)))
        self.assertEqual((response.code, body["reason"], body["message"]),
                         (503, "ServiceUnavailable", "apiserver is shutting down"))
        self.assertEqual(response.headers.getRawHeaders(b"retry-after"), [b"1"])
        # health checks, and watches (long-running), still pass
        self.assertEqual(self.answer(self.send("/readyz", token="alice"))[0], 200)
        self.send("/api/v1/configmaps?watch=true", token="alice")
        self.assertEqual(len(self.leaf.held), 2)
        # the request taken before is still counted until it is answered
        self.assertEqual(self.wait_group.count, 1)
        self.leaf.held[0].write(b"{}")
        self.leaf.held[0].finish()
        self.answer(held)
        self.assertEqual(self.wait_group.count, 0)


class FinishHookTests(unittest.TestCase):
    """RequestContext.when_finished: what the filters run once a request is over."""

    def _request(self) -> Any:
        from twisted.web.test.requesthelper import DummyRequest
        return DummyRequest([b""])

    def test_hooks_run_once_in_order_when_the_request_finishes(self):
        request = self._request()
        ctx = context_of(request)
        ran: list[str] = []
        ctx.when_finished(request, lambda: ran.append("metrics"))
        ctx.when_finished(request, lambda: ran.append("seat"))
        self.assertEqual(ran, [])
        request.finish()
        self.assertEqual(ran, ["metrics", "seat"])
        ctx.when_finished(request, lambda: ran.append("late"))  # after the end: at once
        self.assertEqual(ran, ["metrics", "seat", "late"])

    def test_hooks_run_when_the_client_goes_away_and_a_failing_one_stops_no_other(self):
        from twisted.internet.error import ConnectionLost
        from twisted.python.failure import Failure
        request = self._request()
        ctx = context_of(request)
        ran: list[str] = []

        def broken() -> None:
            raise RuntimeError("boom")
        ctx.when_finished(request, broken)
        ctx.when_finished(request, lambda: ran.append("seat"))
        request.processingFailed(Failure(ConnectionLost()))  # notifyFinish's errback, as a lost client's
        self.assertEqual(ran, ["seat"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

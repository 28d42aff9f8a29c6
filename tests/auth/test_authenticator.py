"""The authenticator chain: bearer tokens, anonymous, system:authenticated (upstream's union and adders)."""
from __future__ import annotations

import base64

from twisted.trial import unittest
from twisted.web.http_headers import Headers

from kapiserver.auth.authenticator import AuthenticationError, UnionAuthenticator
from kapiserver.auth.bearertoken import (AudienceAgnosticToken, BearerTokenAuthenticator, TokenUnion,
                                         WebSocketProtocolAuthenticator)
from kapiserver.auth.tokenfile import StaticTokenAuthenticator
from kapiserver.machinery.user import UserInfo

API = ("https://kubernetes.default.svc.cluster.local",)


class Request:
    def __init__(self, **headers: str) -> None:
        self.requestHeaders = Headers({k.replace("_", "-"): [v] for k, v in headers.items()})


class Failing:
    """A token authenticator that recognises ``bad-*`` tokens as invalid."""

    def authenticate_token(self, token, audiences):
        if token.startswith("bad-"):
            raise AuthenticationError(f"{token} has expired")
        return None


def union(anonymous: bool) -> UnionAuthenticator:
    static = StaticTokenAuthenticator({"alice-token": UserInfo("alice", ("dev",), "1")})
    tokens = TokenUnion([AudienceAgnosticToken(API, static), Failing()])
    return UnionAuthenticator([BearerTokenAuthenticator(tokens, API)], anonymous=anonymous)


class UnionTests(unittest.TestCase):
    def test_token_user_is_in_system_authenticated(self) -> None:
        result = union(False).authenticate(Request(authorization="Bearer alice-token"))
        self.assertEqual((result.user.name, result.user.groups), ("alice", ("dev", "system:authenticated")))
        self.assertEqual(result.audiences, API)

    def test_anonymous_only_without_any_credential(self) -> None:
        result = union(True).authenticate(Request())
        self.assertEqual((result.user.name, result.user.groups), ("system:anonymous", ("system:unauthenticated",)))
        self.assertIsNone(union(False).authenticate(Request()))
        # another scheme is no bearer token: anonymous, as upstream
        self.assertEqual(union(True).authenticate(Request(authorization="Basic YTpi")).user.name, "system:anonymous")

    def test_invalid_token_is_refused_even_with_anonymous(self) -> None:
        with self.assertRaises(AuthenticationError) as cm:
            union(True).authenticate(Request(authorization="Bearer nobody-knows-me"))
        self.assertEqual(str(cm.exception), "invalid bearer token")
        with self.assertRaises(AuthenticationError) as cm:
            union(True).authenticate(Request(authorization="Bearer bad-token"))
        self.assertEqual(str(cm.exception), "bad-token has expired")

    def test_header_is_trimmed_as_go_trims_it(self) -> None:
        """strings.TrimSpace: ASCII and UTF-8 Unicode white space go; a lone 0xA0 byte is no UTF-8 and
        stays part of the token (Python's str.strip() of the Latin-1 text took it away)."""
        def authenticate(header: bytes):
            request = Request()
            request.requestHeaders.setRawHeaders(b"authorization", [header])
            return union(True).authenticate(request)
        # (not "Bearer" then: no bearer token at all)
        self.assertEqual(authenticate(b"\xa0Bearer alice-token").user.name, "system:anonymous")
        for header in (b"Bearer alice-token\xa0", b"Bearer alice-token\x85", b"Bearer alice-token\x1c"):
            with self.assertRaises(AuthenticationError, msg=header) as cm:
                authenticate(header)
            self.assertEqual(str(cm.exception), "invalid bearer token")
        for header in (b"Bearer alice-token\xc2\xa0", b" \tBearer alice-token\r\x0b\x0c",
                       b"\xe3\x80\x80Bearer alice-token\xe2\x80\xa8\xc2\x85"):
            self.assertEqual(authenticate(header).user.name, "alice", header)

    def test_static_tokens_are_valid_only_for_the_api_audiences(self) -> None:
        static = AudienceAgnosticToken(API, StaticTokenAuthenticator({"t": UserInfo("alice")}))
        self.assertIsNone(static.authenticate_token("t", ("vault",)))
        self.assertEqual(static.authenticate_token("t", ("vault", API[0])).audiences, API)


class First:
    """An authenticator that does not recognise anything, by failing (as one whose credential
    kind is present but invalid for it)."""

    def authenticate(self, request):
        raise AuthenticationError("not mine")


class Second:
    def authenticate(self, request):
        from kapiserver.auth.authenticator import AuthResult
        return AuthResult(UserInfo("bob"))


def websocket_union(protocols: list[bytes], upgrade: bool = True) -> tuple[UnionAuthenticator, Request]:
    static = StaticTokenAuthenticator({"alice-token": UserInfo("alice", ("dev",), "1")})
    tokens = TokenUnion([AudienceAgnosticToken(API, static)])
    request = Request()
    if upgrade:
        request.requestHeaders.setRawHeaders(b"connection", [b"keep-alive, Upgrade"])
        request.requestHeaders.setRawHeaders(b"upgrade", [b"WebSocket"])
    request.requestHeaders.setRawHeaders(b"sec-websocket-protocol", protocols)
    union = UnionAuthenticator([BearerTokenAuthenticator(tokens, API), WebSocketProtocolAuthenticator(tokens, API)],
                               anonymous=True)
    return union, request


def bearer_protocol(token: bytes) -> bytes:
    return b"base64url.bearer.authorization.k8s.io." + base64.urlsafe_b64encode(token).rstrip(b"=")


class WebSocketProtocolTests(unittest.TestCase):
    """upstream's websocket.ProtocolAuthenticator: a bearer token as a WebSocket subprotocol."""

    def test_token_in_a_subprotocol_authenticates_and_leaves_the_header(self) -> None:
        union, request = websocket_union([b"v5.channel.k8s.io, " + bearer_protocol(b"alice-token"),
                                          b"v4.channel.k8s.io"])
        result = union.authenticate(request)
        self.assertEqual((result.user.name, result.audiences), ("alice", API))
        self.assertEqual(request.requestHeaders.getRawHeaders(b"sec-websocket-protocol"),
                         [b"v5.channel.k8s.io,v4.channel.k8s.io"])

    def test_only_websocket_upgrades(self) -> None:
        sent = bearer_protocol(b"alice-token") + b", v4.channel.k8s.io"
        union, request = websocket_union([sent], upgrade=False)
        self.assertEqual(union.authenticate(request).user.name, "system:anonymous")
        self.assertEqual(request.requestHeaders.getRawHeaders(b"sec-websocket-protocol"), [sent])

    def test_refusals_in_upstream_words(self) -> None:
        cases = {
            "invalid bearer token": [bearer_protocol(b"nobody") + b",v4.channel.k8s.io"],
            "missing additional subprotocol": [bearer_protocol(b"alice-token")],
            "multiple base64.bearer.authorization tokens specified": [
                bearer_protocol(b"alice-token") + b"," + bearer_protocol(b"alice-token") + b",v4"],
            "invalid base64.bearer.authorization token encoding": [
                bearer_protocol(b"alice-token") + b"=,v4", b"base64url.bearer.authorization.k8s.io.a+b/,v4"],
            "invalid base64.bearer.authorization token": [bearer_protocol(b"\xff\xfe") + b",v4"],
        }
        for message, headers in cases.items():
            for header in headers:
                union, request = websocket_union([header])
                with self.assertRaises(AuthenticationError, msg=header) as cm:
                    union.authenticate(request)
                self.assertEqual(str(cm.exception), message, header)
                # refused: the header stays as it was
                self.assertEqual(request.requestHeaders.getRawHeaders(b"sec-websocket-protocol"), [header])


class NoCycleTests(unittest.TestCase):
    def test_a_request_authenticated_after_a_failure_is_freed_at_once(self) -> None:
        # a failure kept with its traceback held the stack, and the request, in a reference
        # cycle until the next collection: on every client-certificate request, when the
        # front-proxy authenticator raised before the client-certificate one answered
        import gc
        import weakref
        chain = UnionAuthenticator([First(), Second()], anonymous=False)
        gc.collect()
        gc.disable()
        try:
            request = Request()
            gone = weakref.ref(request)
            self.assertEqual(chain.authenticate(request).user.name, "bob")
            del request
            self.assertIsNone(gone())
        finally:
            gc.enable()

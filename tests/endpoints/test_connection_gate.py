"""The body gate in process: a request is authenticated once, when its headers are complete, and
its body is read only after an authenticator that answers later said who sent it.

The real handler chain under :class:`APISite` on a loopback port (plain TCP), with an
authenticator whose answers the test gives; raw sockets as clients.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from twisted.internet import defer, protocol, reactor, task
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.auth.authenticator import AuthResult, UnionAuthenticator
from kapiserver.machinery.user import AUTHENTICATED_GROUP, UserInfo
from kapiserver.endpoints.connection.policy import ConnectionPolicy
from kapiserver.endpoints.connection.site import APISite
from kapiserver.endpoints.filters.inflight import InflightLimiter
from kapiserver.endpoints.filters.waitgroup import RequestWaitGroup
from kapiserver.endpoints.request_context import context_of
from kapiserver.server.handler_chain import HandlerChainDeps, build_handler_chain
from tests.endpoints.test_handler_chain import RecordingAuthorizer

LIMIT = 64 * 1024
DISCARD = 4 * LIMIT


class LaterAuthenticator:
    """``Authorization: Bearer <name>`` is <name>, answered when the test says so."""

    def __init__(self) -> None:
        self.calls = 0
        self.pending: list[tuple[defer.Deferred, Any, Optional[AuthResult]]] = []

    def authenticate(self, request: Any) -> Any:
        self.calls += 1
        header = request.getHeader(b"authorization")
        result = None if header is None else AuthResult(UserInfo(header.decode().removeprefix("Bearer "),
                                                                 (AUTHENTICATED_GROUP,)))
        d: defer.Deferred = defer.Deferred()
        self.pending.append((d, request, result))
        return d

    def answer(self) -> Any:
        d, request, result = self.pending.pop()
        d.callback(result)
        return request


class Echo(resource.Resource):
    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def render(self, request: server.Request) -> bytes:
        body = request.content.read()
        self.seen.append(len(body))
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"user": context_of(request).user.name, "body": len(body)}).encode()


class Client(protocol.Protocol):
    def __init__(self) -> None:
        self.received = b""
        self.closed: defer.Deferred = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Any = None) -> None:
        self.closed.callback(self.received)


def sleep(seconds: float) -> defer.Deferred:
    return task.deferLater(reactor, seconds, lambda: None)


class BodyGateTests(unittest.TestCase):
    def setUp(self) -> None:
        self.authenticator = LaterAuthenticator()
        self.echo = Echo()
        union = UnionAuthenticator([self.authenticator], anonymous=False)
        chain = build_handler_chain(self.echo, HandlerChainDeps(
            reactor=reactor, authenticator=union, authorizer=RecordingAuthorizer(),
            inflight=InflightLimiter(0, 0), wait_group=RequestWaitGroup(),
            record_metrics=lambda info, code, seconds: None, request_timeout_seconds=60, max_body_bytes=LIMIT))
        self.site = APISite(chain, LIMIT, authenticator=union,
                            policy=ConnectionPolicy(max_body_bytes=LIMIT, discard_body_bytes=DISCARD,
                                                    linger_seconds=0.1), reactor=reactor)
        self.port = reactor.listenTCP(0, self.site, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(self.close_all()))

    async def close_all(self) -> None:
        """Cut what is left (a connection lingering after a refused body) and let it go."""
        for connection in list(self.site.connections.connections):
            connection.abort()
        for _ in range(100):
            if not self.site.connections.connections:
                return
            await sleep(0.01)

    async def connect(self) -> Client:
        client = Client()
        await protocol.ClientCreator(reactor, lambda: client).connectTCP("127.0.0.1", self.port.getHost().port)
        self.addCleanup(lambda: client.transport.abortConnection() if client.transport.connected else None)
        return client

    @staticmethod
    def post(length: int, token: Optional[str] = "alice", extra: str = "") -> bytes:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        return (f"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\n{auth}"
                f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n").encode()

    async def wait_for_authentication(self) -> None:
        for _ in range(100):
            if self.authenticator.pending:
                return
            await sleep(0.01)
        self.fail("the request was never authenticated")

    def test_body_is_held_until_authentication_answers_and_it_asks_once(self) -> None:
        async def run() -> None:
            client = await self.connect()
            client.transport.write(self.post(40000) + b"x" * 40000)
            await self.wait_for_authentication()
            await sleep(0.1)  # the body is on the server's doorstep by now
            _, request, _ = self.authenticator.pending[-1]
            self.assertEqual(request.content.getvalue(), b"")  # nothing of it was read
            self.assertEqual(self.echo.seen, [])
            self.authenticator.answer()
            for _ in range(100):
                if b"\r\n\r\n" in client.received:
                    break
                await sleep(0.01)
            head, _, body = client.received.partition(b"\r\n\r\n")
            self.assertIn(b"200 OK", head)
            self.assertEqual(json.loads(body), {"user": "alice", "body": 40000})
            self.assertEqual(self.authenticator.calls, 1)  # the filter used the connection's decision
        return defer.Deferred.fromCoroutine(run())

    def test_unauthenticated_body_is_never_read(self) -> None:
        async def run() -> None:
            client = await self.connect()
            client.transport.write(self.post(40000, token=None) + b"x" * 40000)
            await self.wait_for_authentication()
            await sleep(0.1)  # the body is on the server's doorstep by now
            _, request, _ = self.authenticator.pending[-1]
            self.assertEqual(request.content.getvalue(), b"")
            self.authenticator.answer()
            received = await client.closed  # answered, then closed
            self.assertIn(b"401 Unauthorized", received.split(b"\r\n", 1)[0])
            self.assertIn(b"Connection: close", received)
            self.assertEqual(self.echo.seen, [])
        return defer.Deferred.fromCoroutine(run())

    def test_continue_is_sent_only_once_authenticated(self) -> None:
        async def run() -> None:
            client = await self.connect()
            client.transport.write(self.post(10, extra="Expect: 100-continue\r\n"))
            await self.wait_for_authentication()
            await sleep(0.05)
            self.assertEqual(client.received, b"")  # no 100 before the decision
            self.authenticator.answer()
            for _ in range(100):
                if client.received:
                    break
                await sleep(0.01)
            self.assertEqual(client.received, b"HTTP/1.1 100 Continue\r\n\r\n")
            client.transport.write(b"0123456789")
            for _ in range(100):
                if b"{" in client.received:
                    break
                await sleep(0.01)
            self.assertEqual(json.loads(client.received.rpartition(b"\r\n\r\n")[2]), {"user": "alice", "body": 10})
        return defer.Deferred.fromCoroutine(run())

    async def status_of(self, client: Client) -> dict:
        for _ in range(200):
            if client.received.endswith(b"}\n"):
                break
            await sleep(0.01)
        return json.loads(client.received.partition(b"\r\n\r\n")[2])

    def test_body_over_the_limit_is_read_dropped_and_answered_413(self) -> None:
        async def run() -> None:
            client = await self.connect()
            client.transport.write(self.post(LIMIT + 1) + b"x" * (LIMIT + 1))
            await self.wait_for_authentication()
            self.authenticator.answer()
            status = await self.status_of(client)
            self.assertEqual((status["code"], status["message"]), (413, f"Request entity too large: limit is {LIMIT}"))
            self.assertEqual(self.echo.seen, [])
            self.assertNotIn(b"Connection: close", client.received)  # the body was consumed: kept alive
        return defer.Deferred.fromCoroutine(run())

    def test_body_past_what_is_dropped_is_413_at_once(self) -> None:
        async def run() -> None:
            client = await self.connect()
            client.transport.write(self.post(DISCARD + 1))  # the body never comes: not waited for
            await self.wait_for_authentication()
            self.authenticator.answer()
            received = await client.closed
            self.assertEqual(json.loads(received.partition(b"\r\n\r\n")[2])["code"], 413)
        return defer.Deferred.fromCoroutine(run())

    def test_chunked_body_past_what_is_dropped_is_413_at_once(self) -> None:
        async def run() -> None:
            client = await self.connect()
            head = (b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice\r\n"
                    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            client.transport.write(head)
            await self.wait_for_authentication()
            self.authenticator.answer()
            chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
            client.transport.write(chunk * (DISCARD // 0x4000 + 2))  # no last chunk: never finished
            received = await client.closed
            self.assertIn(b"Connection: close", received)
            self.assertEqual(json.loads(received.partition(b"\r\n\r\n")[2])["code"], 413)
            self.assertEqual(self.echo.seen, [])
        return defer.Deferred.fromCoroutine(run())

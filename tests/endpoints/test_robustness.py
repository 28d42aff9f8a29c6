"""What happens when things go wrong: a handler bug, a client that stops reading."""
from __future__ import annotations

import socket

from twisted.internet import defer, reactor, task

from kapiserver.endpoints.handlers import watch as watch_handler
from tests.endpoints.test_rest_verbs import CM, cm
from kapiserver.testing.cases import ServerTestCase, run


class HandlerBugTests(ServerTestCase):
    @run
    async def test_bug_is_a_generic_500_status(self):
        store = self.server.api.served.store("", "v1", "configmaps")

        async def broken(*args, **kwargs):
            raise RuntimeError("secret internals")
        self.patch(store, "list_stored", broken)
        r = await self.client.get(CM)
        self.assertEqual(r.code, 500)
        self.assertEqual(r.body["kind"], "Status")
        self.assertEqual(r.body["reason"], "InternalError")
        self.assertNotIn("secret internals", r.raw.decode())
        self.assertNotIn("Traceback", r.raw.decode())
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        # the server goes on serving
        self.assertEqual((await self.client.get(CM + "/missing")).code, 404)


class SlowWatcherTests(ServerTestCase):
    @run
    async def test_watch_that_is_not_read_is_closed_not_buffered(self):
        self.patch(watch_handler, "MAX_BACKLOG_BYTES", 512 * 1024)
        await self.client.post(CM, cm("big"))
        port = int(self.server.url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        self.addCleanup(sock.close)
        sock.sendall(b"GET " + CM.encode() + b"?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n")

        async def watchers() -> int:
            await task.deferLater(reactor, 0.05, lambda: None)
            return len(self.server.api.watches.watches)
        for _ in range(40):
            if await watchers():
                break
        self.assertEqual(await watchers(), 1)
        payload = "x" * (100 * 1024)
        for i in range(200):
            await self.client.patch(CM + "/big", {"data": {"blob": f"{i}{payload}"}})
            if not await watchers():
                break
        self.assertEqual(await watchers(), 0, "the unread watch should have been closed")
        self.assertEqual((await self.client.get(CM + "/big")).code, 200)


class LimitTests(ServerTestCase):
    settings = {"max_requests_inflight": 1, "request_timeout_seconds": 1, "enable_priority_and_fairness": False}

    def hang_lists(self) -> defer.Deferred:
        """Make configmap lists wait until the returned Deferred fires."""
        store = self.server.api.served.store("", "v1", "configmaps")
        original = store.list_stored
        gate = defer.Deferred()

        async def slow(*args, **kwargs):
            await gate
            return await original(*args, **kwargs)
        self.patch(store, "list_stored", slow)
        return gate

    @run
    async def test_max_inflight_answers_429_with_retry_after(self):
        gate = self.hang_lists()
        first = self.client.get(CM)
        await task.deferLater(reactor, 0.1, lambda: None)
        second = await self.client.get(CM + "/anything")
        self.assertEqual(second.code, 429)
        self.assertEqual((second.raw, second.header("retry-after")),
                         (b"Too many requests, please try again later.\n", "1"))
        gate.callback(None)
        self.assertIn((await first).code, (200, 504))

    @run
    async def test_slow_request_times_out_with_504(self):
        gate = self.hang_lists()
        r = await self.client.get(CM)
        self.assertEqual(r.code, 504)
        self.assertEqual(r.body["reason"], "Timeout")
        gate.callback(None)
        await task.deferLater(reactor, 0.1, lambda: None)
        # the in-flight slot is free again
        self.assertEqual((await self.client.get(CM + "/missing")).code, 404)

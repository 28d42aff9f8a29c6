"""EtcdClient's unary calls against a scripted gateway: the create txn's body, deadlines, and the
bound on calls in flight."""
from __future__ import annotations

from typing import Optional

import orjson
from twisted.internet import defer, task
from twisted.trial import unittest

from kapiserver.storage.etcd.client import Compare, EtcdClient, Op
from kapiserver.storage.interface import UnavailableError


class ScriptedGateway:
    """Stands in for the unary HTTP client: every POST waits until the test answers it."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, bytes, defer.Deferred]] = []
        self.cancelled = 0

    def post(self, endpoint: str, path: str, body: bytes) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred(lambda _: self._cancel())
        self.posts.append((path, body, d))
        return d

    def _cancel(self) -> None:
        self.cancelled += 1

    def answer(self, i: int, document: dict, code: int = 200) -> None:
        self.posts[i][2].callback((code, orjson.dumps(document)))

    def close(self) -> defer.Deferred:
        return defer.succeed(None)


def scripted(timeout: float = 10.0, max_in_flight: int = 32) -> tuple[EtcdClient, ScriptedGateway, task.Clock]:
    clock = task.Clock()
    client = EtcdClient(["http://127.0.0.1:2379"], request_timeout=timeout, reactor=clock,
                        max_in_flight=max_in_flight)
    gateway = ScriptedGateway()
    client._unary = gateway  # type: ignore[assignment]
    return client, gateway, clock


def started(coroutine) -> defer.Deferred:
    return defer.Deferred.fromCoroutine(coroutine)


class CreateTxnTests(unittest.TestCase):

    def test_create_sends_the_txn_the_generic_one_sends_and_reads_its_answer(self):
        client, gateway, _ = scripted()
        for n, (key, value, lease) in enumerate([(b"/registry/configmaps/ns/a", b'{"kind":"ConfigMap"}', 0),
                                                 (b"/r/\xff\x00k", bytes(range(256)), 7587869431234567)]):
            d = client.create(key, value, lease)
            path, body, _ = gateway.posts[n]
            self.assertEqual(path, "/v3/kv/txn")
            generic = {"compare": [Compare.create_revision(key, "EQUAL", 0).to_json()],
                       "success": [Op.put(key, value, lease=lease).to_json()], "failure": []}
            self.assertEqual(body, orjson.dumps(generic))
            gateway.answer(n, {"header": {"revision": "41"}, "succeeded": n == 0,
                               "responses": [{"response_put": {"header": {"revision": "41"}}}] if n == 0 else []})
            self.assertEqual(self.successResultOf(d), (n == 0, 41))


class DeadlineTests(unittest.TestCase):

    def test_each_call_fails_at_its_own_deadline_with_one_timer_for_all(self):
        client, gateway, clock = scripted(timeout=10.0)
        first = started(client.call("/v3/kv/range", {"key": "YQ=="}))
        clock.advance(4)
        second = started(client.call("/v3/kv/range", {"key": "Yg=="}))
        answered = started(client.call("/v3/kv/range", {"key": "Yw=="}))
        gateway.answer(2, {"header": {"revision": "3"}})
        self.assertEqual(self.successResultOf(answered), {"header": {"revision": "3"}})
        self.assertEqual(len(clock.getDelayedCalls()), 1)
        clock.advance(5.9)
        self.assertNoResult(first)
        clock.advance(0.1)  # 10 s after the first began
        failure = self.failureResultOf(first, UnavailableError)
        self.assertIn("timed out after 10s", str(failure.value))
        self.assertEqual(gateway.cancelled, 1)  # its request was given up (the connection goes)
        self.assertNoResult(second)
        self.assertEqual(len(clock.getDelayedCalls()), 1)
        clock.advance(3.9)
        self.assertNoResult(second)
        clock.advance(0.1)  # 10 s after the second began
        self.failureResultOf(second, UnavailableError)
        self.assertEqual(gateway.cancelled, 2)
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_a_call_answered_in_time_is_not_failed_later(self):
        client, gateway, clock = scripted(timeout=10.0)
        d = started(client.call("/v3/kv/range", {}))
        clock.advance(9)
        gateway.answer(0, {"count": "1"})
        clock.advance(30)
        self.assertEqual(self.successResultOf(d), {"count": "1"})
        self.assertEqual(gateway.cancelled, 0)

    def test_a_call_with_a_timeout_of_its_own(self):
        client, gateway, clock = scripted(timeout=10.0)
        d = started(client.status(timeout=2.0))
        clock.advance(2)
        self.assertIn("timed out after 2s", str(self.failureResultOf(d, UnavailableError).value))

    def test_a_caller_that_gives_up_gets_its_cancellation_not_a_timeout(self):
        client, gateway, clock = scripted(timeout=10.0)
        d = started(client.call("/v3/kv/range", {}))
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        clock.advance(10)
        self.assertEqual(gateway.cancelled, 1)

    def test_close_leaves_no_timer(self):
        client, gateway, clock = scripted(timeout=10.0)
        d = started(client.call("/v3/kv/range", {}))
        gateway.answer(0, {})
        self.successResultOf(d)
        client.close()
        self.assertEqual(clock.getDelayedCalls(), [])


class InFlightTests(unittest.TestCase):

    def test_calls_beyond_the_bound_wait_in_turn_and_a_wait_can_time_out(self):
        client, gateway, clock = scripted(timeout=10.0, max_in_flight=1)
        first = started(client.call("/v3/kv/range", {"n": 1}))
        clock.advance(1)
        second = started(client.call("/v3/kv/range", {"n": 2}))
        clock.advance(1)
        third = started(client.call("/v3/kv/range", {"n": 3}))
        self.assertEqual(len(gateway.posts), 1)  # the others wait for its slot
        gateway.answer(0, {"n": "1"})
        self.assertEqual(self.successResultOf(first), {"n": "1"})
        self.assertEqual([orjson.loads(body) for _, body, _ in gateway.posts], [{"n": 1}, {"n": 2}])
        clock.advance(9)  # the second's request is given up at its deadline: the third's goes
        self.failureResultOf(second, UnavailableError)
        self.assertEqual(orjson.loads(gateway.posts[2][1]), {"n": 3})
        clock.advance(1)
        self.failureResultOf(third, UnavailableError)
        fourth: Optional[defer.Deferred] = started(client.call("/v3/kv/range", {"n": 4}))
        self.assertEqual(len(gateway.posts), 4)  # a slot is free at once
        gateway.answer(3, {"n": "4"})
        self.assertEqual(self.successResultOf(fourth), {"n": "4"})

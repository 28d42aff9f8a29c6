"""/healthz, /livez, /readyz output, byte for byte in upstream's format."""
from __future__ import annotations

from treq.testing import StubTreq
from twisted.internet import defer
from twisted.trial import unittest
from twisted.web import resource

from kapiserver.server.healthz import HealthChecks, health_resource


def _failing() -> None:
    raise RuntimeError("database on fire")


class HealthTests(unittest.TestCase):
    def setUp(self) -> None:
        self.checks = HealthChecks()
        root = resource.Resource()
        for kind in ("healthz", "livez", "readyz"):
            root.putChild(kind.encode(), health_resource(kind, self.checks))
        self.client = StubTreq(root)

    async def get(self, path: str) -> tuple[int, str, object]:
        response = await self.client.get(f"https://example.test{path}")
        return response.code, (await response.text()), response.headers

    @defer.inlineCallbacks
    def test_all_pass_plain_ok(self):
        code, body, headers = yield defer.Deferred.fromCoroutine(self.get("/readyz"))
        self.assertEqual((code, body), (200, "ok"))
        self.assertEqual(headers.getRawHeaders(b"content-type"), [b"text/plain; charset=utf-8"])
        self.assertEqual(headers.getRawHeaders(b"x-content-type-options"), [b"nosniff"])

    @defer.inlineCallbacks
    def test_verbose_listing(self):
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/readyz?verbose"))
        self.assertEqual(code, 200)
        self.assertEqual(body, "[+]ping ok\n[+]log ok\n[+]shutdown ok\nreadyz check passed\n")
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/livez?verbose=1"))
        self.assertEqual(body, "[+]ping ok\n[+]log ok\nlivez check passed\n")

    @defer.inlineCallbacks
    def test_failure_withholds_reason(self):
        self.checks.add("etcd", _failing)
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/healthz"))
        self.assertEqual(code, 500)
        self.assertEqual(body, "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nhealthz check failed\n")

    @defer.inlineCallbacks
    def test_async_check(self):
        pending = defer.Deferred()
        self.checks.add("informer-sync", lambda: pending, kinds=("readyz",))
        response_d = self.client.get("https://example.test/readyz")
        self.assertNoResult(response_d)  # the answer waits for the check
        pending.errback(RuntimeError("late"))
        self.client.flush()
        response = yield response_d
        self.assertEqual(response.code, 500)
        body = yield response.text()
        self.assertIn("[-]informer-sync failed: reason withheld\n", body)
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/livez"))
        self.assertEqual((code, body), (200, "ok"))

    @defer.inlineCallbacks
    def test_exclude(self):
        self.checks.add("etcd", _failing)
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/healthz?verbose&exclude=etcd&exclude=nope"))
        self.assertEqual(code, 200)
        self.assertEqual(body, "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n"
                               'warn: some health checks cannot be excluded: no matches for "nope"\n'
                               "healthz check passed\n")

    @defer.inlineCallbacks
    def test_single_check(self):
        self.checks.add("etcd", _failing)
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/readyz/ping"))
        self.assertEqual((code, body), (200, "ok"))
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/readyz/etcd"))
        self.assertEqual((code, body), (500, "internal server error: database on fire\n"))
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/livez/shutdown"))
        self.assertEqual(code, 404)
        self.assertIn('"reason":"NotFound"', body)

    @defer.inlineCallbacks
    def test_check_name_with_slash(self):
        self.checks.add("poststarthook/bootstrap", lambda: None)
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/healthz/poststarthook/bootstrap"))
        self.assertEqual((code, body), (200, "ok"))

    @defer.inlineCallbacks
    def test_shutdown_fails_readyz_only(self):
        self.checks.begin_shutdown()
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/readyz"))
        self.assertEqual(code, 500)
        self.assertEqual(body, "[+]ping ok\n[+]log ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n")
        code, body, _ = yield defer.Deferred.fromCoroutine(self.get("/readyz/shutdown"))
        self.assertEqual((code, body), (500, "internal server error: process is shutting down\n"))
        code, _, _ = yield defer.Deferred.fromCoroutine(self.get("/livez"))
        self.assertEqual(code, 200)

    def test_duplicate_name_rejected(self):
        self.assertRaises(ValueError, self.checks.add, "ping", lambda: None)

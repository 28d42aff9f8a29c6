"""The audit backends: the rotated JSON-lines log and the batching webhook (a real HTTP server on loopback)."""
from __future__ import annotations

import datetime
import json
import os
import stat

import orjson
from twisted.internet import reactor
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.audit.metrics import AuditMetrics
from kapiserver.audit.log_backend import LogBackend, RotatingFile, backup_name
from kapiserver.audit.webhook_backend import WebhookBackend
from kapiserver.auth.webhook_kubeconfig import load_webhook_kubeconfig
from kapiserver.machinery.metrics import Registry
from kapiserver.testing.cases import run, sleep


def event(n: int) -> dict:
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "auditID": f"id-{n}", "stage": "ResponseComplete"}


def error_count(metrics: AuditMetrics, plugin: str) -> float:
    return metrics.errors.labels(plugin=plugin).value


class RotatingFileTests(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        self.path = os.path.join(self.dir, "logs", "audit.log")
        self.clock = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)

    def now(self) -> datetime.datetime:
        self.clock += datetime.timedelta(seconds=1)
        return self.clock

    def _file(self, **kwargs) -> RotatingFile:
        f = RotatingFile(self.path, now=self.now, **kwargs)
        f.max_bytes = 100  # megabytes are too many for a test
        self.addCleanup(f.close)
        return f

    def test_files_and_directories_are_private_whatever_the_umask(self):
        old = os.umask(0o022)
        try:
            f = self._file()
            f.write(b"x\n")
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(self.path)).st_mode), 0o700)

    def test_rotates_before_a_write_would_pass_the_size_and_keeps_lines_whole(self):
        f = self._file()
        lines = [(f"line {i:02d} " + "x" * 30 + "\n").encode() for i in range(10)]
        for line in lines:
            f.write(line)
        backups = f.backups()
        self.assertEqual(len(backups), 4)  # 10 lines of 40 bytes, two per 100-byte file
        written = b""
        for _, path in reversed(backups):
            with open(path, "rb") as b:
                content = b.read()
            self.assertLessEqual(len(content), 100)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
            written += content
        with open(self.path, "rb") as current:
            written += current.read()
        self.assertEqual(written, b"".join(lines))
        self.assertEqual(os.path.basename(backups[-1][1]), "audit-2024-05-01T12-00-01.000.log")

    def test_max_backups_and_max_age(self):
        f = self._file(max_backups=2)
        for i in range(12):
            f.write(b"y" * 40 + b"\n")
        self.assertEqual(len(f.backups()), 2)
        aged = self._file(max_age_days=1)
        old = backup_name(self.path, datetime.datetime(2024, 4, 1, tzinfo=datetime.timezone.utc))
        with open(old, "w") as stale:
            stale.write("old\n")
        for i in range(4):
            aged.write(b"z" * 40 + b"\n")
        self.assertFalse(os.path.exists(old))


class LogBackendTests(unittest.TestCase):
    @run
    async def test_events_become_json_lines(self):
        path = os.path.join(os.path.abspath(self.mktemp()), "audit.log")
        backend = LogBackend(path, reactor=reactor, metrics=AuditMetrics(Registry()))
        backend.check()
        backend.start()
        self.assertTrue(backend.process_events([event(1), event(2)]))
        await backend.shutdown()
        with open(path) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([e["auditID"] for e in lines], ["id-1", "id-2"])

    @run
    async def test_a_full_queue_refuses_and_counts(self):
        path = os.path.join(os.path.abspath(self.mktemp()), "audit.log")
        metrics = AuditMetrics(Registry())
        backend = LogBackend(path, reactor=reactor, queue_events=0, metrics=metrics)
        backend.start()
        self.assertFalse(backend.process_events([event(1)]))
        self.assertEqual(error_count(metrics, "log"), 1)
        await backend.shutdown()


class Collector(resource.Resource):
    """A webhook: records every EventList; answers ``codes`` in turn (then 200)."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.codes: list[int] = []
        self.attempts = 0

    def render_POST(self, request):
        self.attempts += 1
        code = self.codes.pop(0) if self.codes else 200
        request.setResponseCode(code)
        if code == 200:
            body = json.loads(request.content.read())
            assert body["kind"] == "EventList" and body["apiVersion"] == "audit.k8s.io/v1"
            self.batches.append([e["auditID"] for e in body["items"]])
        return b"{}"


class WebhookBackendTests(unittest.TestCase):
    def setUp(self):
        self.collector = Collector()
        self.port = reactor.listenTCP(0, server.Site(self.collector), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        kubeconfig = os.path.abspath(self.mktemp())
        with open(kubeconfig, "w") as f:
            f.write(f"apiVersion: v1\nkind: Config\nclusters:\n- name: sink\n  cluster:\n"
                    f"    server: http://127.0.0.1:{self.port.getHost().port}/audit\n"
                    f"users:\n- name: api\n  user: {{token: s3cret}}\n"
                    f"contexts:\n- name: c\n  context: {{cluster: sink, user: api}}\ncurrent-context: c\n")
        self.target = load_webhook_kubeconfig(kubeconfig)
        self.metrics = AuditMetrics(Registry())

    def backend(self, **kwargs) -> WebhookBackend:
        settings = dict(max_batch_size=3, max_batch_wait=0.2, throttle_qps=0, initial_backoff=0.05)
        settings.update(kwargs)
        b = WebhookBackend(self.target, reactor, **settings, metrics=self.metrics)
        b.start()
        self.addCleanup(b.shutdown, 0.2)
        return b

    def test_kubeconfig_gives_the_url_and_token(self):
        self.assertTrue(self.target.url.endswith("/audit"))
        self.assertEqual(self.target.headers["Authorization"], ["Bearer s3cret"])

    @run
    async def test_full_batches_go_at_once_and_the_rest_after_the_wait(self):
        b = self.backend(max_batch_wait=0.5)
        b.process_events([event(i) for i in range(4)])
        await self._until(lambda: len(self.collector.batches) == 1)
        self.assertEqual(self.collector.batches, [["id-0", "id-1", "id-2"]])
        await self._until(lambda: len(self.collector.batches) == 2)
        self.assertEqual(self.collector.batches[1], ["id-3"])

    @run
    async def test_failed_sends_are_retried(self):
        self.collector.codes = [500, 503, 429]
        b = self.backend()
        b.process_events([event(1)])
        await self._until(lambda: self.collector.batches == [["id-1"]], timeout=10)
        self.assertEqual(self.collector.attempts, 4)

    @run
    async def test_a_full_buffer_drops_and_counts_without_blocking(self):
        self.collector.codes = [500] * 100  # the webhook is down
        b = self.backend(buffer_size=5, max_batch_size=1, initial_backoff=10)
        for i in range(50):
            # accepted at once, never a Deferred to wait on: the request is not held up
            self.assertIs(b.process_events([event(i)]), True)
        # still within this reactor turn (no batch could be sent yet): the buffer is full and
        # every event beyond it was dropped and counted on the spot, not waited with
        self.assertEqual(len(b.buffer), 5)
        self.assertEqual(error_count(self.metrics, "buffered"), 45)
        await sleep(0.3)
        self.assertLessEqual(len(b.buffer), 5)
        self.assertGreaterEqual(error_count(self.metrics, "buffered"), 50 - 5 - 4)  # at most 4 batches in flight

    @run
    async def test_shutdown_sends_what_is_buffered(self):
        b = WebhookBackend(self.target, reactor, max_batch_size=100, max_batch_wait=60, throttle_qps=0,
                           metrics=self.metrics)
        b.start()
        b.process_events([event(7)])
        await b.shutdown()
        self.assertEqual(self.collector.batches, [["id-7"]])

    async def _until(self, check, timeout: float = 5.0) -> None:
        deadline = reactor.seconds() + timeout
        while not check():
            if reactor.seconds() > deadline:
                self.fail(f"not met in time: {self.collector.batches}")
            await sleep(0.02)


class EncodingTests(unittest.TestCase):
    def test_fragments_embed_objects_as_json(self):
        line = orjson.dumps({"requestObject": orjson.Fragment(b'{"a":1}')})
        self.assertEqual(json.loads(line), {"requestObject": {"a": 1}})




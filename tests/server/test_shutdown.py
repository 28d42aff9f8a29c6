"""Graceful shutdown: /readyz fails at once, in-flight requests get drain_seconds, then everything stops."""
from __future__ import annotations

from twisted.internet import defer, task
from twisted.trial import unittest

from kapiserver.server.config import config_from_dict
from kapiserver.server.service import KapiService


class _FakeAPIServer:
    def __init__(self) -> None:
        self.in_flight = 1
        self.stopped = False

    def requests_in_flight(self) -> int:
        return self.in_flight

    async def stop(self) -> None:
        self.stopped = True


class _FakeStorage:
    stopped = False

    def stop(self):
        self.stopped = True
        return defer.succeed(None)


class ShutdownTests(unittest.TestCase):
    def make(self, drain: float) -> tuple[KapiService, task.Clock]:
        clock = task.Clock()
        svc = KapiService(config_from_dict({"shutdown": {"drain_seconds": drain}}), bundle=None, reactor=clock, env={})
        svc.apiserver, svc.storage = _FakeAPIServer(), _FakeStorage()
        return svc, clock

    @defer.inlineCallbacks
    def test_waits_for_in_flight_requests(self):
        svc, clock = self.make(drain=10)
        done = svc.shutdown()
        readyz = yield defer.Deferred.fromCoroutine(svc.health.run_one("readyz", "shutdown"))
        self.assertEqual(str(readyz), "process is shutting down")
        clock.advance(1)
        self.assertNoResult(done)
        self.assertFalse(svc.apiserver.stopped)
        svc.apiserver.in_flight = 0
        clock.advance(0.1)
        yield done
        self.assertTrue(svc.apiserver.stopped)
        self.assertTrue(svc.storage.stopped)

    @defer.inlineCallbacks
    def test_gives_up_after_drain_seconds(self):
        svc, clock = self.make(drain=2)
        done = svc.shutdown()
        clock.advance(1.5)
        self.assertNoResult(done)
        clock.pump([0.1] * 6)
        yield done
        self.assertTrue(svc.apiserver.stopped)

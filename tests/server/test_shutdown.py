"""Graceful shutdown, step by step on a fake clock: /readyz fails at once, the server keeps serving
for shutdown.delay_seconds, then stops listening and taking requests, waits for the requests in
flight (bounded by drain_seconds), ends the watches, waits for the connections to write their last
bytes, and stops.  The same sequence against a real server process is in test_graceful_shutdown."""
from __future__ import annotations

from twisted.internet import defer, task
from twisted.trial import unittest

from kapiserver.server.config import config_from_dict
from kapiserver.app.service import FINAL_FLUSH_SECONDS, KapiService


class _FakeAPIServer:
    def __init__(self) -> None:
        self.in_flight = 1
        self.unfinished = 0
        self.steps: list[str] = []

    def requests_in_flight(self) -> int:
        return self.in_flight

    def begin_drain(self) -> None:
        self.steps.append("drain")

    def end_watches(self) -> None:
        self.steps.append("end watches")

    def unfinished_connections(self) -> int:
        return self.unfinished

    def abort_unfinished_connections(self) -> None:
        self.steps.append("abort")

    async def stop(self) -> None:
        self.steps.append("stop")


class _FakePort:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def stopListening(self):
        self.steps.append("stop listening")
        return defer.succeed(None)


class _FakeStorage:
    stopped = False

    def stop(self):
        self.stopped = True
        return defer.succeed(None)


class ShutdownTests(unittest.TestCase):
    def make(self, drain: float, delay: float = 0) -> tuple[KapiService, _FakeAPIServer, task.Clock]:
        clock = task.Clock()
        config = config_from_dict({"shutdown": {"drain_seconds": drain, "delay_seconds": delay}})
        svc = KapiService(config, bundle=None, reactor=clock, env={})
        api = _FakeAPIServer()
        svc.apiserver, svc.storage, svc.port = api, _FakeStorage(), _FakePort(api.steps)
        return svc, api, clock

    @defer.inlineCallbacks
    def test_waits_for_in_flight_requests_then_ends_watches(self):
        svc, api, clock = self.make(drain=10)
        done = svc.shutdown()
        readyz = yield defer.Deferred.fromCoroutine(svc.health.run_one("readyz", "shutdown"))
        self.assertEqual(str(readyz), "process is shutting down")
        self.assertEqual(api.steps, ["stop listening", "drain"])
        clock.advance(1)
        self.assertNoResult(done)
        api.in_flight = 0
        api.unfinished = 2  # a watch connection writing its last chunk, an answer going out
        clock.advance(0.1)
        self.assertEqual(api.steps, ["stop listening", "drain", "end watches"])
        self.assertNoResult(done)
        api.unfinished = 0
        clock.advance(0.1)
        yield done
        self.assertEqual(api.steps, ["stop listening", "drain", "end watches", "stop"])
        self.assertTrue(svc.storage.stopped)

    @defer.inlineCallbacks
    def test_gives_up_after_drain_seconds(self):
        svc, api, clock = self.make(drain=2)
        api.unfinished = 1
        done = svc.shutdown()
        clock.advance(1.5)
        self.assertNoResult(done)
        clock.pump([0.1] * 6)  # the drain time is over: watches end, connections get a last moment
        self.assertIn("end watches", api.steps)
        self.assertNoResult(done)
        clock.pump([0.1] * int(FINAL_FLUSH_SECONDS * 10 + 2))
        yield done
        self.assertEqual(api.steps[-2:], ["abort", "stop"])

    @defer.inlineCallbacks
    def test_keeps_serving_for_the_shutdown_delay(self):
        svc, api, clock = self.make(drain=5, delay=3)
        api.in_flight = 0
        done = svc.shutdown()
        self.assertTrue(svc.health.shutting_down)  # /readyz fails during the delay
        clock.advance(2.9)
        self.assertEqual(api.steps, [])  # still listening and serving
        clock.advance(0.2)
        self.assertEqual(api.steps[:2], ["stop listening", "drain"])
        clock.advance(0.1)
        yield done
        self.assertEqual(api.steps, ["stop listening", "drain", "end watches", "stop"])

"""The reconcile queue on a fake clock: a key added with delays is due at the earliest;
RetryLater retries with backoff as failures do, without their warning."""
from __future__ import annotations

from typing import Hashable

from twisted.internet.task import Clock
from twisted.logger import LogLevel, capturedLogs
from twisted.trial import unittest
from kapiserver.registry.queue import ReconcileQueue, RetryLater



class QueueTests(unittest.TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.runs: list[tuple[Hashable, float]] = []
        self.not_done: set = set()
        self.queue = ReconcileQueue("test", self.reconcile, self.clock)
        self.addCleanup(self.queue.stop)

    async def reconcile(self, key: Hashable) -> None:
        self.runs.append((key, self.clock.seconds()))
        if key in self.not_done:
            raise RetryLater("waiting")

    def test_the_earliest_of_two_delays_wins(self) -> None:
        self.queue.add("a", 100)
        self.queue.add("a", 10)   # earlier: replaces the first
        self.queue.add("a", 50)   # later than what is due: ignored
        self.clock.advance(9)
        self.assertEqual(self.runs, [])
        self.clock.advance(1)
        self.clock.advance(0)
        self.assertEqual(self.runs, [("a", 10)])
        self.clock.advance(200)
        self.assertEqual(self.runs, [("a", 10)])  # the replaced timers never fire

    def run_for(self, seconds: float, step: float = 0.05) -> None:
        for _ in range(round(seconds / step)):
            self.clock.advance(step)

    def test_retry_later_is_retried_with_growing_delays_without_a_warning(self) -> None:
        self.not_done.add("quiet")
        self.queue.add("quiet")
        with capturedLogs() as events:
            self.run_for(5)
        times = [t for key, t in self.runs if key == "quiet"]
        self.assertGreaterEqual(len(times), 4)
        gaps = [later - earlier for earlier, later in zip(times, times[1:])]
        self.assertGreaterEqual(gaps[0], 0.2)
        self.assertTrue(all(b > a for a, b in zip(gaps, gaps[1:])), gaps)  # backoff grows
        self.assertEqual([e for e in events if e["log_level"] >= LogLevel.warn], [])
        # done: no more retries
        self.not_done.clear()
        self.run_for(10)
        runs = len(self.runs)
        self.run_for(60, step=1)
        self.assertEqual(len(self.runs), runs)

    def test_a_failure_is_retried_with_a_warning(self) -> None:
        self.queue.reconcile = self.failing
        self.queue.add("c")
        with capturedLogs() as events:
            self.run_for(1)
        warnings = [e for e in events if e["log_level"] >= LogLevel.warn]
        self.assertGreaterEqual(len(warnings), 2)
        self.assertEqual(warnings[0]["err"], "storage unreachable")

    async def failing(self, key: Hashable) -> None:
        raise RuntimeError("storage unreachable")

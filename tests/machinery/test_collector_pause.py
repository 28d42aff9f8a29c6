"""The cyclic collector held off while large bodies are handled (machinery/collector_pause.py)."""
from __future__ import annotations

import gc

from twisted.internet.task import Clock
from twisted.trial import unittest

from kapiserver.machinery.collector_pause import LONGEST_PAUSE_SECONDS, CollectorPause


class CollectorPauseTests(unittest.TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.pause = CollectorPause()
        was_enabled = gc.isenabled()
        gc.enable()
        self.addCleanup(gc.enable if was_enabled else gc.disable)

    def test_held_until_the_last_release(self) -> None:
        self.pause.hold(self.clock)
        self.assertFalse(gc.isenabled())
        self.pause.hold(self.clock)
        self.pause.release()
        self.assertFalse(gc.isenabled(), "one request still holds it")
        self.pause.release()
        self.assertTrue(gc.isenabled())
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_collector_disabled_elsewhere_stays_disabled(self) -> None:
        gc.disable()
        self.pause.hold(self.clock)
        self.pause.release()
        self.assertFalse(gc.isenabled())

    def test_collects_again_after_the_longest_pause_whatever_still_holds_it(self) -> None:
        self.pause.hold(self.clock)
        self.clock.advance(LONGEST_PAUSE_SECONDS / 2)
        self.pause.hold(self.clock)
        self.pause.release()
        self.assertFalse(gc.isenabled())
        self.clock.advance(LONGEST_PAUSE_SECONDS / 2)  # the first hold is never released (a stuck request)
        self.assertTrue(gc.isenabled())
        self.pause.hold(self.clock)  # held since before: the collector keeps running
        self.assertTrue(gc.isenabled())
        self.pause.release()
        self.pause.release()
        self.assertTrue(gc.isenabled())
        self.pause.hold(self.clock)  # a new pause once every hold was released
        self.assertFalse(gc.isenabled())
        self.pause.release()
        self.assertTrue(gc.isenabled())

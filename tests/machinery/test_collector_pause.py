"""The cyclic collector held off while large bodies are handled (machinery/collector_pause.py)."""
from __future__ import annotations

import gc

from twisted.trial import unittest

from kapiserver.machinery.collector_pause import LONGEST_PAUSE_SECONDS, CollectorPause


class CollectorPauseTests(unittest.TestCase):
    def setUp(self) -> None:
        self.now = 100.0
        self.pause = CollectorPause(clock=lambda: self.now)
        was_enabled = gc.isenabled()
        gc.enable()
        self.addCleanup(gc.enable if was_enabled else gc.disable)

    def test_held_until_the_last_release(self) -> None:
        self.pause.hold()
        self.assertFalse(gc.isenabled())
        self.pause.hold()
        self.pause.release()
        self.assertFalse(gc.isenabled(), "one request still holds it")
        self.pause.release()
        self.assertTrue(gc.isenabled())

    def test_a_collector_disabled_elsewhere_stays_disabled(self) -> None:
        gc.disable()
        self.pause.hold()
        self.pause.release()
        self.assertFalse(gc.isenabled())

    def test_collects_again_when_holds_follow_one_another_too_long(self) -> None:
        self.pause.hold()
        self.now += LONGEST_PAUSE_SECONDS / 2
        self.pause.hold()
        self.pause.release()
        self.assertFalse(gc.isenabled())
        self.now += LONGEST_PAUSE_SECONDS
        self.pause.hold()  # still held since the first: long enough
        self.assertTrue(gc.isenabled())
        self.pause.release()
        self.pause.release()
        self.assertTrue(gc.isenabled())
        self.pause.hold()  # a new pause once every hold was released
        self.assertFalse(gc.isenabled())
        self.pause.release()
        self.assertTrue(gc.isenabled())

"""The fault tests' checks (kapiserver.testing.faultload.check) catch what they are there to catch.

Records made up here, no server: a watch that misses an acknowledged write, sees one twice or out of
order, or shows other content; a stored object that lost its last acknowledged content; a 5xx outside
every fault's window.  And what must pass does: a write whose answer was lost, a relist after 410.
"""
from __future__ import annotations

import threading

from twisted.trial import unittest

from kapiserver.testing import faultload
from kapiserver.testing.faultload import Attempt, Event, Relist


class CheckTests(unittest.TestCase):
    def setUp(self) -> None:
        self.recorder = faultload.Recorder()
        stop = threading.Event()
        self.writer = faultload.Writer(0, [], "ns", self.recorder, faultload.Progress(1), stop)
        self.writer.attempts = [Attempt("a", "0", True, True, 11), Attempt("b", "1", True, True, 12),
                                Attempt("a", "2", False, True, 13), Attempt("a", "3", False, False)]
        self.watcher = faultload.Watcher(0, [], "ns", 10, self.recorder, stop)
        self.watcher.events = [Event("ADDED", "a", 11, "0"), Event("ADDED", "b", 12, "1"),
                               Event("MODIFIED", "a", 13, "2")]
        self.final: dict[str, tuple[int, str | None]] = {"a": (13, "2"), "b": (12, "1")}

    def check(self) -> faultload.Findings:
        return faultload.check([self.writer], [self.watcher], self.final, self.recorder)

    def test_a_complete_run_passes(self):
        found = self.check()
        self.assertEqual((found.lost_writes, found.watch_violations, found.errors_outside), ([], [], []))
        self.assertEqual((found.acknowledged, found.unacknowledged, found.events), (3, 1, 3))

    def test_a_write_whose_answer_was_lost_may_be_what_is_stored(self):
        self.final["a"] = (14, "3")  # the unacknowledged attempt after the last acknowledged one
        self.watcher.events.append(Event("MODIFIED", "a", 14, "3"))
        self.assertEqual(self.check().lost_writes, [])

    def test_a_lost_acknowledged_write(self):
        self.final["a"] = (11, "0")
        self.assertEqual(len(self.check().lost_writes), 1)
        del self.final["b"]
        self.assertEqual(len(self.check().lost_writes), 2)

    def test_a_missed_event(self):
        del self.watcher.events[1]
        self.assertEqual(len(self.check().watch_violations), 1)

    def test_a_repeated_or_reordered_event(self):
        self.watcher.events.insert(2, Event("ADDED", "b", 12, "1"))
        self.assertEqual(len(self.check().watch_violations), 1)
        self.watcher.events = [self.watcher.events[1], self.watcher.events[0], self.watcher.events[3]]
        self.assertEqual(len(self.check().watch_violations), 1)

    def test_an_event_with_other_content_or_type(self):
        self.watcher.events[2] = Event("MODIFIED", "a", 13, "0")
        self.assertEqual(len(self.check().watch_violations), 1)
        self.watcher.events[2] = Event("ADDED", "a", 13, "2")
        self.assertEqual(len(self.check().watch_violations), 1)

    def test_a_relist_covers_what_it_lists_and_nothing_else(self):
        del self.watcher.events[:2]
        self.watcher.relists = [Relist(10, 12, {"a": (11, "0"), "b": (12, "1")})]
        self.assertEqual(self.check().watch_violations, [])
        self.watcher.relists = [Relist(10, 12, {"a": (11, "0")})]  # b's creation is in no list, no event
        self.assertEqual(len(self.check().watch_violations), 1)

    def test_writes_before_the_watch_began_are_not_asked_of_it(self):
        self.watcher.start_version = 12
        del self.watcher.events[:2]
        self.assertEqual(self.check().watch_violations, [])

    def test_5xx_inside_and_outside_the_windows(self):
        with self.recorder.window("fault") as window:
            self.recorder.server_error(window.start, 503, "inside")
        self.recorder.server_error(window.end + 1, 500, "after", ended=window.end + 3)
        self.recorder.server_error(window.start - 2, 500, "before", ended=window.start - 1)
        found = self.check()
        self.assertEqual(found.errors_in_windows, {"fault": 1})
        self.assertEqual([e.split(" (")[0] for e in found.errors_outside], ["500 after", "500 before"])
        self.assertIn("1.0s after the window 'fault', answered 2.0s later", found.errors_outside[0])

    def test_a_request_in_flight_when_a_fault_began_is_inside_its_window(self):
        """A write sent a moment before the etcd leader is killed may be the one the kill breaks."""
        with self.recorder.window("leader killed") as window:
            pass
        self.recorder.server_error(window.start - 0.05, 500, "sent just before", ended=window.start + 5)
        self.recorder.server_error(window.end - 1, 500, "answered after", ended=window.end + 9)
        found = self.check()
        self.assertEqual((found.errors_in_windows, found.errors_outside), ({"leader killed": 2}, []))

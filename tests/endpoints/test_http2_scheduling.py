"""The HTTP/2 write scheduler: streams with data to send take turns (x/net/http2's round robin)."""
from __future__ import annotations

import priority
from twisted.trial import unittest

from kapiserver.endpoints.connection.http2 import RoundRobinStreams


class RoundRobinStreamsTests(unittest.TestCase):
    def opened(self, *ids: int) -> RoundRobinStreams:
        streams = RoundRobinStreams()
        for stream_id in ids:
            streams.insert_stream(stream_id)
            streams.block(stream_id)  # as Twisted opens them: nothing to send yet
        return streams

    def test_streams_with_data_take_turns_and_idle_ones_are_passed_over(self):
        streams = self.opened(1, 3, 5, 7, 9)
        for stream_id in (3, 7, 9):
            streams.unblock(stream_id)
        self.assertEqual([next(streams) for _ in range(6)], [3, 7, 9, 3, 7, 9])
        streams.block(7)  # its data went out
        streams.unblock(1)
        self.assertEqual([next(streams) for _ in range(3)], [3, 9, 1])

    def test_a_stream_unblocked_again_keeps_its_place(self):
        streams = self.opened(1, 3)
        streams.unblock(1)
        streams.unblock(3)
        streams.unblock(1)  # more data queued on a stream already waiting for its turn
        self.assertEqual([next(streams), next(streams)], [1, 3])

    def test_nothing_to_send_is_a_deadlock_twisted_waits_on(self):
        streams = self.opened(1)
        with self.assertRaises(priority.DeadlockError):
            next(streams)
        streams.unblock(1)
        streams.remove_stream(1)
        with self.assertRaises(priority.DeadlockError):
            next(streams)

    def test_unknown_and_duplicate_streams_are_refused_as_the_priority_tree_refuses_them(self):
        streams = self.opened(1)
        with self.assertRaises(priority.DuplicateStreamError):
            streams.insert_stream(1)
        for call in (streams.block, streams.unblock, streams.remove_stream):
            with self.assertRaises(priority.MissingStreamError):
                call(2)

    def test_priority_signals_are_ignored_and_not_kept_for_streams_not_open(self):
        streams = self.opened(1, 3)
        for stream_id in range(5, 20_000, 2):  # PRIORITY frames for streams never opened
            streams.reprioritize(stream_id, depends_on=1, weight=256, exclusive=True)
        streams.reprioritize(3, depends_on=1, weight=1)
        streams.unblock(1)
        streams.unblock(3)
        self.assertEqual([next(streams) for _ in range(4)], [1, 3, 1, 3])
        with self.assertRaises(priority.MissingStreamError):
            streams.block(5)
        streams.insert_stream(5)  # opened later, as any other stream: its turn after theirs
        self.assertEqual([next(streams) for _ in range(3)], [1, 3, 5])

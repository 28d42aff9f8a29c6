"""The fair queue set of one priority level, on a fake clock."""
from __future__ import annotations

from twisted.internet import task
from twisted.trial import unittest

from kapiserver.flowcontrol.queueset import (CANCELLED, EXECUTING, REJECTED, WAITING, QueueSet, WorkEstimate,
                                             format_seat_seconds)
from kapiserver.flowcontrol.shuffle_sharding import Dealer, required_entropy_bits

ONE = WorkEstimate(1)


def queue_set(queues: int, hand: int, length: int, limit: int) -> tuple[QueueSet, task.Clock]:
    clock = task.Clock()
    qs = QueueSet("test", clock.seconds, clock.callLater)
    qs.configure(queues, hand, length, limit)
    return qs, clock


class QueueSetTests(unittest.TestCase):
    def test_runs_up_to_the_limit_then_queues_then_rejects(self):
        qs, _ = queue_set(1, 1, 2, 1)
        first = qs.start_request(ONE, 7, "fs", "alice")
        self.assertEqual(first.state, EXECUTING)
        self.assertTrue(first.dispatched.called)
        waiting = [qs.start_request(ONE, 7, "fs", "alice") for _ in range(2)]
        self.assertEqual([w.state for w in waiting], [WAITING, WAITING])
        self.assertIsNone(qs.start_request(ONE, 7, "fs", "alice"))  # the queue is full
        self.assertEqual((qs.executing, qs.waiting, qs.rejected_total), (1, 2, 1))
        qs.finish(first)
        self.assertEqual(waiting[0].state, EXECUTING)
        self.assertTrue(waiting[0].dispatched.called)
        self.assertFalse(waiting[1].dispatched.called)
        self.assertEqual(qs.dispatched_total, 2)

    def test_a_quiet_flow_is_served_before_a_flooding_one_has_drained(self):
        qs, clock = queue_set(64, 1, 100, 1)
        hog = [qs.start_request(ONE, 1, "fs", "hog") for _ in range(30)]
        clock.advance(0.01)
        polite = qs.start_request(ONE, 2 ** 40 + 12345, "fs", "polite")
        self.assertEqual(polite.state, WAITING)
        self.assertIsNot(polite.queue, hog[1].queue)  # another flow, another queue
        served = []
        running = [r for r in hog if r.state == EXECUTING]
        for _ in range(5):
            clock.advance(0.003)
            qs.finish(running[0])
            running = [r for r in hog + [polite] if r.state == EXECUTING]
            served.append(running[0])
        self.assertIn(polite, served[:2])  # not after the 29 requests of the hog

    def test_flows_waiting_alike_are_served_in_turn(self):
        # three flows, each with requests in its own queue (hand of one): the seat goes
        # round robin among them, never twice in a row to one while the others wait
        qs, clock = queue_set(16, 1, 100, 1)
        blocker = qs.start_request(ONE, 0, "fs", "blocker")
        flows = {name: [qs.start_request(ONE, value, "fs", name) for _ in range(3)]
                 for name, value in (("a", 3), ("b", 7), ("c", 11))}
        self.assertEqual(len({reqs[0].queue.index for reqs in flows.values()}), 3)
        order = []
        running = blocker
        for _ in range(9):
            clock.advance(0.001)
            qs.finish(running)
            running = next(r for reqs in flows.values() for r in reqs if r.state == EXECUTING)
            order.append(next(name for name, reqs in flows.items() if running in reqs))
        self.assertEqual(sorted(order[:3]), ["a", "b", "c"])
        self.assertEqual(order[3:6], order[:3])
        self.assertEqual(order[6:], order[:3])
        self.assertEqual(qs.current_r > 0, True)  # virtual time went on while queues were busy

    def test_a_request_may_wait_no_longer_than_it_wants(self):
        qs, _ = queue_set(1, 1, 5, 1)
        qs.start_request(ONE, 1, "fs", "a")
        waiting = qs.start_request(ONE, 1, "fs", "a")
        qs.cancel(waiting)
        self.assertEqual(waiting.state, CANCELLED)
        self.assertEqual((qs.waiting, qs.rejected_total, qs.cancelled_total), (0, 1, 1))
        self.assertFalse(waiting.dispatched.called)

    def test_wide_requests_take_several_seats(self):
        qs, _ = queue_set(8, 2, 10, 4)
        wide = qs.start_request(WorkEstimate(3), 1, "fs", "a")
        other = qs.start_request(WorkEstimate(3), 2, "fs", "b")
        self.assertEqual((wide.state, other.state), (EXECUTING, WAITING))
        self.assertEqual(qs.seats_in_use, 3)
        small = qs.start_request(ONE, 3, "fs", "c")
        # it would finish first in virtual time, and it fits in the seat left
        self.assertEqual(small.state, EXECUTING)
        self.assertEqual(other.state, WAITING)
        qs.finish(wide)
        self.assertEqual(other.state, EXECUTING)
        self.assertEqual(qs.seats_in_use, 4)
        # a request wider than the whole level runs alone
        huge = qs.start_request(WorkEstimate(9), 4, "fs", "d")
        self.assertEqual(huge.state, WAITING)
        qs.finish(other)
        qs.finish(small)
        self.assertEqual(huge.state, EXECUTING)

    def test_final_seats_stay_taken_for_the_additional_latency(self):
        qs, clock = queue_set(1, 1, 10, 2)
        write = qs.start_request(WorkEstimate(1, 2, 0.5), 1, "fs", "a")
        qs.finish(write)
        self.assertEqual(qs.seats_in_use, 2)
        clock.advance(0.5)
        self.assertEqual(qs.seats_in_use, 0)

    def test_reject_levels_have_no_queues(self):
        qs, _ = queue_set(0, 0, 0, 2)
        a, b = qs.start_request(ONE, 1, "fs", ""), qs.start_request(ONE, 2, "fs", "")
        self.assertEqual((a.state, b.state), (EXECUTING, EXECUTING))
        self.assertIsNone(qs.start_request(ONE, 3, "fs", ""))
        qs.finish(a)
        self.assertEqual(qs.start_request(ONE, 3, "fs", "").state, EXECUTING)
        self.assertEqual(qs.queues, [])

    def test_the_exempt_level_runs_everything(self):
        qs, _ = queue_set(-1, 0, 0, 0)
        requests = [qs.start_request(WorkEstimate(10), i, "exempt", "") for i in range(100)]
        self.assertTrue(all(r.state == EXECUTING for r in requests))
        self.assertEqual(len(qs.queueless), 100)

    def test_fewer_queues_drop_the_empty_ones(self):
        qs, _ = queue_set(8, 2, 10, 1)
        qs.configure(4, 2, 10, 1)
        self.assertEqual([q.index for q in qs.queues], [0, 1, 2, 3])

    def test_seat_seconds_print_as_upstream(self):
        self.assertEqual(format_seat_seconds(0), "0.00000000ss")
        self.assertEqual(format_seat_seconds(300000), "0.00300000ss")
        self.assertEqual(format_seat_seconds(12 * 10 ** 8 + 5), "12.00000005ss")


class ShuffleShardingTests(unittest.TestCase):
    def test_hands_are_distinct_cards_of_the_deck_and_stable(self):
        dealer = Dealer(128, 6)
        for value in (0, 1, 2 ** 63 - 1, 2 ** 64 - 1, 123456789):
            hand = dealer.deal(value)
            self.assertEqual(len(set(hand)), 6)
            self.assertTrue(all(0 <= c < 128 for c in hand))
            self.assertEqual(hand, dealer.deal(value))
        self.assertNotEqual(dealer.deal(1), dealer.deal(2))

    def test_upstream_limits(self):
        self.assertEqual(required_entropy_bits(128, 6), 42)
        with self.assertRaises(ValueError):
            Dealer(4, 5)
        with self.assertRaises(ValueError):
            Dealer(1 << 20, 4)  # 80 bits of entropy: more than the hash has

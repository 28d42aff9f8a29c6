"""Fair queuing for one priority level (upstream's fairqueuing/queueset).

A queue set runs at most ``concurrency_limit`` seats of requests at once.
What it cannot run yet waits in one of its queues: a flow (one flow schema
and distinguisher, e.g. one user) is dealt a hand of ``hand_size`` queues by
shuffle sharding and its request joins the one with the least work waiting,
unless that queue already holds ``queue_length_limit`` requests (then the
request is rejected).  Dispatch is fair queuing by virtual time: the set's
virtual clock ``current_r`` advances at the rate each active queue would get
its share of the seats, every queue has the virtual time at which its next
request may start (``next_dispatch_r``), and the queue whose oldest request
would finish first in virtual time goes next.  Work is counted in
seat-seconds with upstream's fixed-point scale, so the dumps read the same.

A set with no queues (``desired_queues`` 0: limitResponse Reject) runs a
request at once or rejects it; the exempt level (``desired_queues`` -1) runs
everything at once.  Everything here runs on the reactor thread: no locks.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

from twisted.internet import defer

from kapiserver.flowcontrol.shuffle_sharding import Dealer

SS_SCALE = 10 ** 8  # seat-seconds are fixed point: SS_SCALE units per seat-second
ESTIMATED_SERVICE_SECONDS = 0.003

WAITING, EXECUTING, FINISHED, REJECTED, CANCELLED = "waiting", "executing", "finished", "rejected", "cancelled"


def seats_times_duration(seats: float, seconds: float) -> int:
    return int(round(seats * seconds * SS_SCALE))


def format_seat_seconds(value: int) -> str:
    """SeatSeconds.String(): ``<whole>.<8 digits>ss``."""
    value = max(value, 0)
    return f"{value // SS_SCALE}.{value % SS_SCALE:08d}ss"


class WorkEstimate(NamedTuple):
    """Seats a request occupies while it runs, and after (``final_seats`` for
    ``additional_latency`` seconds: a write's watch notifications)."""

    initial_seats: int = 1
    final_seats: int = 0
    additional_latency: float = 0.0

    @property
    def max_seats(self) -> int:
        return max(self.initial_seats, self.final_seats)


@dataclass(eq=False)
class Request:
    fs_name: str
    distinguisher: str
    estimate: WorkEstimate
    total_work: int
    arrival_time: float  # wall clock, seconds since the epoch (only the debug dump shows it)
    arrival_r: int
    details: Any = None  # who and what (the dump's request details)
    queue: Optional["Queue"] = None
    start_time: Optional[float] = None
    started_at: float = 0.0
    state: str = WAITING
    # fires once the request may run (never for a rejected or cancelled one)
    dispatched: defer.Deferred = field(default_factory=defer.Deferred)


@dataclass(eq=False, slots=True)
class Queue:
    index: int
    waiting: list = field(default_factory=list)
    # its running requests, a dict used as a set: an empty dict is 64 bytes against an empty set's
    # 216, and a server keeps about 500 queues (16 to 128 per bootstrap priority level) mostly idle
    executing: dict[Request, None] = field(default_factory=dict)
    next_dispatch_r: int = 0
    seats_in_use: int = 0
    initial_seats_sum: int = 0
    max_seats_sum: int = 0
    total_work_sum: int = 0

    def enqueue(self, request: Request) -> None:
        self.waiting.append(request)
        self.initial_seats_sum += request.estimate.initial_seats
        self.max_seats_sum += request.estimate.max_seats
        self.total_work_sum += request.total_work

    def remove(self, request: Request) -> bool:
        try:
            self.waiting.remove(request)
        except ValueError:
            return False
        self.initial_seats_sum -= request.estimate.initial_seats
        self.max_seats_sum -= request.estimate.max_seats
        self.total_work_sum -= request.total_work
        return True

    def busy(self) -> bool:
        return bool(self.waiting or self.executing)


class QueueSet:
    def __init__(self, name: str, clock: Callable[[], float], call_later: Callable[..., Any],
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.clock = clock
        self.call_later = call_later
        self.wall_clock = wall_clock
        self.desired_queues = 0
        self.hand_size = 0
        self.queue_length_limit = 0
        self.concurrency_limit = 0
        self.dealer: Optional[Dealer] = None
        self.queues: list[Queue] = []
        # the queues that may hold seats or waiting requests (see _virtual_time_ratio)
        self._active_queues: set[Queue] = set()
        self.queueless: set[Request] = set()
        self.current_r = 0
        self.last_time = clock()
        self.robin_index = -1
        self.enqueues = 0
        self.waiting = 0
        self.executing = 0
        self.seats_in_use = 0
        self.seats_waiting = 0
        self.dispatched_total = 0
        self.rejected_total = 0
        self.timedout_total = 0  # upstream counts queue timeouts as cancelled (this stays 0, as there)
        self.cancelled_total = 0
        # for the metrics: by flow schema, and by (flow schema, reason) for rejections
        self.dispatched_by_schema: Counter[str] = Counter()
        self.rejected_by_schema: Counter[tuple[str, str]] = Counter()
        # called when the set becomes idle (a level being removed can then go)
        self.on_idle: Optional[Callable[[], None]] = None

    # ------------------------------------------------------------ configuration

    def configure(self, desired_queues: int, hand_size: int, queue_length_limit: int,
                  concurrency_limit: int) -> None:
        """``desired_queues`` > 0: queuing; 0: reject what does not fit; -1: exempt (no limit)."""
        self.sync_time()
        if desired_queues > 0:
            self.dealer = Dealer(desired_queues, hand_size)
            while len(self.queues) < desired_queues:
                self.queues.append(Queue(len(self.queues)))
            self.hand_size = hand_size
            self.queue_length_limit = queue_length_limit
        else:
            self.dealer = None
        self.desired_queues = desired_queues
        self.concurrency_limit = concurrency_limit
        self._remove_idle_surplus_queues()
        self._dispatch_as_much_as_possible()

    # ------------------------------------------------------------ virtual time

    def sync_time(self) -> None:
        now = self.clock()
        if self._active_queues:  # otherwise the ratio is 0 (always on exempt and reject levels)
            elapsed = max(now - self.last_time, 0.0)
            self.current_r += seats_times_duration(self._virtual_time_ratio(), elapsed)
        self.last_time = now

    def _virtual_time_ratio(self) -> float:
        # upstream sums over every queue; a queue contributes only from its first enqueue
        # until it is idle again, so only those (``_active_queues``) are walked: with
        # 64-128 queues per level, walking them all three times per request cost more
        # than the rest of the request's flow control
        active = 0
        requested = 0
        idle: list[Queue] = []
        for queue in self._active_queues:
            queue_requested = queue.seats_in_use + queue.max_seats_sum
            requested += queue_requested
            if queue.busy():
                active += 1
            elif not queue_requested:
                idle.append(queue)
        self._active_queues.difference_update(idle)
        if not active:
            return 0.0
        return min(requested, self.concurrency_limit) / active

    # ------------------------------------------------------------ requests

    def start_request(self, estimate: WorkEstimate, hash_value: int, fs_name: str, distinguisher: str,
                      details: Any = None) -> Optional[Request]:
        """A request that runs now (``dispatched`` has fired) or waits in a queue; None when rejected."""
        self.sync_time()
        request = Request(fs_name, distinguisher, estimate, self._total_work(estimate), self.wall_clock(),
                          self.current_r, details)
        if self.desired_queues < 1:
            if not self._can_accommodate(estimate.max_seats):
                self.rejected_total += 1
                self.rejected_by_schema[(fs_name, "concurrency-limit")] += 1
                request.state = REJECTED
                return None
            self._start_executing(request, None)
            self.queueless.add(request)
            return request
        assert self.dealer is not None
        queue = self._shuffle_shard(hash_value)
        request.queue = queue
        if self.seats_in_use >= self.concurrency_limit and len(queue.waiting) >= self.queue_length_limit:
            self.rejected_total += 1
            self.rejected_by_schema[(fs_name, "queue-full")] += 1
            request.state = REJECTED
            return None
        if not queue.busy():
            queue.next_dispatch_r = self.current_r
        queue.enqueue(request)
        self._active_queues.add(queue)
        self.waiting += 1
        self.seats_waiting += estimate.max_seats
        self._bound_next_dispatch(queue)
        self._dispatch_as_much_as_possible()
        return request

    def _total_work(self, estimate: WorkEstimate) -> int:
        return (seats_times_duration(estimate.initial_seats, ESTIMATED_SERVICE_SECONDS)
                + seats_times_duration(estimate.final_seats, estimate.additional_latency))

    def _shuffle_shard(self, hash_value: int) -> Queue:
        assert self.dealer is not None
        hand = self.dealer.deal(hash_value)
        offset = self.enqueues % len(hand)
        self.enqueues += 1
        best: Optional[Queue] = None
        for i in range(len(hand)):
            queue = self.queues[hand[(offset + i) % len(hand)]]
            if best is None or queue.total_work_sum < best.total_work_sum:
                best = queue
        assert best is not None
        return best

    def cancel(self, request: Request) -> None:
        """A waiting request gives up (its wait timed out, or its client left)."""
        if request.state != WAITING:
            return
        self.sync_time()
        queue = request.queue
        request.state = CANCELLED
        if queue is not None and queue.remove(request):
            self.waiting -= 1
            self.seats_waiting -= request.estimate.max_seats
            self.rejected_total += 1
            self.cancelled_total += 1
            self.rejected_by_schema[(request.fs_name, "time-out")] += 1
            self._bound_next_dispatch(queue)
            self._remove_idle_surplus_queues()
        self._note_idle()

    def finish(self, request: Request) -> None:
        """A running request is done: its seats go back (after ``additional_latency`` for final seats)."""
        if request.state != EXECUTING:
            return
        self.sync_time()
        request.state = FINISHED
        self.executing -= 1
        actual = self.clock() - request.started_at
        queue = request.queue
        if queue is not None:
            queue.executing.pop(request, None)
            queue.next_dispatch_r -= seats_times_duration(request.estimate.initial_seats,
                                                          ESTIMATED_SERVICE_SECONDS - actual)
            self._bound_next_dispatch(queue)
        else:
            self.queueless.discard(request)
        if request.estimate.additional_latency > 0 and request.estimate.final_seats:
            self.call_later(request.estimate.additional_latency, self._release, request)
        else:
            self._release(request)

    def _release(self, request: Request) -> None:
        self.sync_time()
        seats = request.estimate.max_seats
        self.seats_in_use -= seats
        if request.queue is not None:
            request.queue.seats_in_use -= seats
        self._remove_idle_surplus_queues()
        self._dispatch_as_much_as_possible()
        self._note_idle()

    def _note_idle(self) -> None:
        if self.is_idle() and self.on_idle is not None:
            self.on_idle()

    def is_idle(self) -> bool:
        return self.waiting == 0 and self.executing == 0

    # ------------------------------------------------------------ dispatch

    def _can_accommodate(self, seats: int) -> bool:
        if self.desired_queues < 0:
            return True
        if seats > self.concurrency_limit:
            return self.executing == 0
        return self.seats_in_use + seats <= self.concurrency_limit

    def _start_executing(self, request: Request, queue: Optional[Queue]) -> None:
        request.state = EXECUTING
        request.start_time = self.wall_clock()
        request.started_at = self.clock()
        self.executing += 1
        self.dispatched_total += 1
        self.dispatched_by_schema[request.fs_name] += 1
        seats = request.estimate.max_seats
        self.seats_in_use += seats
        if queue is not None:
            queue.executing[request] = None
            queue.seats_in_use += seats
        request.dispatched.callback(None)

    def _dispatch_as_much_as_possible(self) -> None:
        while self.waiting and self.seats_in_use < self.concurrency_limit and self._dispatch_one():
            pass

    def _dispatch_one(self) -> bool:
        # the queue whose head finishes first in virtual time; among equals, the first
        # after the last one served, round robin (only queues with waiting requests count)
        best: Optional[Queue] = None
        best_key = (0, 0)
        count = len(self.queues)
        for queue in self._active_queues:
            if not queue.waiting:
                continue
            key = (queue.next_dispatch_r + queue.waiting[0].total_work, (queue.index - self.robin_index - 1) % count)
            if best is None or key < best_key:
                best, best_key = queue, key
        if best is None:
            return False
        best_index = best.index
        request = best.waiting[0]
        if not self._can_accommodate(request.estimate.max_seats):
            return False
        best.remove(request)
        self.robin_index = best_index
        self.waiting -= 1
        self.seats_waiting -= request.estimate.max_seats
        best.next_dispatch_r += request.total_work
        self._start_executing(request, best)
        self._bound_next_dispatch(best)
        return True

    def _bound_next_dispatch(self, queue: Queue) -> None:
        """A queue's virtual start never lags behind the arrival of its oldest waiting request."""
        if queue.waiting and queue.next_dispatch_r < queue.waiting[0].arrival_r:
            queue.next_dispatch_r = queue.waiting[0].arrival_r

    def _remove_idle_surplus_queues(self) -> None:
        """Queues beyond the desired number go once they are empty (indexes renumbered)."""
        if len(self.queues) <= max(self.desired_queues, 0):
            return
        kept: list[Queue] = []
        for queue in self.queues:
            if len(kept) >= max(self.desired_queues, 0) and not queue.busy():
                continue
            kept.append(queue)
        if len(kept) != len(self.queues):
            for i, queue in enumerate(kept):
                queue.index = i
            self.queues = kept
            self.robin_index = min(self.robin_index, len(kept) - 1)

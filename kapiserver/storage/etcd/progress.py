"""Progress requests on one etcd watch stream, and which answer proves what: ``ProgressRequests``.

A consistent read may be answered from the watch cache once etcd said, on the
cache's own watch stream, that every event up to a revision R was sent, R
being etcd's revision at some moment after the read began.  etcd says so when
asked (``{"progress_request": {}}``, RequestWatchProgress): its answer comes
on the stream after the events it covers, with its current revision.

Two things make the bookkeeping careful.  An answer names no request.  And
etcd drops a request without a word when a watcher of the stream is not in
sync (a watch created from a past revision, until etcd's sync loop, every
100 ms, catches it up; or one whose send queue was full).  What holds is
order: etcd reads a stream's requests one by one and queues each answer
behind the events before it, so the answers come in the order of the
requests they answer, some requests having none.  Hence the k-th answer on a
stream answers request k or a later one, never an earlier one.  A read that
began when s requests had been sent is proven by an answer with ordinal
k > s: its request was sent after the read began.  The rule holds whatever
etcd dropped; drops only make reads wait for more answers.

One request is out at a time; reads that arrive meanwhile are proven by the
answer to the next one (which batches reads under load, as ``read_batch``
does for GETs).  A request unanswered after ``timeout`` fails the reads
waiting for it (they read etcd instead) and lets the next read send a new
one; after ``max_timeouts`` on one stream the watch replaces the stream, so
that the dropped requests do not make every later read wait for extra
answers.  A new stream's watcher is behind when its start revision is not
past etcd's revision at creation: then no request is sent for ``warm_up``
seconds (the reads read etcd), as it would likely be dropped.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger

from kapiserver.storage.interface import StorageError

log = Logger()

REQUEST: dict = {"progress_request": {}}
# An answer takes a round trip plus the events queued before it (milliseconds on loopback).
TIMEOUT = 0.1
MAX_TIMEOUTS = 3
# etcd syncs a watcher created from a past revision within its 100 ms sync loop.
WARM_UP = 0.15


class ProgressRequests:
    """The progress requests of one watch stream: ``send(document)`` writes to it.

    ``request()`` fires with a revision once an answer proves it (see the
    module docstring), or fails with StorageError (the caller reads etcd).
    ``on_stale()`` is called once after ``max_timeouts`` unanswered requests.
    """

    def __init__(self, send: Callable[[dict], None], clock, on_stale: Callable[[], None],
                 timeout: float = TIMEOUT, max_timeouts: int = MAX_TIMEOUTS, warm_up: float = WARM_UP) -> None:
        self._send = send
        self._clock = clock
        self._on_stale = on_stale
        self.timeout = timeout
        self.max_timeouts = max_timeouts
        self.warm_up = warm_up
        self.sent = 0
        self.answers = 0
        self.timeouts = 0
        self._ready_at: Optional[float] = None  # set once etcd created the watch
        # the timer of the request on its way (its answer or its timeout pending), if one is
        self._timer: Optional[IDelayedCall] = None
        self._waiters: list[tuple[int, defer.Deferred]] = []  # (the answer ordinal that proves it, d)
        self._closed = False

    def created(self, etcd_revision: int, start_revision: int) -> None:
        """etcd created the stream's watch at ``etcd_revision``, asked to start at ``start_revision``."""
        behind = start_revision <= etcd_revision
        self._ready_at = self._clock.seconds() + (self.warm_up if behind else 0.0)

    def request(self) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        if self._closed or self._ready_at is None:
            d.errback(StorageError("the etcd watch stream is not open"))
        elif self._clock.seconds() < self._ready_at:
            d.errback(StorageError("the etcd watch is catching up; etcd would not answer a progress request"))
        elif self._timer is not None:
            self._waiters.append((self.sent + 1, d))  # an answer to a request sent from now on
        else:
            self._send_request()
            self._waiters.append((self.sent, d))
        return d

    def answered(self, revision: int) -> None:
        """etcd's answer to a progress request arrived (after every event up to ``revision``)."""
        self.answers += 1
        self._stop_timer()
        proven = [d for need, d in self._waiters if need <= self.answers]
        self._waiters = [(need, d) for need, d in self._waiters if need > self.answers]
        if self._waiters and not self._closed:
            # every remaining waiter is proven by this one's answer unless etcd dropped requests
            self._send_request()
        for d in proven:
            d.callback(revision)

    def close(self, why: str = "the etcd watch stream ended before etcd answered a progress request") -> None:
        """The stream is gone: fail every waiting read."""
        self._closed = True
        self._fail(why)

    # ------------------------------------------------------------ internals

    def _send_request(self) -> None:
        # whoever waits has a request out, with its timer (one timer: the latest request's)
        self.sent += 1
        self._send(REQUEST)
        self._stop_timer()
        self._timer = self._clock.callLater(self.timeout, self._overdue)

    def _overdue(self) -> None:
        self._timer = None
        self.timeouts += 1
        self._fail("etcd did not answer a progress request in time")
        if self.timeouts == self.max_timeouts:
            self._on_stale()

    def _fail(self, why: str) -> None:
        self._stop_timer()
        waiters, self._waiters = self._waiters, []
        for _, d in waiters:
            d.errback(StorageError(why))

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

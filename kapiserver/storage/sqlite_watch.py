"""Watch fan-out for the embedded SQLite backend.

The write path calls :meth:`WatchHub.publish` on the reactor thread after every
committed batch, so watchers are pushed to, never polling.  A watch that starts
behind the newest published revision first replays history read from the
database; while that read runs, live events are buffered on the watcher, and
the history read is bounded by the revision published when the watch was
registered.  History covers ``(after, bound]``, live events cover
``(bound, ...)``: no gap and no duplicate, whatever the interleaving.
"""
from __future__ import annotations

from typing import Awaitable, Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger

from kapiserver.storage.interface import CompactedError, ErrorHandler, Event, EventHandler, ProgressHandler
from kapiserver.storage.watcher import OrderedWatcher

log = Logger()

# Reads one page of history: (prefix, after, bound, limit) -> events with
# after < revision <= bound, in order; fails CompactedError when the page
# starts below the compacted revision.
HistoryReader = Callable[[str, int, int, int], Awaitable[list[Event]]]

HISTORY_PAGE = 1000
# Progress (everything up to the published revision was delivered) goes to every watch
# at most this long after a publish, or at once when a reader needs it (flush_progress):
# telling every watch cache after every commit cost more than the commit's own events.
PROGRESS_DELAY = 0.05
_SEGMENTS_REMEMBERED = 1024


class HubWatch(OrderedWatcher):
    """One running watch of a key prefix (the object ``Storage.watch`` returns)."""

    def __init__(self, hub: "WatchHub", prefix: str, after: int, on_event: EventHandler,
                 on_error: ErrorHandler, on_progress: Optional[ProgressHandler]) -> None:
        super().__init__(prefix, after, on_event, on_error, on_progress)
        self._hub = hub
        self._buffer: Optional[list[Event]] = None  # not None while replaying history

    def _detach(self) -> None:
        self._buffer = None
        self._hub._remove(self)

    def progress(self, revision: int) -> None:
        if self._buffer is None:  # not while replaying: history is still being delivered
            super().progress(revision)

    def _offer(self, event: Event) -> None:
        """A live event under this watch's prefix."""
        if self._buffer is not None:
            self._buffer.append(event)
        else:
            self.deliver(event)

    async def _replay(self, read: HistoryReader, bound: int) -> None:
        """Deliver history up to ``bound``, then the buffered live events."""
        self._buffer = []
        try:
            while not self.cancelled and self.last < bound:
                page = await read(self.prefix, self.last, bound, HISTORY_PAGE)
                for event in page:
                    self.deliver(event)
                if len(page) < HISTORY_PAGE:
                    break
                if page and page[-1].revision >= bound:
                    break
        except Exception as err:  # CompactedError, or the store went away
            self.end(err)
            return
        if self.cancelled:
            return
        self.last = max(self.last, bound)
        # Buffered events may themselves call cancel(); drain until empty.
        while self._buffer:
            pending, self._buffer = self._buffer, []
            for event in pending:
                self.deliver(event)
            if self.cancelled:
                return
        self._buffer = None
        self.progress(self.last)


class WatchHub:
    """All watches of one store, fed on the reactor thread after each commit."""

    def __init__(self, read_history: HistoryReader, reactor: IReactorTime) -> None:
        self._read = read_history
        self._reactor = reactor
        self._watches: list[HubWatch] = []
        # by the first two segments of a key (``/registry/configmaps/``): the watches whose prefix
        # may hold such keys, in the order they were registered; forgotten when a watch comes or
        # goes.  A store has a watch per resource (the watch caches'), and every event was
        # matched against each of them.
        self._by_segments: dict[str, tuple[HubWatch, ...]] = {}
        self.published = 0  # newest revision handed to publish()
        self._progress_call: Optional[IDelayedCall] = None  # the pending progress round, if any
        # publish() is offering a commit's events; a flush asked for meanwhile waits for it
        self._publishing = False
        self._flush_asked = False

    def watch(self, prefix: str, after: int, on_event: EventHandler, on_error: ErrorHandler,
              on_progress: Optional[ProgressHandler] = None, compacted: int = 0) -> HubWatch:
        w = HubWatch(self, prefix, after, on_event, on_error, on_progress)
        self._watches.append(w)
        self._by_segments.clear()
        if after + 1 < compacted:
            # Fail asynchronously, as the contract asks.
            self._reactor.callLater(0, w.end, CompactedError(after, compacted))
        elif after < self.published:
            defer.Deferred.fromCoroutine(w._replay(self._read, self.published))
        return w

    def publish(self, events: list[Event], revision: int) -> None:
        """Hand committed events (in revision order) up to ``revision`` to every watch."""
        self.published = max(self.published, revision)
        if not self._watches:
            return
        self._publishing = True
        try:
            for event in events:
                key = event.kv.key
                for w in self._watching(key):
                    if key.startswith(w.prefix):
                        w._offer(event)
        finally:
            self._publishing = False
        if self._progress_call is None:
            self._progress_call = self._reactor.callLater(PROGRESS_DELAY, self.flush_progress)
        if self._flush_asked:
            self._flush_asked = False
            self.flush_progress()

    def _watching(self, key: str) -> tuple[HubWatch, ...]:
        """The watches whose prefix ``key`` may start with (a few more, never fewer)."""
        second = key.find("/", key.find("/", 1) + 1)
        segments = key[:second + 1] if second > 0 else key
        found = self._by_segments.get(segments)
        if found is None:
            if len(self._by_segments) >= _SEGMENTS_REMEMBERED:  # (keys of another layout)
                self._by_segments.clear()
            # a prefix of the key is a prefix of its segments, or starts with them
            found = self._by_segments[segments] = tuple(
                w for w in self._watches if segments.startswith(w.prefix) or w.prefix.startswith(segments))
        return found

    def flush_progress(self) -> None:
        """Tell every watch now that everything up to the published revision was delivered.

        Asked for while :meth:`publish` offers a commit's events (by a handler of one of
        them: a consistent read it resumed, say), the flush waits until every watch was
        offered them: a watch told the revision first would drop them as already seen.
        """
        if self._publishing:
            self._flush_asked = True
            return
        if self._progress_call is None:
            return
        if self._progress_call.active():
            self._progress_call.cancel()
        self._progress_call = None
        for w in list(self._watches):
            w.progress(self.published)

    def end_all(self, err: Exception) -> None:
        """End every watch with ``err`` (they cannot be continued without a gap)."""
        for w in list(self._watches):
            w.end(err)

    def close(self) -> None:
        """Cancel every watch without calling on_error (store shutdown)."""
        if self._progress_call is not None and self._progress_call.active():
            self._progress_call.cancel()
        self._progress_call = None
        for w in list(self._watches):
            w.cancel()

    def _remove(self, w: HubWatch) -> None:
        try:
            self._watches.remove(w)
        except ValueError:
            pass
        self._by_segments.clear()

    def __len__(self) -> int:
        return len(self._watches)

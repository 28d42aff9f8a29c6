"""The watch cache of one resource prefix: objects in memory, a window of events, fan-out.

It is fed by exactly one backend watch.  Building lists the prefix from the
backend (paged, at one revision R) and then watches from R, so the in-memory
state is exact at every revision the cache reports.  ``revision`` is the
revision up to which the cache has seen everything (advanced by events and by
the backend's progress notifications).

Window rule: the window keeps every event with revision > ``window_start``.
It always keeps at least ``window_events`` events, whatever their age; beyond
that count it keeps events younger than ``window_seconds``; and it never holds
more than ``max_window_events`` (10 × ``window_events`` by default), dropping
the oldest even if young, so memory stays bounded under a write storm.
Eviction happens when events are appended.

If the backend watch ends (compacted history after the cache fell behind, a
cancelled stream), the cache never serves a gap: it ends every client watch
with ``CompactedError`` (clients re-list, as with upstream's 410), forgets its
state and rebuilds from a fresh list.
"""
from __future__ import annotations

import bisect
import builtins
import collections
import dataclasses
import heapq
import itertools
import time
from typing import Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.storage.cacher_index import BUILD_CHUNK, INDEX_CATCH_UP_SECONDS, MAX_INDEXES, Index
from kapiserver.storage.cacher_watcher import CacheWatcher
from kapiserver.storage.interface import (DELETE, CompactedError, Event, IndexValue, KeyValue, ListResult, Storage,
                                         Watch)

log = Logger()

# Page size of the list that (re)builds a cache from a remote backend (etcd); the embedded store is
# read in one query at its current revision: its pages at a fixed revision cost a count and a range
# scan each (100,000 ConfigMaps took 2.7 s in pages of 5,000, 0.7 s at once).
BUILD_PAGE = 5000


def prefix_end(prefix: str) -> str:
    """The first string after every string starting with ``prefix``.

    Python compares ``str`` by code point, which for valid UTF-8 is the byte
    order the backends sort keys in.
    """
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _same_version(a: KeyValue, b: KeyValue) -> bool:
    """The same write of the same key (its mod revision names it; the value confirms it)."""
    return a.mod_revision == b.mod_revision and a.value == b.value


class WatchCache:
    """Objects, event window and client watches of one resource prefix."""

    def __init__(self, backend: Storage, prefix: str, window_events: int, window_seconds: float,
                 reactor, max_window_events: Optional[int] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.prefix = prefix
        # the last consistent read waited for the backend's revision in vain (see cacher.py)
        self.futile_wait = False
        self.window_events = max(1, window_events)
        self.window_seconds = window_seconds
        self.max_window_events = max_window_events or 10 * self.window_events
        self._reactor = reactor
        self._clock = clock
        self._objects: dict[str, KeyValue] = {}
        self._keys: list[str] = []  # sorted keys of _objects
        self._window: collections.deque[tuple[float, Event]] = collections.deque()
        self.window_start = 0  # the window holds every event with revision > window_start
        self.evicted = False  # whether the window has dropped events since the last build
        self.revision = 0
        self.compacted = 0  # the newest compaction made through CachedStorage
        self.ready = False
        self.rebuilds = 0
        self._generation = 0
        self._building: Optional[defer.Deferred] = None
        self._pending_ready: list[defer.Deferred] = []
        self._upstream: Optional[Watch] = None
        self._watchers: dict[str, list[CacheWatcher]] = {}  # by watched prefix
        # (the cache's revision, a later backend revision with the same objects): note_same_state
        self._same_state: Optional[tuple[int, int]] = None
        # the last page listed, (prefix, limit, start_key) and the page, until the next event:
        # a list repeated on unchanged objects reuses what was derived from it (ListResult.memo)
        self._last_page: Optional[tuple[tuple[str, int, str], ListResult]] = None
        self._waiters: list[tuple[int, int, defer.Deferred]] = []  # heap of (revision, seq, d)
        # values written through this process whose event has not arrived yet (adopt)
        self._adopted: dict[str, KeyValue] = {}
        self._seq = itertools.count()
        self._stopped = False
        # secondary indexes by name (cacher_index.py), made by the lists that ask for them
        self._indexes: dict[str, Index] = {}
        # the next turn of indexing what was written since (_catch_up_indexes)
        self._index_catch_up: Optional[IDelayedCall] = None

    # ------------------------------------------------------------ lifecycle

    def ensure_ready(self) -> defer.Deferred:
        """Fire once the cache serves (building it if needed); fails if the build fails."""
        if self._stopped:
            return defer.fail(RuntimeError("the watch cache is stopped"))
        if self.ready:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._pending_ready.append(d)
        if self._building is None:
            self._building = building = defer.Deferred.fromCoroutine(self._build())
            building.addBoth(self._built)
        return d

    def _built(self, result: object) -> None:
        """Tell everyone waiting for the build how it went."""
        self._building = None
        if isinstance(result, Failure) and not self._pending_ready:
            log.warn("watch cache {prefix}: build failed: {err}", prefix=self.prefix, err=result.value)
        waiters, self._pending_ready = self._pending_ready, []
        for d in waiters:
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(None)
        return None

    async def _build(self) -> None:
        generation = self._generation
        items: list[KeyValue] = []
        page_size = 0 if self.backend.local_revision() is not None else BUILD_PAGE
        page = await self.backend.list(self.prefix, limit=page_size)
        at = page.revision
        items.extend(page.items)
        while page.more and page.items:
            page = await self.backend.list(self.prefix, revision=at, limit=page_size,
                                           start_key=page.items[-1].key + "\x00")
            items.extend(page.items)
        if self._stopped or generation != self._generation:
            raise RuntimeError("the watch cache was reset while building")
        self._objects = {kv.key: kv for kv in items}
        self._keys = [kv.key for kv in items]  # the backend lists in key order
        self._drop_indexes()
        self._last_page = None
        self._window.clear()
        self.window_start = at
        self.evicted = False
        self.revision = at
        self.ready = True
        self._upstream = self.backend.watch(
            self.prefix, at,
            lambda e: self._on_event(generation, e),
            lambda err: self._on_error(generation, err),
            lambda rev: self._on_progress(generation, rev))
        self._wake(at)
        log.debug("watch cache {prefix} built at revision {rev} with {n} objects",
                  prefix=self.prefix, rev=at, n=len(items))

    def stop(self) -> None:
        """Cancel the backend watch and every client watch (without on_error)."""
        self._stopped = True
        self._reset()
        for ws in list(self._watchers.values()):
            for w in list(ws):
                w.cancel()
        self._watchers.clear()
        waiters, self._waiters = self._waiters, []
        for _, _, d in waiters:
            if not d.called:
                d.callback(False)

    def _reset(self) -> None:
        self._generation += 1
        self.ready = False
        self._adopted.clear()
        self._last_page = None
        self._same_state = None
        self._drop_indexes()
        upstream, self._upstream = self._upstream, None
        if upstream is not None:
            upstream.cancel()

    # ------------------------------------------------------------ upstream

    def _on_event(self, generation: int, event: Event) -> None:
        if generation != self._generation or event.revision <= self.revision:
            return
        key = event.kv.key
        if event.type == DELETE:
            if self._adopted:
                self._adopted.pop(key, None)
            if self._objects.pop(key, None) is not None:
                i = bisect.bisect_left(self._keys, key)
                del self._keys[i]
            for index in self._indexes.values():
                index.remove(key)
        else:
            if key not in self._objects:
                bisect.insort(self._keys, key)
            kv = event.kv
            if self._adopted:
                adopted = self._adopted.pop(key, None)
                if adopted is not None and _same_version(adopted, kv):
                    kv = adopted
            self._objects[key] = kv
            if self._indexes:
                for index in self._indexes.values():
                    index.put(kv)
                if self._index_catch_up is None:
                    self._index_catch_up = self._reactor.callLater(INDEX_CATCH_UP_SECONDS, self._catch_up_indexes)
        self.revision = event.revision
        self._last_page = None
        self._append(event)
        # handlers may cancel watchers (and empty a prefix) while we deliver
        for prefix, ws in list(self._watchers.items()):
            if key.startswith(prefix):
                for w in tuple(ws):
                    w.deliver(event)
        self._wake(event.revision)

    def _on_progress(self, generation: int, revision: int) -> None:
        if generation != self._generation or revision < self.revision:
            return
        self.revision = revision
        for ws in list(self._watchers.values()):
            for w in tuple(ws):
                w.progress(revision)
        self._wake(revision)

    def _on_error(self, generation: int, err: Exception) -> None:
        if generation != self._generation:
            return
        log.warn("watch cache {prefix}: backend watch ended ({err}); ending client watches and rebuilding",
                 prefix=self.prefix, err=err)
        self._upstream = None
        self._reset()
        self.rebuilds += 1
        watchers = [w for ws in self._watchers.values() for w in ws]
        self._watchers.clear()
        for w in watchers:
            w.detach = None
            w.end(CompactedError(w.last, self.revision))
        if not self._stopped:
            self.ensure_ready().addErrback(
                lambda f: log.warn("watch cache {prefix}: rebuild failed ({err}); will retry on next use",
                                   prefix=self.prefix, err=f.value))

    def _append(self, event: Event) -> None:
        window = self._window
        now = self._clock()
        window.append((now, event))
        while len(window) > self.window_events and (
                len(window) > self.max_window_events or now - window[0][0] > self.window_seconds):
            _, dropped = window.popleft()
            self.window_start = dropped.revision
            self.evicted = True

    # ------------------------------------------------------------ revision waits

    def wait_for(self, revision: int, timeout: float) -> defer.Deferred:
        """Fire True once the cache is at ``revision`` or later, False after ``timeout`` s."""
        if self.ready and self.revision >= revision:
            return defer.succeed(True)
        d: defer.Deferred = defer.Deferred()
        heapq.heappush(self._waiters, (revision, next(self._seq), d))
        def expire() -> None:
            if not d.called:
                d.callback(False)
        timer = self._reactor.callLater(timeout, expire)
        d.addBoth(lambda r: (timer.active() and timer.cancel(), r)[1])
        return d

    def sync(self) -> Optional[defer.Deferred]:
        """Fire True once the cache holds every write committed before this call, False when it
        could not tell; None when the backend's watch cannot be asked (ask the backend instead).

        The backend watch is asked for progress (``request_progress``, etcd's
        RequestWatchProgress, where the backend vouches for its answers with ``watch_progress``):
        its answer comes on the stream after the events it covers, so once it is in, so are they.
        """
        upstream = self._upstream
        if not self.ready or upstream is None or not self.backend.watch_progress:
            return None
        generation = self._generation

        def answered(revision: int) -> bool:
            return generation == self._generation and self.ready and self.revision >= revision
        return upstream.request_progress().addCallbacks(answered, lambda _: False)

    def _wake(self, revision: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= revision:
            _, _, d = heapq.heappop(waiters)
            if not d.called:
                d.callback(True)

    # ------------------------------------------------------------ reads

    def note_same_state(self, revision: int) -> None:
        """The backend said that its state under the prefix at ``revision`` is the cache's now.

        Not a progress notification: a key created and deleted in between leaves the state
        the same, and its events are still on their way to the watchers.
        """
        self._same_state = (self.revision, revision)

    def same_state_at(self, revision: int) -> bool:
        """Whether the cache's objects are the backend's at ``revision`` (:meth:`note_same_state`,
        and no event since)."""
        same = self._same_state
        return same is not None and same[0] == self.revision and revision <= same[1]

    def adopt(self, written: KeyValue) -> KeyValue:
        """One object for a value written through this process and the cache's copy of it.

        What a write's answer memoizes on its value (its encoding, WriteResult.answer)
        then serves the cache's next GET and list of it.  If the cache already has the
        value (its event came first), that copy is returned for the writer to use;
        otherwise the cache keeps ``written`` when the event arrives.  The embedded
        store's events carry the written object itself; etcd's come from its watch.
        """
        held = self._objects.get(written.key)
        if held is not None and held.mod_revision >= written.mod_revision:
            return held if _same_version(held, written) else written
        self._adopted[written.key] = written
        return written

    def held_copy(self, read: KeyValue) -> KeyValue:
        """The cache's copy of ``read`` when it holds that very version (with what earlier
        readers memoized on it), else ``read``."""
        held = self._objects.get(read.key)
        return held if held is not None and _same_version(held, read) else read

    def get(self, key: str) -> Optional[KeyValue]:
        return self._objects.get(key)

    def count(self, prefix: str) -> int:
        """The number of keys under ``prefix`` (within this cache)."""
        keys = self._keys
        lo = bisect.bisect_left(keys, prefix)
        return bisect.bisect_left(keys, prefix_end(prefix), lo) - lo

    def list(self, prefix: str, limit: int = 0, start_key: str = "") -> ListResult:
        """A page of keys under ``prefix`` (within this cache) at ``self.revision``.

        Until the next event, asking for the same page again returns the same items
        and ``memo`` (only the revision may have moved on, by progress).
        """
        asked = (prefix, limit, start_key)
        last = self._last_page
        if last is not None and last[0] == asked:
            page = last[1]
            return page if page.revision == self.revision else dataclasses.replace(page, revision=self.revision)
        keys = self._keys
        low = start_key if start_key > prefix else prefix
        lo = bisect.bisect_left(keys, low)
        hi = bisect.bisect_left(keys, prefix_end(prefix), lo) if prefix else len(keys)
        count = hi - lo
        end = lo + limit if 0 < limit < count else hi
        objects = self._objects
        page = ListResult([objects[k] for k in keys[lo:end]], self.revision, end < hi, count, memo={})
        self._last_page = (asked, page)
        return page

    # ------------------------------------------------------------ secondary indexes

    def index(self, name: str, value_of: IndexValue) -> defer.Deferred:
        """Fire with the built index ``name`` of ``value_of`` (made now if the cache has none by that
        name and function), or None when the cache was reset before it was built."""
        index = self._indexes.get(name)
        if index is None or index.value_of is not value_of:
            index = self._new_index(name, value_of)
        index.last_used = next(self._seq)
        if index.built:
            return defer.succeed(index)
        d: defer.Deferred = defer.Deferred()
        index.waiters.append(d)
        return d

    def _new_index(self, name: str, value_of: IndexValue) -> Index:
        if name not in self._indexes and len(self._indexes) >= MAX_INDEXES:
            least = min(self._indexes, key=lambda n: self._indexes[n].last_used)
            self._end_build(self._indexes.pop(least))
        index = self._indexes[name] = Index(value_of)
        defer.Deferred.fromCoroutine(self._build_index(name, index)).addBoth(lambda _: self._end_build(index))
        return index

    async def _build_index(self, name: str, index: Index) -> None:
        """Index the objects a chunk per reactor turn (events keep the chunks done current)."""
        generation = self._generation
        keys = builtins.list(self._keys)
        for start in range(0, len(keys), BUILD_CHUNK):
            if start:
                turn: defer.Deferred = defer.Deferred()
                self._reactor.callLater(0, turn.callback, None)
                await turn
                if generation != self._generation or self._indexes.get(name) is not index:
                    return
            objects = self._objects
            for key in keys[start:start + BUILD_CHUNK]:
                index.remove(key)
                kv = objects.get(key)
                if kv is not None:
                    index.add(kv)
        index.built = True

    async def catch_up(self, index: Index) -> None:
        """Index the keys written since ``index`` was last read (:attr:`Index.pending`), a chunk per
        reactor turn as a build does; the last chunk without yielding, so a :meth:`select` right
        after it has at most the events of no turn left to index."""
        while len(index.pending) > BUILD_CHUNK:
            index.index_pending(BUILD_CHUNK)
            turn: defer.Deferred = defer.Deferred()
            self._reactor.callLater(0, turn.callback, None)
            await turn
        index.index_pending()

    def _end_build(self, index: Index) -> None:
        """Tell who waits for ``index`` that it is built, or (None) that it is gone."""
        waiters, index.waiters = index.waiters, []
        for d in waiters:
            d.callback(index if index.built else None)

    def _catch_up_indexes(self) -> None:
        """Index what was written since, a chunk per index per reactor turn, so that a selective
        list after many writes (20,000 pods created) finds little left to index: it costs what it
        returns, as upstream's watch cache indexes each event as it comes. Waiting
        ``INDEX_CATCH_UP_SECONDS`` first lets a burst's keys written twice be read once."""
        self._index_catch_up = None
        more = False
        for index in self._indexes.values():
            if index.pending:
                index.index_pending(BUILD_CHUNK)
                more = more or bool(index.pending)
        if more:
            self._index_catch_up = self._reactor.callLater(0, self._catch_up_indexes)

    def _drop_indexes(self) -> None:
        if self._index_catch_up is not None and self._index_catch_up.active():
            self._index_catch_up.cancel()
        self._index_catch_up = None
        indexes, self._indexes = self._indexes, {}
        for index in indexes.values():
            index.built = False
            self._end_build(index)

    def select(self, index: Index, prefix: str, values: frozenset[str], start_key: str = "") -> ListResult:
        """The objects under ``prefix`` from ``start_key`` whose value in ``index`` is one of ``values``,
        at ``self.revision`` (the whole range: ``more`` is false)."""
        low = start_key if start_key > prefix else prefix
        keys = sorted(k for k in index.keys_with(values) if k >= low and k.startswith(prefix))
        objects = self._objects
        return ListResult([objects[k] for k in keys], self.revision, False, len(keys))

    # ------------------------------------------------------------ client watches

    def attach(self, w: CacheWatcher) -> Optional[Exception]:
        """Start serving ``w`` from the window (the cache must be ready).

        Returns None when attached; an exception when ``w`` asks for history
        older than the window (CompactedError once the window has dropped
        events; a plain LookupError while the window still starts at the
        cache's build, meaning "ask the backend").
        """
        if w.cancelled:
            return None
        after = w.after
        if after + 1 < self.compacted:
            return CompactedError(after, self.compacted)
        if after < self.window_start:
            if self.evicted:
                return CompactedError(after, self.window_start)
            return LookupError("history before the cache was built")
        w.last = after
        w.detach = self._detach
        # The window first, and only then live events and progress: a handler may make the
        # cache hear of progress while it is replayed (a consistent read it resumed), and a
        # watcher told the newer revision then would drop the rest of the replay as seen.
        generation = self._generation
        while True:
            replay = self._window_after(w.last, w.prefix)
            if not replay:
                break
            for event in replay:
                w.deliver(event)
            if w.cancelled:
                return None
        if generation != self._generation:  # reset meanwhile: ended as its watchers were
            return CompactedError(w.last, self.revision)
        self._watchers.setdefault(w.prefix, []).append(w)
        w.progress(self.revision)
        return None

    def _window_after(self, revision: int, prefix: str) -> "builtins.list[Event]":  # (list is a method here)
        """The window's events under ``prefix`` after ``revision``, oldest first."""
        found = []
        for _, event in reversed(self._window):
            if event.revision <= revision:
                break
            if event.kv.key.startswith(prefix):
                found.append(event)
        found.reverse()
        return found

    def _detach(self, w: CacheWatcher) -> None:
        ws = self._watchers.get(w.prefix)
        if ws is None:
            return
        try:
            ws.remove(w)
        except ValueError:
            return
        if not ws:
            del self._watchers[w.prefix]

    def watcher_count(self) -> int:
        return sum(len(ws) for ws in self._watchers.values())

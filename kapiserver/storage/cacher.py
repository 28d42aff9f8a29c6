"""The watch cache as a storage layer (kube-apiserver's cacher): ``CachedStorage``.

``CachedStorage`` honours the same :class:`~kapiserver.storage.interface.Storage`
contract as the backend it wraps, so the registry does not know it is there.
Per resource prefix (``/configmaps/``, ``/<group>/<plural>/`` for custom
resources) it keeps one :class:`~kapiserver.storage.cacher_watch_cache.WatchCache`,
built lazily on first use and fed by ONE backend watch, whatever the number
of clients watching.

What is served from where:

* ``list(prefix)`` and ``get(key)`` at the latest revision, when the backend's
  watch answers progress requests (``watch_progress``: etcd, one member, a
  release that answers them in order): the cache's watch is asked for
  progress, and once etcd's answer arrived on it, after every event it
  covers, memory answers (kube-apiserver's consistent reads from cache).  No
  read goes to etcd; requests that arrive while one is out share the next.
  If the stream breaks first, the steps below answer.
* ``list(prefix)`` at the latest revision otherwise: a consistent read from memory: the
  backend's current revision is read, the cache waits (at most
  ``consistent_wait`` seconds) until it has caught up with it, then answers;
  if it does not catch up in time, the backend answers.  After such a futile
  wait, the cache's next consistent reads go to the backend at once unless
  the cache is already there, until one finds it caught up: on an etcd that
  others write to and that sends no progress notifications, a quiet
  resource's cache never learns the current revision, and every wait would
  last the whole ``consistent_wait`` (the reason for progress requests above).  Before either,
  a backend that can (``unchanged_since``: etcd) is asked whether anything
  under the cache's prefix changed between the cache's revision and the
  current one; if not, the cache answers at the current revision, and so do
  the next consistent reads while neither moves (one round trip each, not
  two).  ``list`` at the cache's own revision is served from memory (a
  continuation of a paginated list once the backend's compacted revision shows
  it is still readable: a continuation older than a compaction must fail, as
  upstream's do on etcd); other past revisions go to the backend (exactness
  matters for paginated lists).
* ``list_cached(prefix)``: the ``resourceVersion=0`` fast path ("any recent
  state"): memory, at once, no round trip to the backend.
* ``get(key)``: memory, when the backend knows its latest revision without a
  round trip (``local_revision``: the embedded store) and the cache has reached
  it, which it has unless a watch is replaying history: the same answer
  the backend would give, without the thread hop; or after a progress request
  (above). Otherwise the backend: without progress requests a consistent read
  from memory would cost the same revision round trip as the read, plus a
  wait.  When the cache holds the very version the backend read (same
  mod revision), the answer is the cache's copy, so the encoding an earlier
  read memoized on it is reused.  ``get_cached(key)`` is the
  ``resourceVersion=0`` fast path.
* ``peek(key)``: what a ready cache holds now, or None; never waits, never asks
  the backend.  A write starts from it (upstream's ``cachedExistingObject``):
  its compare-and-swap on the mod revision catches a copy that is behind, so
  an update or delete on etcd costs one round trip instead of two.
* writes, ``count``, revisions, compaction and leases: the backend.  The cache
  learns of writes from its watch; any later consistent read waits for them.
* ``watch(prefix, after)``: from the event window when it covers ``after``
  (fan-out of the very same :class:`Event` object to every watcher, so a
  per-event memo in ``Event.cache`` lets handlers encode once).  Older than the
  window: ``CompactedError`` (upstream's 410 "too old resource version") —
  except while the window still starts where the cache was built (nothing
  evicted yet), where the backend serves that watch directly, so a young
  cache is as good as the backend.  A watch from before a compaction made
  through this layer fails as on the backend (compactions made elsewhere,
  e.g. the SQLite backend's periodic one, are not seen: like upstream, the
  window may then serve history the backend has dropped).  As for every backend, ``after == 0``
  means "everything after revision 0", not "from now".

Keys or prefixes that do not name one resource (``/``, or a prefix not in the
``prefixes`` allow-list) pass through to the backend.
"""
from __future__ import annotations

import builtins
import dataclasses

from typing import Any, Callable, Iterable, Optional, Sequence

from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.machinery import codec
from kapiserver.storage.cacher_watch_cache import WatchCache
from kapiserver.storage.cacher_watcher import CacheWatcher
from kapiserver.storage.interface import (ErrorHandler, EventHandler, IndexValue, KeyValue, ListResult,
                                         ProgressHandler, Snapshots, Storage, StorageError, Watch)

log = Logger()

ResourcePrefixOf = Callable[[str], Optional[str]]


def default_resource_prefix(key_or_prefix: str) -> Optional[str]:
    """The resource prefix of a registry key or prefix, or None if it names none.

    ``/configmaps/ns/name`` → ``/configmaps/``; ``/namespaces/`` → ``/namespaces/``;
    a first segment with a dot is a CRD group: ``/example.com/widgets/ns/x`` →
    ``/example.com/widgets/`` (built-in kinds are stored without their group).
    """
    parts = key_or_prefix.split("/", 3)
    if len(parts) < 3 or parts[0] or not parts[1]:
        return None
    if "." in parts[1]:
        if len(parts) < 4 or not parts[2]:
            return None
        return f"/{parts[1]}/{parts[2]}/"
    return f"/{parts[1]}/"


class CachedStorage(Storage):
    """A :class:`Storage` that serves reads and watches from per-resource watch caches."""

    def __init__(self, backend: Storage, prefixes: Optional[Iterable[str]] = None,
                 window_events: int = 10_000, window_seconds: float = 75.0, reactor=None,
                 resource_prefix_of: ResourcePrefixOf = default_resource_prefix,
                 consistent_wait: float = 3.0) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.backend = backend
        self.allowed = frozenset(prefixes) if prefixes is not None else None
        self.window_events = window_events
        self.window_seconds = window_seconds
        self.resource_prefix_of = resource_prefix_of
        self.consistent_wait = consistent_wait
        self._reactor = reactor
        self._caches: dict[str, WatchCache] = {}
        self._stopped = False
        # How often a consistent read had to fall back to the backend (metrics, tests).
        self.consistent_fallbacks = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> defer.Deferred:
        return self.backend.start()

    def stop(self) -> defer.Deferred:
        self._stopped = True
        for cache in self._caches.values():
            cache.stop()
        self._caches.clear()
        return self.backend.stop()

    def cache_for(self, key_or_prefix: str) -> Optional[WatchCache]:
        """The watch cache serving ``key_or_prefix`` (created on first use), or None."""
        if self._stopped:
            return None
        rp = self.resource_prefix_of(key_or_prefix)
        if rp is None or not key_or_prefix.startswith(rp):
            return None
        if self.allowed is not None and rp not in self.allowed:
            return None
        cache = self._caches.get(rp)
        if cache is None:
            cache = WatchCache(self.backend, rp, self.window_events, self.window_seconds, self._reactor)
            self._caches[rp] = cache
        return cache

    # ------------------------------------------------------------ pass-through

    def current_revision(self) -> defer.Deferred:
        return self.backend.current_revision()

    def compacted_revision(self) -> defer.Deferred:
        return self.backend.compacted_revision()

    def get(self, key: str, revision: int = 0) -> defer.Deferred:
        if revision == 0:
            # a consistent read from memory when the backend can say at once that the cache
            # has every committed write (the embedded store); otherwise the backend answers
            cache = self.cache_for(key)
            latest = self.backend.local_revision() if cache is not None and cache.ready else None
            if cache is not None and latest is not None:
                if cache.revision < latest:
                    self.backend.flush_progress()
                if cache.revision >= latest:
                    return defer.succeed(cache.get(key))
            elif cache is not None:
                # or when the backend's watch can vouch that the cache has every committed write
                synced = cache.sync()
                if synced is not None:
                    return synced.addCallback(self._get_synced, cache, key)
        return self.backend.get(key, revision).addCallback(self._held_copy)

    def _get_synced(self, synced: bool, cache: WatchCache, key: str) -> Any:
        if synced:
            return cache.get(key)
        return self.backend.get(key).addCallback(self._held_copy)

    def _held_copy(self, read: Optional[KeyValue]) -> Optional[KeyValue]:
        """What the backend read, as the ready cache's copy when it holds that very version."""
        if read is None:
            return None
        cache = self._ready_cache(read.key)
        return cache.held_copy(read) if cache is not None else read

    def count(self, prefix: str) -> defer.Deferred:
        return self.backend.count(prefix)

    # The value written is the one the cache and its event window keep (the embedded store's
    # events carry it, _adopt keeps etcd's): stored at its own size, not in the encoder's
    # larger buffer (codec.exact_size).
    def create(self, key: str, value: bytes, lease: int = 0) -> defer.Deferred:
        return self.backend.create(key, codec.exact_size(value), lease).addCallback(self._adopt)

    def update(self, key: str, value: bytes, expected_mod_revision: int = 0,
               lease: Optional[int] = None) -> defer.Deferred:
        return self.backend.update(key, codec.exact_size(value), expected_mod_revision,
                                   lease).addCallback(self._adopt)

    def _adopt(self, written: KeyValue) -> KeyValue:
        """The written value as the object the ready cache holds, or will hold, for it."""
        cache = self._ready_cache(written.key)
        return cache.adopt(written) if cache is not None else written

    def delete(self, key: str, expected_mod_revision: int = 0) -> defer.Deferred:
        return self.backend.delete(key, expected_mod_revision)

    def compact(self, revision: int) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self._compact(revision))

    async def _compact(self, revision: int) -> None:
        await self.backend.compact(revision)
        # Watches from before a compaction made through this layer fail as
        # they would on the backend, even where the window still has the events.
        for cache in self._caches.values():
            cache.compacted = max(cache.compacted, revision)

    def grant_lease(self, ttl_seconds: int) -> defer.Deferred:
        return self.backend.grant_lease(ttl_seconds)

    def snapshots(self) -> Optional[Snapshots]:
        # The caches follow a restore through their watches, as they follow any write.
        return self.backend.snapshots()

    # ------------------------------------------------------------ reads

    def list(self, prefix: str, revision: int = 0, limit: int = 0, start_key: str = "") -> defer.Deferred:
        cache = self.cache_for(prefix)
        if cache is None:
            return self.backend.list(prefix, revision, limit, start_key)
        if revision > 0:
            if cache.ready and revision == cache.revision:
                if start_key:
                    return defer.Deferred.fromCoroutine(self._continue_list(cache, prefix, revision, limit, start_key))
                return defer.succeed(cache.list(prefix, limit, start_key))
            return self.backend.list(prefix, revision, limit, start_key)
        return defer.Deferred.fromCoroutine(self._consistent_list(cache, prefix, limit, start_key))

    async def _continue_list(self, cache: WatchCache, prefix: str, revision: int, limit: int,
                             start_key: str) -> ListResult:
        """A page continuing a list at the cache's revision: from memory, once the backend said
        it has not compacted that revision; otherwise from the backend, where a continuation
        older than a compaction fails (410 for the client, which upstream's conformance waits
        for).  Compactions made by other processes are not seen otherwise."""
        if revision >= await self.backend.compacted_revision() and cache.ready and cache.revision == revision:
            return cache.list(prefix, limit, start_key)
        return await self.backend.list(prefix, revision, limit, start_key)

    async def _consistent_list(self, cache: WatchCache, prefix: str, limit: int, start_key: str) -> ListResult:
        revision = await self.wait_consistent(cache)
        if revision is None:
            return await self.backend.list(prefix, 0, limit, start_key)
        listed = cache.list(prefix, limit, start_key)
        return dataclasses.replace(listed, revision=max(revision, listed.revision))

    async def wait_consistent(self, cache: WatchCache) -> Optional[int]:
        """Wait until ``cache`` holds everything the backend had committed when called.

        The revision its contents can be answered at, or None when it did not get
        there within ``consistent_wait`` seconds (the caller then reads the backend).
        """
        await cache.ensure_ready()
        synced = cache.sync()
        if synced is not None and await synced:
            cache.futile_wait = False
            return cache.revision
        current = await self.backend.current_revision()
        if cache.revision < current:
            self.backend.flush_progress()
        if cache.revision >= current:
            cache.futile_wait = False
            return cache.revision
        if cache.same_state_at(current):  # the backend said so for this revision already
            return current
        seen = cache.revision
        if await self.backend.unchanged_since(cache.prefix, seen, current, cache.count(cache.prefix)) and \
                cache.revision == seen:
            cache.note_same_state(current)
            return current
        if cache.revision >= current:  # events arrived meanwhile
            return cache.revision
        if not cache.futile_wait and await cache.wait_for(current, self.consistent_wait):
            return cache.revision
        cache.futile_wait = True
        self.consistent_fallbacks += 1
        log.debug("watch cache {prefix} did not reach revision {rev} in {t}s; reading the backend",
                  prefix=cache.prefix, rev=current, t=self.consistent_wait)
        return None

    async def check_health(self) -> None:
        """The backend's health (the cache itself has no failure of its own to report)."""
        await self.backend.check_health()

    # the backend's other capabilities, for whoever wraps the cache

    @property
    def watch_progress(self) -> bool:
        return self.backend.watch_progress

    def local_revision(self) -> Optional[int]:
        return self.backend.local_revision()

    def flush_progress(self) -> None:
        self.backend.flush_progress()

    def unchanged_since(self, prefix: str, since: int, at: int, count: int) -> defer.Deferred:
        return self.backend.unchanged_since(prefix, since, at, count)

    def list_indexed(self, prefix: str, index: str, value_of: IndexValue, values: frozenset[str],
                     revision: int = 0, start_key: str = "", any_state: bool = False) -> defer.Deferred:
        """The keys under ``prefix`` whose ``value_of`` is one of ``values``, from the watch cache's
        index ``index`` (:meth:`Storage.list_indexed <kapiserver.storage.interface.Storage.list_indexed>`); None when the
        cache cannot answer as :meth:`list` or :meth:`list_cached` would from memory."""
        cache = self.cache_for(prefix)
        if cache is None:
            return defer.succeed(None)
        return defer.Deferred.fromCoroutine(
            self._list_indexed(cache, prefix, index, value_of, values, revision, start_key, any_state))

    async def _list_indexed(self, cache: WatchCache, prefix: str, name: str, value_of: IndexValue,
                            values: frozenset[str], revision: int, start_key: str,
                            any_state: bool) -> Optional[ListResult]:
        await cache.ensure_ready()
        index = await cache.index(name, value_of)
        if index is None:
            return None
        at = 0
        if revision > 0:  # exact: the cache's revision only (a continuation once not compacted)
            if start_key and revision < await self.backend.compacted_revision():
                return None
        elif not any_state:
            consistent = await self.wait_consistent(cache)
            if consistent is None:
                return None
            at = consistent
        await cache.catch_up(index)
        if not (cache.ready and index.built) or (revision > 0 and cache.revision != revision):
            return None
        listed = cache.select(index, prefix, values, start_key)
        return listed if at <= listed.revision else dataclasses.replace(listed, revision=at)

    def prepare(self, prefix: str, indexes: Sequence[tuple[str, IndexValue]] = ()) -> defer.Deferred:
        """Build the watch cache of ``prefix`` and its ``indexes`` now (see :meth:`Storage.prepare`)."""
        cache = self.cache_for(prefix)
        if cache is None:
            return defer.succeed(None)
        return defer.Deferred.fromCoroutine(self._prepare(cache, indexes))

    async def _prepare(self, cache: WatchCache, indexes: Sequence[tuple[str, IndexValue]]) -> None:
        await cache.ensure_ready()
        for name, value_of in indexes:
            await cache.index(name, value_of)

    def list_cached(self, prefix: str, limit: int = 0, start_key: str = "") -> defer.Deferred:
        """A list from memory without waiting for the backend (resourceVersion=0 semantics)."""
        cache = self.cache_for(prefix)
        if cache is None:
            return self.backend.list(prefix, 0, limit, start_key)
        if cache.ready:
            return defer.succeed(cache.list(prefix, limit, start_key))
        return cache.ensure_ready().addCallback(lambda _: cache.list(prefix, limit, start_key))

    def get_cached(self, key: str) -> defer.Deferred:
        """A key from memory without waiting for the backend (resourceVersion=0 semantics)."""
        cache = self.cache_for(key)
        if cache is None:
            return self.backend.get(key)
        if cache.ready:
            return defer.succeed(cache.get(key))
        return cache.ensure_ready().addCallback(lambda _: cache.get(key))

    def peek(self, key: str) -> Optional[KeyValue]:
        """The ready watch cache's copy of ``key`` now (None: no ready cache, or not in it)."""
        cache = self._ready_cache(key)
        return cache.get(key) if cache is not None else None

    def _ready_cache(self, key_or_prefix: str) -> Optional[WatchCache]:
        """The watch cache serving ``key_or_prefix`` if it exists and is ready (never builds one)."""
        rp = self.resource_prefix_of(key_or_prefix)
        cache = self._caches.get(rp) if rp is not None else None
        if cache is None or not cache.ready or not key_or_prefix.startswith(cache.prefix):
            return None
        return cache

    # ------------------------------------------------------------ watch

    def watch(self, prefix: str, after_revision: int, on_event: EventHandler, on_error: ErrorHandler,
              on_progress: Optional[ProgressHandler] = None) -> Watch:
        cache = self.cache_for(prefix)
        if cache is None:
            return self.backend.watch(prefix, after_revision, on_event, on_error, on_progress)
        w = CacheWatcher(prefix, after_revision, on_event, on_error, on_progress)
        # Attach on a later reactor turn: events never reach a handler before
        # watch() has returned its handle (and the cache may still be building).
        d = cache.ensure_ready() if not cache.ready else defer.succeed(None)
        self._reactor.callLater(0, lambda: d.addCallbacks(lambda _: self._attach(cache, w),
                                                          lambda f: w.end(f.value)))
        return w

    def _attach(self, cache: WatchCache, w: CacheWatcher) -> None:
        if w.cancelled:
            return
        if not cache.ready:  # reset again between the build and now
            cache.ensure_ready().addCallbacks(lambda _: self._attach(cache, w), lambda f: w.end(f.value))
            return
        refused = cache.attach(w)
        if refused is None:
            return
        if isinstance(refused, LookupError):
            w.passthrough(self.backend.watch(w.prefix, w.after, w.on_backend_event, w.on_backend_error,
                                             w.on_backend_progress))
            return
        w.end(refused)

    # ------------------------------------------------------------ introspection

    def cached_count(self, prefix: str) -> Optional[int]:
        """How many keys under ``prefix`` the watch cache holds now (None: no ready cache for it)."""
        cache = self._ready_cache(prefix)
        return cache.count(prefix) if cache is not None else None

    def cached_prefixes(self) -> "builtins.list[str]":  # (``list`` is a method here)
        return sorted(self._caches)

    def watcher_count(self) -> int:
        return sum(c.watcher_count() for c in self._caches.values())


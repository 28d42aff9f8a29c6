"""The watch cache: a faithful Storage (the shared contract), plus what only it promises."""
from __future__ import annotations

import gc
import os
import tracemalloc
import uuid
from typing import Any

import orjson
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from kapiserver.storage.cacher import CachedStorage, default_resource_prefix
from kapiserver.storage.etcd import EtcdStorage
from kapiserver.storage.interface import DELETE, PUT, CompactedError, Event, KeyValue, Storage
from kapiserver.storage import sqlite_watch
from kapiserver.storage.sqlite import SQLiteStorage
from kapiserver.testing.cases import HANG_GUARD
from tests.storage.contract import record_watch, Recorder, sleep, StorageContractTests, until
from kapiserver.testing.etcd import shared_etcd, skip_reason


async def answered_without_waiting(test: unittest.TestCase, clock: task.Clock, answer: defer.Deferred) -> Any:
    """What ``answer`` fires with, failing the test if the cache set a timer (a wait for its
    revision) on its fake ``clock`` first: a call that waits never fires while the clock stands."""
    await until(lambda: answer.called or bool(clock.getDelayedCalls()), timeout=HANG_GUARD,
                what="the answer or a timer")
    test.assertEqual(clock.getDelayedCalls(), [], "the cache waited for its revision")
    return await answer


def sqlite_path(test: unittest.TestCase) -> str:
    path = os.path.abspath(test.mktemp()) + ".db"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


class CachedSQLiteContractTests(StorageContractTests, unittest.TestCase):
    async def make_storage(self) -> CachedStorage:
        self.path = sqlite_path(self)
        store = CachedStorage(SQLiteStorage(self.path, lease_sweep_interval=0.2))
        await store.start()
        return store

    async def restart_storage(self) -> CachedStorage:
        await self.storage.stop()
        store = CachedStorage(SQLiteStorage(self.path, lease_sweep_interval=0.2))
        await store.start()
        return store


class CachedEtcdContractTests(StorageContractTests, unittest.TestCase):
    """One etcd for the whole class (the shared one); every test has its own key prefix."""

    skip = skip_reason()

    async def make_storage(self) -> CachedStorage:
        self.etcd = shared_etcd()
        self.prefix = f"/cacher-{uuid.uuid4().hex[:12]}"
        store = CachedStorage(EtcdStorage([self.etcd.endpoint], prefix=self.prefix, request_timeout=5.0))
        await store.start()
        return store

    async def tearDown(self) -> None:
        # EtcdWatch logs a DNSLookupError when cancelled while still connecting
        # (an etcd backend issue); let the caches' backend watches connect first.
        if self.storage.cached_prefixes():
            await sleep(0.1)
        await super().tearDown()


class CachedEtcdConsistencyTests(unittest.TestCase):
    """Consistent lists on an etcd that others write to, without progress notifications."""

    skip = skip_reason()

    async def open(self, **kw: Any) -> tuple[CachedStorage, "Recording"]:
        # the shared etcd sends progress notifications; this backend drops them, as an etcd without them
        class NoProgress(Recording):
            def watch(self, prefix, after, on_event, on_error, on_progress=None):
                return super().watch(prefix, after, on_event, on_error, None)
        backend = NoProgress(EtcdStorage([shared_etcd().endpoint], prefix=f"/consistent-{uuid.uuid4().hex[:12]}",
                                         request_timeout=5.0))
        store = CachedStorage(backend, consistent_wait=2.0, **kw)
        await store.start()
        self.addCleanup(store.stop)
        return store, backend

    async def test_unchanged_since_tells_a_change_from_none(self):
        store, _ = await self.open()
        etcd = store.backend.backend
        a = await store.create("/p/a", b"1")
        await store.create("/p/b", b"1")
        since = await store.current_revision()
        await store.create("/q/other", b"1")
        now = await store.current_revision()
        self.assertTrue(await etcd.unchanged_since("/p/", since, now, 2))
        self.assertFalse(await etcd.unchanged_since("/p/", since, now, 3))
        await store.update("/p/a", b"2", a.mod_revision)
        self.assertFalse(await etcd.unchanged_since("/p/", since, await store.current_revision(), 2))
        await store.delete("/p/b")
        self.assertFalse(await etcd.unchanged_since("/p/", since, await store.current_revision(), 2))
        await store.create("/p/c", b"1")
        await store.delete("/p/c")  # created and deleted in between: the state is the same
        later = await store.current_revision()
        self.assertTrue(await etcd.unchanged_since("/p/", later - 2, later, 1))

    async def test_a_quiet_resource_is_listed_from_memory_at_the_current_revision(self):
        clock = task.Clock()  # the cache's timers: a wait for its revision would be one
        store, backend = await self.open(reactor=clock)
        await store.create("/configmaps/ns/a", b"1")
        await store.list("/configmaps/")  # builds the cache
        await sleep(0.2)  # its watch is established
        for i in range(3):
            await store.create(f"/leases/ns/l{i}", b"1")  # others move the revision on
        lists = backend.calls.get("list", 0)
        # no wait for a progress notification: answered with the fake clock standing still
        listed = await answered_without_waiting(self, clock, store.list("/configmaps/"))
        self.assertEqual([kv.key for kv in listed.items], ["/configmaps/ns/a"])
        self.assertEqual(listed.revision, await store.current_revision())
        self.assertEqual((backend.calls.get("list", 0), store.consistent_fallbacks), (lists, 0))


    async def test_the_backend_is_asked_once_while_nothing_moves_and_watchers_miss_nothing(self):
        store, backend = await self.open()
        await store.create("/configmaps/ns/a", b"1")
        await store.list("/configmaps/")  # builds the cache
        await sleep(0.2)  # its watch is established
        await store.create("/leases/ns/l", b"1")  # others move the revision on
        first = await store.list("/configmaps/")
        asked = backend.calls.get("unchanged_since", 0)
        self.assertGreaterEqual(asked, 1)
        again = await store.list("/configmaps/")
        self.assertEqual((again.revision, backend.calls.get("unchanged_since", 0)), (first.revision, asked))
        # a key created and deleted under the prefix leaves the same objects; its events still arrive
        rec = Recorder()
        handle = store.watch("/configmaps/", first.revision, rec.on_event, rec.on_error)
        self.addCleanup(handle.cancel)
        await store.create("/configmaps/ns/tmp", b"1")
        await store.delete("/configmaps/ns/tmp")
        await until(lambda: len(rec.events) == 2, what="the created and deleted key's events")
        self.assertEqual([(e.type, e.kv.key) for e in rec.events],
                         [(PUT, "/configmaps/ns/tmp"), (DELETE, "/configmaps/ns/tmp")])
        later = await store.list("/configmaps/")
        self.assertEqual(([kv.key for kv in later.items], store.consistent_fallbacks), (["/configmaps/ns/a"], 0))


class Recording:
    """A Storage wrapper that counts backend calls and exposes the backend's watches."""

    def __init__(self, backend: Storage) -> None:
        self.backend = backend
        self.calls: dict[str, int] = {}
        self.watches: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.backend, name)
        if not callable(attr):
            return attr

        def counted(*args, **kw):
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*args, **kw)
        return counted

    def watch(self, prefix, after, on_event, on_error, on_progress=None):
        self.calls["watch"] = self.calls.get("watch", 0) + 1
        handle = self.backend.watch(prefix, after, on_event, on_error, on_progress)
        self.watches.append({"prefix": prefix, "after": after, "on_error": on_error, "handle": handle})
        return handle


class CacherTests(unittest.TestCase):
    """Promises of the watch cache beyond the storage contract."""

    async def open(self, **kw) -> tuple[CachedStorage, Recording]:
        backend = Recording(SQLiteStorage(sqlite_path(self)))
        store = CachedStorage(backend, **kw)
        await store.start()
        self.addCleanup(store.stop)
        return store, backend

    def watch(self, store: CachedStorage, prefix: str, after: int) -> Recorder:
        return record_watch(self, store, prefix, after)

    def test_default_resource_prefix(self):
        self.assertEqual(default_resource_prefix("/configmaps/ns/cm"), "/configmaps/")
        self.assertEqual(default_resource_prefix("/configmaps/ns/"), "/configmaps/")
        self.assertEqual(default_resource_prefix("/namespaces/"), "/namespaces/")
        self.assertEqual(default_resource_prefix("/example.com/widgets/ns/w"), "/example.com/widgets/")
        self.assertEqual(default_resource_prefix("/example.com/widgets/"), "/example.com/widgets/")
        for whole in ("/", "/configmaps", "/example.com/widgets", "/example.com/", ""):
            self.assertIsNone(default_resource_prefix(whole), whole)

    async def test_consistent_list_right_after_a_write_sees_it(self):
        store, _ = await self.open()
        await store.create("/configmaps/ns1/a", b"a")
        self.assertEqual(len((await store.list("/configmaps/")).items), 1)  # cache built
        for i in range(20):
            kv = await store.create(f"/configmaps/ns1/k{i:02d}", b"x")
            page = await store.list("/configmaps/ns1/")
            self.assertIn(f"/configmaps/ns1/k{i:02d}", [item.key for item in page.items])
            self.assertGreaterEqual(page.revision, kv.mod_revision)
            deleted = await store.delete(f"/configmaps/ns1/k{i:02d}")
            page = await store.list("/configmaps/")
            self.assertNotIn(deleted.key, [item.key for item in page.items])
        self.assertEqual(store.consistent_fallbacks, 0)

    async def test_a_watch_replayed_from_the_window_loses_nothing_to_progress_its_handler_asks_for(self):
        self.patch(sqlite_watch, "PROGRESS_DELAY", 30.0)  # a pending progress round stays pending
        store, backend = await self.open()
        await store.list("/configmaps/")  # the cache is built
        before = await store.current_revision()
        for name in "abc":
            await store.create(f"/configmaps/ns/{name}", b"v")  # in the window
        seen: list[str] = []

        def on_event(event: Event) -> None:
            # what a consistent read it resumed does when some cache is behind
            seen.append(event.kv.key)
            backend.flush_progress()
        w = store.watch("/configmaps/", before, on_event, lambda err: None)
        self.addCleanup(w.cancel)
        await sleep(0.05)
        self.assertEqual(seen, [f"/configmaps/ns/{name}" for name in "abc"])

    async def test_list_cached_answers_from_memory(self):
        store, backend = await self.open()
        for i in range(30):
            await store.create(f"/configmaps/ns{i % 3}/k{i:02d}", str(i).encode())
        await store.list("/configmaps/")  # builds the cache
        await until(lambda: store.cache_for("/configmaps/").revision == 30, what="catch-up")
        before = dict(backend.calls)
        page = await store.list_cached("/configmaps/ns1/", limit=4)
        self.assertEqual([kv.key for kv in page.items],
                         ["/configmaps/ns1/k01", "/configmaps/ns1/k04", "/configmaps/ns1/k07", "/configmaps/ns1/k10"])
        self.assertEqual((page.more, page.count, page.revision), (True, 10, 30))
        rest = await store.list_cached("/configmaps/ns1/", start_key=page.items[-1].key + "\x00")
        self.assertEqual(len(rest.items), 6)
        self.assertEqual((await store.get_cached("/configmaps/ns2/k02")).value, b"2")
        self.assertIsNone(await store.get_cached("/configmaps/ns2/nope"))
        self.assertEqual(backend.calls, before, "list_cached/get_cached must not touch the backend")

    async def test_consistent_get_on_the_embedded_store_is_served_from_memory(self):
        store, backend = await self.open()
        kv = await store.create("/configmaps/ns1/a", b"0")
        await store.list("/configmaps/")  # builds the cache
        gets = backend.calls.get("get", 0)
        for i in range(1, 20):
            kv = await store.update("/configmaps/ns1/a", str(i).encode(), kv.mod_revision)
            got = await store.get("/configmaps/ns1/a")  # right after the write is acknowledged
            self.assertEqual((got.value, got.mod_revision), (str(i).encode(), kv.mod_revision))
        await store.delete("/configmaps/ns1/a")
        self.assertIsNone(await store.get("/configmaps/ns1/a"))
        self.assertEqual(backend.calls.get("get", 0), gets, "consistent gets must not need the backend")
        # an older revision is the backend's
        await store.get("/configmaps/ns1/a", revision=kv.mod_revision)
        self.assertEqual(backend.calls["get"], gets + 1)

    async def test_consistent_get_asks_a_backend_that_must_be_asked_its_revision(self):
        class Remote(Recording):  # as etcd: it does not know its revision without a round trip
            def local_revision(self):
                return None
        backend = Remote(SQLiteStorage(sqlite_path(self)))
        store = CachedStorage(backend)
        await store.start()
        self.addCleanup(store.stop)
        await store.create("/configmaps/ns1/a", b"0")
        await store.list("/configmaps/")
        gets = backend.calls.get("get", 0)
        read = await store.get("/configmaps/ns1/a")
        self.assertEqual(read.value, b"0")
        self.assertEqual(backend.calls["get"], gets + 1)
        # the cache holds that very version: its copy answers (with what earlier reads memoized on it)
        self.assertIs(read, store.peek("/configmaps/ns1/a"))
        self.assertIs(await store.get("/configmaps/ns1/a"), read)
        # a version the cache does not hold is the backend's own answer
        newer = await store.update("/configmaps/ns1/a", b"1", read.mod_revision)
        await until(lambda: store.peek("/configmaps/ns1/a").mod_revision == newer.mod_revision, what="catch-up")
        old = await store.get("/configmaps/ns1/a", revision=read.mod_revision)
        self.assertEqual((old.value, old.mod_revision), (b"0", read.mod_revision))
        self.assertIsNot(old, read)

    async def test_after_a_futile_wait_consistent_lists_read_the_backend_at_once(self):
        class NoProgress(Recording):  # as an etcd others write to, without progress notifications
            def watch(self, prefix, after, on_event, on_error, on_progress=None):
                return super().watch(prefix, after, on_event, on_error, None)
        backend = NoProgress(SQLiteStorage(sqlite_path(self)))
        clock = task.Clock()
        store = CachedStorage(backend, consistent_wait=0.3, reactor=clock)
        await store.start()
        self.addCleanup(store.stop)
        await store.create("/configmaps/ns/a", b"1")
        await store.list("/configmaps/")  # builds the cache
        await store.create("/other/x", b"1")  # the revision moves on elsewhere
        lists = backend.calls.get("list", 0)
        listing = store.list("/configmaps/")
        # it waits for the cache to reach the revision: a timer of consistent_wait, no answer yet
        await until(lambda: bool(clock.getDelayedCalls()), timeout=HANG_GUARD, what="the wait for the cache")
        self.assertEqual([call.getTime() for call in clock.getDelayedCalls()], [clock.seconds() + 0.3])
        self.assertFalse(listing.called)
        clock.advance(0.3)  # waited in vain, then asked the backend
        self.assertEqual(len((await listing.addTimeout(HANG_GUARD, reactor)).items), 1)
        self.assertEqual((store.consistent_fallbacks, backend.calls["list"]), (1, lists + 1))
        # no second wait: the backend is asked with the fake clock standing still
        listed = await answered_without_waiting(self, clock, store.list("/configmaps/"))
        self.assertEqual(len(listed.items), 1)
        self.assertEqual((store.consistent_fallbacks, backend.calls["list"]), (2, lists + 2))
        await store.create("/configmaps/ns/b", b"2")  # an event brings the cache to the current revision
        await until(lambda: store.cache_for("/configmaps/").revision == store.backend.backend.local_revision(),
                    what="the cache to see the write")
        self.assertEqual(len((await store.list("/configmaps/")).items), 2)
        self.assertEqual((store.consistent_fallbacks, backend.calls["list"]), (2, lists + 2))  # from memory again

    async def test_many_watchers_share_one_backend_watch(self):
        store, backend = await self.open()
        await store.create("/configmaps/ns/seed", b"x")
        start = (await store.list("/configmaps/")).revision  # the cache is built here
        recs = [self.watch(store, "/configmaps/", start) for _ in range(500)]
        writes = [store.create(f"/configmaps/ns/k{i:02d}", b"v") for i in range(50)]
        await defer.gatherResults(writes, consumeErrors=True)
        await store.delete("/configmaps/ns/k00")
        want = list(range(start + 1, start + 52))
        await until(lambda: all(len(r.events) == 51 for r in recs), what="every event to every watcher")
        for rec in recs:
            self.assertEqual(rec.revisions(), want)
            self.assertEqual(rec.errors, [])
        self.assertEqual(recs[0].events[-1].type, DELETE)
        # The very same Event objects reach every watcher (so a memo in Event.cache is shared).
        self.assertTrue(all(r.events[7] is recs[0].events[7] for r in recs))
        self.assertEqual([w["prefix"] for w in backend.watches], ["/configmaps/"])
        self.assertEqual(store.watcher_count(), 500)
        # progress follows shortly after (the embedded store batches it, sqlite_watch.PROGRESS_DELAY)
        await until(lambda: bool(recs[0].progress) and recs[0].progress[-1] >= start + 51, what="progress")

    async def test_values_written_are_kept_at_their_own_size(self):
        # orjson.dumps (how the registry encodes what it stores) hands back bytes in a buffer
        # several times their length; what the cache keeps of a write must not be that buffer
        store, _ = await self.open()
        await store.list("/configmaps/")  # the cache is built: it keeps what is written
        tracing = tracemalloc.is_tracing()
        if not tracing:
            tracemalloc.start()
            self.addCleanup(tracemalloc.stop)
        payload = {"kind": "ConfigMap", "data": {"payload": "0123456789" * 100}}

        def encoded(obj: dict) -> bytes:
            return orjson.dumps(obj)
        encoder = tracemalloc.Filter(True, __file__, lineno=encoded.__code__.co_firstlineno + 1)
        for i in range(50):
            kv = await store.create(f"/configmaps/ns/k{i:02d}", encoded(payload))
            await store.update(kv.key, encoded(dict(payload, n=i)), kv.mod_revision)
        del kv
        gc.collect()
        held = tracemalloc.take_snapshot().filter_traces([encoder])
        self.assertEqual(sum(stat.size for stat in held.statistics("lineno")), 0,
                         "the cache holds the encoder's buffers")
        cached = await store.get_cached("/configmaps/ns/k07")
        self.assertEqual(orjson.loads(cached.value), dict(payload, n=7))

    async def test_event_memo_is_per_event_and_ignored_by_equality(self):
        kv = KeyValue("/k/a", b"1", 1, 1)
        one, two = Event(PUT, kv, None, 1), Event(PUT, kv, None, 1)
        one.cache["json"] = b"encoded"
        self.assertEqual(one, two)
        self.assertEqual(two.cache, {})

    async def test_watch_older_than_the_window_is_too_old(self):
        store, _ = await self.open(window_events=5, window_seconds=0.0)
        await store.list("/configmaps/")  # built at revision 0
        for i in range(20):
            await store.create(f"/configmaps/ns/k{i:02d}", b"v")
        cache = store.cache_for("/configmaps/")
        await until(lambda: cache.revision == 20, what="catch-up")
        self.assertEqual(cache.window_start, 15)
        old = self.watch(store, "/configmaps/", 3)
        edge = self.watch(store, "/configmaps/", 15)
        await until(lambda: old.errors and len(edge.events) == 5, what="refusal and replay")
        self.assertIsInstance(old.errors[0], CompactedError)
        self.assertEqual((old.errors[0].requested, old.errors[0].compacted), (3, 15))
        self.assertEqual(old.events, [])
        self.assertEqual(edge.revisions(), [16, 17, 18, 19, 20])

    async def test_compaction_through_the_cache_refuses_older_watches(self):
        store, backend = await self.open()
        await store.list("/configmaps/")  # built at revision 0: the window has everything
        for i in range(6):
            await store.create(f"/configmaps/ns/k{i}", b"v")
        await store.compact(4)
        old = self.watch(store, "/configmaps/", 1)
        ok = self.watch(store, "/configmaps/", 3)
        await until(lambda: old.errors and len(ok.events) == 3, what="refusal and replay")
        self.assertEqual((old.errors[0].requested, old.errors[0].compacted), (1, 4))
        self.assertEqual(ok.revisions(), [4, 5, 6])
        self.assertEqual([w["prefix"] for w in backend.watches], ["/configmaps/"])

    async def test_young_window_serves_older_history_from_the_backend(self):
        store, _ = await self.open()
        for i in range(5):
            await store.create(f"/configmaps/ns/k{i}", b"v")
        await store.list("/configmaps/")  # built at revision 5: the window starts there
        rec = self.watch(store, "/configmaps/", 2)
        await until(lambda: len(rec.events) == 3, what="history from the backend")
        await store.create("/configmaps/ns/live", b"v")
        await until(lambda: len(rec.events) == 4, what="live event")
        self.assertEqual(rec.revisions(), [3, 4, 5, 6])

    async def test_namespace_watcher_gets_only_its_namespace(self):
        store, backend = await self.open()
        start = (await store.list("/configmaps/")).revision
        ns1 = self.watch(store, "/configmaps/ns1/", start)
        every = self.watch(store, "/configmaps/", start)
        for key in ("/configmaps/ns1/a", "/configmaps/ns2/a", "/configmaps/ns10/a", "/configmaps/ns1/b",
                    "/secrets/ns1/a"):
            await store.create(key, b"x")
        await until(lambda: len(every.events) == 4 and len(ns1.events) == 2, what="fan-out")
        await sleep(0.05)
        self.assertEqual([e.kv.key for e in ns1.events], ["/configmaps/ns1/a", "/configmaps/ns1/b"])
        self.assertEqual(len(every.events), 4)
        self.assertEqual([w["prefix"] for w in backend.watches], ["/configmaps/"])

    async def test_progress_reaches_watchers_for_bookmarks(self):
        store, _ = await self.open()
        await store.create("/configmaps/ns/a", b"x")
        start = await store.current_revision()
        rec = self.watch(store, "/configmaps/ns/", start)
        await until(lambda: rec.progress, what="the watch to attach")
        self.assertEqual(rec.progress, [start])
        # Writes elsewhere move the revision a bookmark can carry.
        await store.create("/secrets/ns/a", b"x")
        await store.create("/configmaps/other/a", b"x")
        await until(lambda: rec.progress[-1] == start + 2, what="progress past foreign writes")
        self.assertEqual(rec.events, [])

    async def test_backend_watch_failure_ends_client_watches_and_rebuilds(self):
        store, backend = await self.open()
        await store.create("/configmaps/ns/a", b"1")
        start = (await store.list("/configmaps/")).revision  # the cache is built here
        recs = [self.watch(store, "/configmaps/ns/", start) for _ in range(3)]
        await store.create("/configmaps/ns/b", b"2")
        await until(lambda: all(len(r.events) == 1 for r in recs), what="first event")
        upstream = backend.watches[0]
        upstream["handle"].cancel()
        upstream["on_error"](CompactedError(start, start + 1))  # the backend watch fell behind
        for rec in recs:
            self.assertEqual(len(rec.errors), 1)
            self.assertIsInstance(rec.errors[0], CompactedError)
        # A rebuilt cache serves again, with a fresh backend watch.
        await store.create("/configmaps/ns/c", b"3")
        page = await store.list("/configmaps/")
        self.assertEqual([kv.key for kv in page.items], ["/configmaps/ns/a", "/configmaps/ns/b", "/configmaps/ns/c"])
        again = self.watch(store, "/configmaps/", page.revision)
        await store.update("/configmaps/ns/a", b"4")
        await until(lambda: again.events, what="an event through the rebuilt cache")
        self.assertEqual(again.summary(), [(PUT, "/configmaps/ns/a", b"4")])
        self.assertEqual(len(backend.watches), 2)
        self.assertEqual(store.cache_for("/configmaps/").rebuilds, 1)
        # The ended watches stay ended.
        self.assertEqual([len(r.events) for r in recs], [1, 1, 1])

    async def test_uncached_prefixes_pass_through(self):
        store, backend = await self.open(prefixes=["/configmaps/"])
        await store.create("/secrets/ns/a", b"x")
        page = await store.list("/secrets/")
        self.assertEqual(len(page.items), 1)
        self.assertEqual(store.cached_prefixes(), [])
        self.assertEqual((await store.list("/")).count, 1)
        self.assertEqual(store.cached_prefixes(), [])

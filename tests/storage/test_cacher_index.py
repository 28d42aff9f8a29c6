"""The watch cache's secondary indexes (storage/cacher_index.py): what an indexed list returns is
what a scan of the cache's objects with the same condition returns, at the same revision, through
creates, updates that move an object to another value, deletes, rebuilds and evictions."""
from __future__ import annotations

import os
from typing import Any, Optional

from twisted.internet import defer, task
from twisted.trial import unittest

from kapiserver.storage import cacher_index, cacher_watch_cache
from kapiserver.storage.cacher import CachedStorage
from kapiserver.storage.interface import CompactedError, KeyValue, ListResult
from kapiserver.storage.sqlite import SQLiteStorage
from tests.storage.contract import until
from tests.storage.test_cacher import Recording

PREFIX = "/pods/"


def node_of(kv: KeyValue) -> Optional[str]:
    """The test's objects are ``node|payload`` (``|payload`` alone: no node)."""
    node = kv.value.split(b"|", 1)[0].decode()
    return node or None


def zone_of(kv: KeyValue) -> Optional[str]:
    return kv.value.split(b"|", 2)[1].decode() if kv.value.count(b"|") >= 2 else None


class IndexTests(unittest.TestCase):
    async def open(self, **kw: Any) -> tuple[CachedStorage, Recording]:
        path = os.path.abspath(self.mktemp()) + ".db"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        backend = Recording(SQLiteStorage(path))
        store = CachedStorage(backend, **kw)
        await store.start()
        self.addCleanup(store.stop)
        return store, backend

    async def scan(self, store: CachedStorage, prefix: str, values: frozenset[str],
                   value_of=node_of) -> ListResult:
        """The same question answered by listing every key (the reference)."""
        page = await store.list(prefix)
        return ListResult([kv for kv in page.items if value_of(kv) in values], page.revision, False, 0)

    async def indexed(self, store: CachedStorage, prefix: str, values: frozenset[str], name: str = "node",
                      value_of=node_of, **kw) -> Optional[ListResult]:
        return await store.list_indexed(prefix, name, value_of, values, **kw)

    async def assert_same(self, store: CachedStorage, prefix: str, values: frozenset[str]) -> list[str]:
        got = await self.indexed(store, prefix, values)
        assert got is not None
        want = await self.scan(store, prefix, values)
        self.assertEqual([(kv.key, kv.value) for kv in got.items], [(kv.key, kv.value) for kv in want.items])
        self.assertEqual((got.more, got.count), (False, len(want.items)))
        self.assertGreaterEqual(got.revision, max([kv.mod_revision for kv in got.items], default=0))
        return [kv.key for kv in got.items]

    async def test_the_cache_answers_from_an_index_and_a_store_without_one_does_not(self):
        store, _ = await self.open()
        await store.create("/pods/ns0/p", b"n1|x")
        answered = await self.indexed(store, PREFIX, frozenset({"n1"}))
        self.assertEqual([kv.key for kv in answered.items] if answered is not None else None, ["/pods/ns0/p"])
        bare = SQLiteStorage(":memory:")
        # the storage contract's default: no index, the caller lists the prefix
        self.assertIsNone(await bare.list_indexed(PREFIX, "node", node_of, frozenset({"n1"})))

    async def test_indexed_lists_follow_creates_moves_and_deletes(self):
        store, backend = await self.open()
        for i in range(30):
            await store.create(f"/pods/ns{i % 3}/p{i:02d}", f"n{i % 5}|{i}".encode())
        await store.create("/pods/ns0/unbound", b"|x")
        n1 = frozenset({"n1"})
        self.assertEqual(await self.assert_same(store, PREFIX, n1),
                         ["/pods/ns0/p06", "/pods/ns0/p21", "/pods/ns1/p01", "/pods/ns1/p16",
                          "/pods/ns2/p11", "/pods/ns2/p26"])
        self.assertEqual(await self.assert_same(store, "/pods/ns1/", n1), ["/pods/ns1/p01", "/pods/ns1/p16"])
        self.assertEqual(len(await self.assert_same(store, PREFIX, frozenset({"n1", "n2"}))), 12)
        self.assertEqual(await self.assert_same(store, PREFIX, frozenset({"nowhere"})), [])
        # an update moves an object from one value to another; one without a value is in none
        await store.update("/pods/ns1/p01", b"n2|moved")
        await store.update("/pods/ns0/unbound", b"n1|bound")
        await store.update("/pods/ns2/p11", b"|unbound")
        await store.delete("/pods/ns0/p06")
        kv = await store.create("/pods/ns2/p99", b"n1|new")
        got = await self.indexed(store, PREFIX, n1)
        self.assertGreaterEqual(got.revision, kv.mod_revision)  # a consistent read sees the last write
        self.assertEqual(await self.assert_same(store, PREFIX, n1),
                         ["/pods/ns0/p21", "/pods/ns0/unbound", "/pods/ns1/p16", "/pods/ns2/p26", "/pods/ns2/p99"])
        self.assertIn("/pods/ns1/p01", await self.assert_same(store, PREFIX, frozenset({"n2"})))
        # the index is made once: the backend was listed once, to build the cache
        self.assertEqual(backend.calls.get("list", 0), 1)

    async def built_in_chunks(self, pods: int) -> tuple[CachedStorage, cacher_watch_cache.WatchCache, task.Clock, defer.Deferred]:
        """A cache of ``pods`` pods, its node index being built four keys a reactor turn, on a
        clock the test turns: the store, the cache, the clock and the index's build (whose
        first chunk is indexed now)."""
        self.patch(cacher_watch_cache, "BUILD_CHUNK", 4)
        clock = task.Clock()
        store, _ = await self.open(reactor=clock)
        for i in range(pods):
            await store.create(f"/pods/ns/p{i:02d}", f"n{i % 2}|{i}".encode())
        await store.list(PREFIX)  # the cache is built; the index is not
        cache = store.cache_for(PREFIX)
        return store, cache, clock, cache.index("node", node_of)

    async def built_then_written(self, built: int, written: int) -> tuple[CachedStorage, cacher_watch_cache.WatchCache,
                                                                          task.Clock, cacher_index.Index]:
        """:meth:`built_in_chunks` of ``built`` pods with its index finished, then the pods from ``built``
        to ``written`` created: the store, the cache, the clock and the index."""
        store, cache, clock, building = await self.built_in_chunks(built)
        while not building.called:
            clock.advance(0)
        for i in range(built, written):
            await store.create(f"/pods/ns/p{i:02d}", f"n{i % 2}|{i}".encode())
        return store, cache, clock, building.result

    async def test_an_index_built_a_chunk_at_a_time_misses_no_write_made_meanwhile(self):
        store, cache, clock, building = await self.built_in_chunks(40)
        self.assertFalse(building.called)
        # writes while the index is built: behind its position, ahead of it, and new keys
        await store.update("/pods/ns/p00", b"n1|moved early")
        await store.update("/pods/ns/p39", b"n1|moved late")
        await store.update("/pods/ns/p21", b"n0|moved in")
        await store.delete("/pods/ns/p02")
        await store.delete("/pods/ns/p10")
        last = await store.create("/pods/ns/p40", b"n0|created")
        await until(lambda: cache.revision >= last.mod_revision, what="the cache to see the writes")
        while not building.called:
            clock.advance(0)
        self.assertIsNotNone(building.result)
        await self.assert_same(store, PREFIX, frozenset({"n0"}))
        await self.assert_same(store, PREFIX, frozenset({"n1"}))

    async def test_writes_since_the_last_indexed_list_are_all_in_the_next(self):
        # writes are indexed when the index is next read, a chunk per reactor turn: more of them
        # than a chunk, moves and deletes among them, and a write made while it catches up
        store, cache, clock, index = await self.built_then_written(8, 30)
        await store.update("/pods/ns/p00", b"n1|moved")
        await store.update("/pods/ns/p03", b"n0|moved")
        await store.delete("/pods/ns/p02")
        last = await store.update("/pods/ns/p29", b"n0|moved twice")
        await until(lambda: cache.revision >= last.mod_revision, what="the cache to see the writes")
        catching_up = defer.Deferred.fromCoroutine(cache.catch_up(index))
        self.assertFalse(catching_up.called)  # a chunk now, the rest on later turns
        last = await store.update("/pods/ns/p05", b"n0|moved while catching up")
        await until(lambda: cache.revision >= last.mod_revision, what="the cache to see the write")
        listed = {}
        for node in ("n0", "n1"):
            listing = defer.Deferred.fromCoroutine(self.indexed(store, PREFIX, frozenset({node}), any_state=True))
            while not (listing.called and catching_up.called):
                clock.advance(0)
            listed[node] = [kv.key for kv in listing.result.items]
            want = await self.scan(store, PREFIX, frozenset({node}))
            self.assertEqual(listed[node], [kv.key for kv in want.items])
        self.assertEqual(listed["n0"], [f"/pods/ns/p{i:02d}" for i in (3, 4, 5, 6, *range(8, 30, 2), 29)])
        self.assertEqual(index.pending, {})

    async def test_writes_are_indexed_in_the_background_soon_after(self):
        # so a selective list after many writes (a node's pods after 20,000 were created) finds
        # little left to index and costs what it returns: a chunk per reactor turn, starting a
        # moment after the first write (a key written twice meanwhile is indexed once)
        store, cache, clock, index = await self.built_then_written(4, 14)
        last = await store.update("/pods/ns/p04", b"n1|moved")
        await until(lambda: cache.revision >= last.mod_revision, what="the cache to see the writes")
        self.assertEqual(len(index.pending), 10)
        clock.advance(cacher_index.INDEX_CATCH_UP_SECONDS * 0.99)
        self.assertEqual(len(index.pending), 10)  # not yet
        clock.advance(cacher_index.INDEX_CATCH_UP_SECONDS * 0.01)  # (task.Clock runs the later chunks too)
        self.assertEqual(index.pending, {})
        self.assertEqual(index.of_key["/pods/ns/p04"], "n1")
        self.assertEqual(await self.assert_same(store, PREFIX, frozenset({"n1"})),
                         [f"/pods/ns/p{i:02d}" for i in (1, 3, 4, 5, 7, 9, 11, 13)])

    async def test_resource_versions(self):
        store, _ = await self.open()
        for i in range(10):
            await store.create(f"/pods/ns/p{i}", f"n{i % 2}|{i}".encode())
        n0 = frozenset({"n0"})
        first = await self.indexed(store, PREFIX, n0)
        at = first.revision
        # the cache's own revision, exactly; a continuation from a key on
        exact = await self.indexed(store, PREFIX, n0, revision=at)
        self.assertEqual([kv.key for kv in exact.items], [kv.key for kv in first.items])
        rest = await self.indexed(store, PREFIX, n0, revision=at, start_key="/pods/ns/p4\x00")
        self.assertEqual([kv.key for kv in rest.items], ["/pods/ns/p6", "/pods/ns/p8"])
        # any recent state: from memory
        self.assertEqual([kv.key for kv in (await self.indexed(store, PREFIX, n0, any_state=True)).items],
                         [kv.key for kv in first.items])
        # once the cache moved on, an older revision is not the index's to answer
        await store.update("/pods/ns/p0", b"n1|moved")
        await until(lambda: store.cache_for(PREFIX).revision > at, what="the cache to move on")
        self.assertIsNone(await self.indexed(store, PREFIX, n0, revision=at))
        self.assertIsNone(await self.indexed(store, PREFIX, n0, revision=at, start_key="/pods/ns/p4\x00"))
        # nor a continuation of a compacted revision, even the cache's own
        now = store.cache_for(PREFIX).revision
        await store.compact(now)
        self.assertEqual([kv.key for kv in (await self.indexed(store, PREFIX, n0, revision=now)).items],
                         ["/pods/ns/p2", "/pods/ns/p4", "/pods/ns/p6", "/pods/ns/p8"])
        await store.update("/pods/ns/p1", b"n1|again")
        await store.compact(now + 1)
        await until(lambda: store.cache_for(PREFIX).revision > now, what="the cache to move on")
        later = store.cache_for(PREFIX).revision
        self.assertIsNone(await self.indexed(store, PREFIX, n0, revision=now, start_key="/pods/ns/p4\x00"))
        self.assertIsNotNone(await self.indexed(store, PREFIX, n0, revision=later, start_key="/pods/ns/p4\x00"))

    async def test_a_rebuilt_cache_rebuilds_its_indexes(self):
        store, backend = await self.open()
        for i in range(6):
            await store.create(f"/pods/ns/p{i}", f"n{i % 2}|{i}".encode())
        await self.assert_same(store, PREFIX, frozenset({"n0"}))
        upstream = backend.watches[0]
        upstream["handle"].cancel()
        start = store.cache_for(PREFIX).revision
        await store.update("/pods/ns/p0", b"n1|moved while the cache was down")
        upstream["on_error"](CompactedError(start, start + 1))
        self.assertEqual(await self.assert_same(store, PREFIX, frozenset({"n0"})), ["/pods/ns/p2", "/pods/ns/p4"])
        self.assertEqual(store.cache_for(PREFIX).rebuilds, 1)

    async def test_the_least_recently_used_index_goes_when_another_is_needed(self):
        self.patch(cacher_watch_cache, "MAX_INDEXES", 2)
        store, _ = await self.open()
        for i in range(8):
            await store.create(f"/pods/ns/p{i}", f"n{i % 2}|z{i % 4}|{i}".encode())
        zones = frozenset({"z1"})
        self.assertEqual(len((await self.indexed(store, PREFIX, frozenset({"n0"}))).items), 4)
        self.assertEqual(len((await self.indexed(store, PREFIX, zones, "zone", zone_of)).items), 2)
        cache = store.cache_for(PREFIX)
        self.assertEqual(sorted(cache._indexes), ["node", "zone"])
        await self.indexed(store, PREFIX, frozenset({"n1"}))  # node used last: zone goes
        await store.update("/pods/ns/p1", b"n0|z1|moved")
        third = await self.indexed(store, PREFIX, frozenset({"x"}), "other", lambda kv: "x")
        self.assertEqual(len(third.items), 8)
        self.assertEqual(sorted(cache._indexes), ["node", "other"])
        self.assertEqual([kv.key for kv in (await self.indexed(store, PREFIX, zones, "zone", zone_of)).items],
                         ["/pods/ns/p1", "/pods/ns/p5"])
        await self.assert_same(store, PREFIX, frozenset({"n0"}))

    async def test_another_function_under_the_same_name_makes_a_new_index(self):
        store, _ = await self.open()
        for i in range(4):
            await store.create(f"/pods/ns/p{i}", f"n{i}|z{i % 2}|{i}".encode())
        self.assertEqual(len((await self.indexed(store, PREFIX, frozenset({"z1"}), "f", node_of)).items), 0)
        self.assertEqual(len((await self.indexed(store, PREFIX, frozenset({"z1"}), "f", zone_of)).items), 2)

    async def test_a_value_that_cannot_be_read_is_in_no_index(self):
        store, _ = await self.open()
        await store.create("/pods/ns/a", b"n0|ok")
        await store.create("/pods/ns/b", b"\xff|corrupt")
        self.assertEqual([kv.key for kv in (await self.indexed(store, PREFIX, frozenset({"n0"}))).items],
                         ["/pods/ns/a"])

    async def test_uncached_prefixes_are_not_answered(self):
        store, _ = await self.open()
        self.assertIsNone(await self.indexed(store, "/", frozenset({"n0"})))


class IndexUnitTests(unittest.TestCase):
    def test_keys_leave_their_old_value(self):
        index = cacher_index.Index(node_of)
        index.put(KeyValue("/k", b"a|", 1, 1))
        index.put(KeyValue("/k", b"b|", 1, 2))
        self.assertEqual(index.keys_with(["a"]), set())
        self.assertEqual(index.keys_with(["a", "b"]), {"/k"})
        index.remove("/k")
        self.assertEqual((index.by_value, index.of_key), ({}, {}))

    def test_a_written_value_is_read_once_when_the_index_is(self):
        read: list[bytes] = []

        def recording_node_of(kv: KeyValue) -> Optional[str]:
            read.append(kv.value)
            return node_of(kv)
        index = cacher_index.Index(recording_node_of)
        index.put(KeyValue("/k", b"a|", 1, 1))
        index.put(KeyValue("/k", b"b|", 1, 2))
        index.put(KeyValue("/gone", b"a|", 3, 3))
        index.remove("/gone")
        self.assertEqual(read, [])
        self.assertEqual(index.keys_with(["a", "b"]), {"/k"})
        self.assertEqual(read, [b"b|"])

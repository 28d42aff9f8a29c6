"""Snapshot and restore of the SQLite store (per-test isolation, ``testing.enable_reset``).

A restore writes forward: what it deletes, rewrites and re-creates gets new revisions and
watch events, so watchers and the watch cache follow it; revisions never go backwards.
"""
from __future__ import annotations

import os

from twisted.trial import unittest

from kapiserver.storage.cacher import CachedStorage
from kapiserver.storage.etcd.backend import EtcdStorage
from kapiserver.storage.interface import DELETE, PUT, NoSnapshotError, RestoreResult
from kapiserver.storage.sqlite import SQLiteStorage
from tests.storage.contract import record_watch, until


class SQLiteSnapshotTests(unittest.TestCase):
    def path(self) -> str:
        path = os.path.abspath(self.mktemp()) + ".db"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    async def open(self, path: str, **kw) -> SQLiteStorage:
        store = SQLiteStorage(path, **kw)
        await store.start()
        self.addCleanup(store.stop)
        return store

    @staticmethod
    async def contents(store, prefix: str = "/") -> dict[str, bytes]:
        return {kv.key: kv.value for kv in (await store.list(prefix)).items}

    async def bootstrap(self, store) -> dict[str, bytes]:
        for name in ("kept", "changed", "deleted", "changed-back"):
            await store.create(f"/cm/{name}", name.encode())
        await store.snapshots().snapshot()
        return await self.contents(store)

    async def test_restore_brings_back_exactly_the_snapshot(self):
        store = await self.open(self.path())
        saved = await self.bootstrap(store)
        before = await store.current_revision()
        await store.create("/cm/created", b"new")
        changed = await store.get("/cm/changed")
        await store.update("/cm/changed", b"other")
        await store.delete("/cm/deleted")
        back = await store.update("/cm/changed-back", b"other")
        await store.update("/cm/changed-back", b"changed-back", back.mod_revision)
        after_test = await store.current_revision()

        done = await store.restore()

        self.assertEqual(done, RestoreResult(deleted=1, rewritten=1, recreated=1, revision=after_test + 3))
        self.assertEqual(await self.contents(store), saved)
        self.assertEqual(await store.current_revision(), after_test + 3)
        restored = await store.get("/cm/changed")
        self.assertGreater(restored.mod_revision, after_test)
        self.assertEqual(restored.create_revision, changed.create_revision)  # the same key, written again
        self.assertGreater((await store.get("/cm/deleted")).create_revision, before)  # created again
        # nothing left to do: a second restore writes nothing
        self.assertEqual(await store.restore(), RestoreResult(0, 0, 0, after_test + 3))

    async def test_watchers_see_the_restore_as_events(self):
        store = await self.open(self.path())
        await self.bootstrap(store)
        await store.create("/cm/created", b"new")
        await store.update("/cm/changed", b"other")
        await store.delete("/cm/deleted")
        start = await store.current_revision()
        rec = record_watch(self, store, "/cm/", start)
        await store.restore()
        await until(lambda: len(rec.events) == 3, what="the restore's events")
        self.assertEqual([(e.type, e.kv.key, e.prev_kv is None) for e in rec.events],
                         [(DELETE, "/cm/created", False), (PUT, "/cm/changed", False), (PUT, "/cm/deleted", True)])
        self.assertEqual([e.revision for e in rec.events], [start + 1, start + 2, start + 3])
        self.assertEqual(rec.events[1].kv.value, b"changed")
        self.assertEqual(rec.events[1].prev_kv.value, b"other")

    async def test_watch_cache_ends_equal_to_storage(self):
        backend = await self.open(self.path())
        cached = CachedStorage(backend)
        await self.bootstrap(cached)
        await cached.list_cached("/cm/")  # the cache is built before the test's writes
        await cached.create("/cm/created", b"new")
        await cached.update("/cm/changed", b"other")
        await cached.delete("/cm/deleted")
        done = await cached.snapshots().restore()  # the backend's, declared through the cache
        await until(lambda: cached.cache_for("/cm/").revision >= done.revision, what="the cache to catch up")
        from_cache = {kv.key: (kv.value, kv.mod_revision) for kv in (await cached.list_cached("/cm/")).items}
        stored = {kv.key: (kv.value, kv.mod_revision) for kv in (await backend.list("/cm/")).items}
        self.assertEqual(from_cache, stored)

    async def test_only_the_embedded_store_declares_snapshots(self):
        """The reset endpoint exists where the storage declares snapshots: SQLite, through the
        watch cache and encryption; a backend that cannot take them (etcd) declares none."""
        store = await self.open(self.path())
        self.assertIs(CachedStorage(store).snapshots(), store)
        self.assertIsNone(CachedStorage(EtcdStorage(["http://127.0.0.1:1"])).snapshots())  # (never started)

    async def test_restore_before_any_snapshot_fails_and_writes_nothing(self):
        store = await self.open(self.path())
        await store.create("/cm/a", b"a")
        with self.assertRaises(NoSnapshotError):
            await store.restore()
        self.assertEqual(await store.current_revision(), 1)
        self.assertEqual(await self.contents(store), {"/cm/a": b"a"})

    async def test_the_snapshot_survives_a_restart(self):
        path = self.path()
        store = SQLiteStorage(path)
        await store.start()
        saved = await self.bootstrap(store)
        await store.create("/cm/created", b"new")
        await store.stop()
        store = await self.open(path)
        await store.restore()
        self.assertEqual(await self.contents(store), saved)

    async def test_restore_after_compaction(self):
        """Compaction drops the history the snapshot was taken at; the snapshot keeps its own copy."""
        store = await self.open(self.path())
        saved = await self.bootstrap(store)
        await store.update("/cm/changed", b"other")
        await store.delete("/cm/deleted")
        await store.compact(await store.current_revision())
        await store.restore()
        self.assertEqual(await self.contents(store), saved)

    async def test_a_key_whose_lease_expired_stays_deleted(self):
        store = await self.open(self.path(), lease_sweep_interval=0.05)
        lease = await store.grant_lease(1)
        await store.create("/events/e", b"e", lease)
        await store.create("/cm/a", b"a")
        await store.snapshot()
        expired = record_watch(self, store, "/events/", await store.current_revision())
        await until(lambda: bool(expired.events), timeout=30, what="the lease to expire")
        await store.restore()
        self.assertEqual(await self.contents(store), {"/cm/a": b"a"})

    async def test_shared_stores_both_see_the_restore(self):
        """workers: N: the restore made by one process reaches the other's watchers."""
        path = self.path()
        first = await self.open(path, shared=True)
        second = await self.open(path, shared=True, maintenance=False)
        saved = await self.bootstrap(first)
        await second.create("/cm/created", b"new")
        await second.delete("/cm/deleted")
        start = await second.current_revision()
        rec = record_watch(self, second, "/cm/", start)
        done = await first.restore()
        await until(lambda: len(rec.events) == 2, what="the other process's events")
        self.assertEqual([(e.type, e.kv.key, e.revision) for e in rec.events],
                         [(DELETE, "/cm/created", start + 1), (PUT, "/cm/deleted", start + 2)])
        self.assertEqual(done.revision, start + 2)
        self.assertEqual(await self.contents(second), saved)

"""The SQLite backend: the shared storage contract plus what only it promises."""
from __future__ import annotations

import os
import threading
import time

from twisted.internet import defer, reactor, task, threads
from twisted.trial import unittest

from kapiserver.storage import sqlite_watch
from kapiserver.storage.interface import PUT, Event, KeyValue
from kapiserver.storage.sqlite import SQLiteStorage
from kapiserver.testing.cases import HANG_GUARD
from tests.storage.contract import StorageContractTests, record_watch, until


class SQLiteContractTests(StorageContractTests, unittest.TestCase):
    async def make_storage(self) -> SQLiteStorage:
        self.path = os.path.abspath(self.mktemp()) + ".db"
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        store = SQLiteStorage(self.path, lease_sweep_interval=0.2)
        await store.start()
        return store

    async def restart_storage(self) -> SQLiteStorage:
        await self.storage.stop()
        store = SQLiteStorage(self.path, lease_sweep_interval=0.2)
        await store.start()
        return store


class SQLiteBackendTests(unittest.TestCase):
    """Promises of the embedded backend beyond the shared contract."""

    def path(self) -> str:
        path = self.mktemp() + ".db"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    async def open(self, path: str, **kw) -> SQLiteStorage:
        store = SQLiteStorage(path, **kw)
        await store.start()
        self.addCleanup(store.stop)
        return store

    async def test_compaction_survives_restart(self):
        path = self.path()
        store = await self.open(path)
        for i in range(10):
            await store.create(f"/c/{i}", b"x")
        await store.compact(6)
        await store.stop()
        store = await self.open(path)
        self.assertEqual(await store.compacted_revision(), 6)
        self.assertEqual(await store.current_revision(), 10)
        self.assertEqual((await store.list("/c/", revision=6)).count, 6)
        errors = []
        store.watch("/c/", 2, lambda e: None, errors.append)
        await task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(len(errors), 1)

    async def test_periodic_compaction_follows_kube_apiservers_schedule(self):
        # each run compacts to the revision the previous run saw, written to since or not, so an
        # old revision (a continue token's) expires after one to two intervals, as upstream's
        from kapiserver.storage.interface import CompactedError
        store = await self.open(self.path(), compaction_interval=0)  # runs driven by the test

        async def interval_ends() -> None:
            d = store._periodic_compact()
            if d is not None:
                await d
        for i in range(3):
            await store.create(f"/c/{i}", b"x")
        page = await store.list("/c/", limit=1)
        await interval_ends()  # the first run only notes the revision
        self.assertEqual(await store.compacted_revision(), 0)
        self.assertEqual((await store.list("/c/", revision=page.revision)).count, 3)
        await interval_ends()  # nothing written since: compacted to what the first run saw
        self.assertEqual(await store.compacted_revision(), 3)
        await store.create("/c/3", b"x")
        with self.assertRaises(CompactedError):
            await store.list("/c/", revision=2)
        self.assertEqual((await store.list("/c/")).count, 4)

    async def test_churn_with_periodic_compaction_keeps_the_file_small(self):
        # 50 keys rewritten 100 times each with 1 KiB values: 5,000 revisions,
        # about 5 MiB of history if nothing were ever removed.  With the last
        # 200 revisions retained, what must stay is 50 live values plus 200
        # history rows (~250 KiB of payload, plus b-tree and page overhead),
        # so 1 MiB for database + WAL is a comfortable but meaningful bound.
        path = self.path()
        store = await self.open(path, compaction_interval=0.05, compaction_retain=200)
        value = b"v" * 1024

        async def churn(key: str) -> None:
            kv = await store.create(key, value)
            for _ in range(99):
                kv = await store.update(key, value, kv.mod_revision)
        await defer.gatherResults([defer.Deferred.fromCoroutine(churn(f"/churn/{i:02d}")) for i in range(50)],
                                  consumeErrors=True)
        self.assertEqual(await store.current_revision(), 5000)
        deadline = time.monotonic() + HANG_GUARD
        while await store.compacted_revision() < 4800 and time.monotonic() < deadline:
            await task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(await store.compacted_revision(), 4800)
        await task.deferLater(reactor, 0.2, lambda: None)  # the reclaim step follows the compaction
        size = store.file_size()
        self.assertLess(size, 1024 * 1024, f"database + WAL is {size} bytes")
        page = await store.list("/churn/")
        self.assertEqual((page.count, page.items[0].value), (50, value))

    async def test_progress_asked_for_while_a_commit_is_published_skips_no_event(self):
        self.patch(sqlite_watch, "PROGRESS_DELAY", 30.0)  # a pending progress round stays pending
        store = await self.open(self.path())
        self.addCleanup(store.stop)
        start = await store.current_revision()
        on_b = record_watch(self, store, "/b/", start)
        seen_a = []

        def on_a(event):
            # what a consistent read resumed by this event does when its cache is behind
            seen_a.append(event)
            store.flush_progress()
        watch_a = store.watch("/a/", start, on_a, lambda err: None)
        self.addCleanup(watch_a.cancel)
        await store.create("/x/0", b"v")  # its publication leaves a progress round pending
        gate = threading.Event()
        held = store._on_writer(gate.wait)  # the writer is busy: the next two commit together
        together = [store.create("/a/1", b"v"), store.create("/b/1", b"v")]
        gate.set()
        await held
        written = await defer.gatherResults(together)
        await until(lambda: len(seen_a) == 1, what="the /a/ event")
        store.flush_progress()
        self.assertEqual(written[1].mod_revision, written[0].mod_revision + 1)
        self.assertEqual([e.kv.key for e in on_b.events], ["/b/1"])

    async def test_writes_queued_during_a_commit_go_to_the_writer_before_its_writes_are_answered(self):
        # A burst's writes must not wait for every answer of the batch before them (each
        # carries on its request on the reactor) besides their own fsync: the next batch is
        # handed to the writer first.
        store = await self.open(self.path())
        taken = threading.Event()
        take = store._take_queued

        def take_and_tell():
            batch = take()
            taken.set()
            return batch
        self.patch(store, "_take_queued", take_and_tell)
        first = store.create("/burst/a", b"v")
        await threads.deferToThread(taken.wait, HANG_GUARD)  # /burst/a is committing
        second = store.create("/burst/b", b"v")
        writer_busy_at_answer = []
        first.addCallback(lambda kv: writer_busy_at_answer.append(store._batch is not None) or kv)
        a, b = await defer.gatherResults([first, second])
        self.assertEqual(writer_busy_at_answer, [True])
        self.assertEqual(b.mod_revision, a.mod_revision + 1)
        self.assertEqual([kv.key for kv in (await store.list("/burst/")).items], ["/burst/a", "/burst/b"])

    async def test_reactor_stays_responsive_during_writes(self):
        # Commits run on the writer thread.  Hold it as a long commit would (a gate it waits
        # on): the reactor must go on meanwhile, queueing writes and answering reads, and no
        # write may finish before the writer is free.  Run on the reactor, the commits would
        # finish while the writer is held, or a read would wait behind them.
        store = await self.open(self.path())
        await store.create("/busy/seed", b"x")
        gate = threading.Event()
        self.addCleanup(gate.set)  # never leave the writer blocked
        held = store._on_writer(gate.wait)
        writes = []
        for i in range(2000):
            writes.append(store.create(f"/busy/{i:04d}", b"x" * 200))
            if i % 100 == 99:
                # Let the reactor turn between bursts, as a real server would.
                await task.deferLater(reactor, 0, lambda: None)
        page = await store.list("/busy/", limit=500).addTimeout(HANG_GUARD, reactor)
        self.assertEqual([kv.key for kv in page.items], ["/busy/seed"])  # answered, nothing new committed
        self.assertEqual([d for d in writes if d.called], [], "a write finished while the writer was held")
        gate.set()
        await held
        await defer.gatherResults(writes, consumeErrors=True)
        pages = [store.list("/busy/", limit=500) for _ in range(20)]
        self.assertEqual({len(p.items) for p in await defer.gatherResults(pages, consumeErrors=True)}, {500})
        self.assertEqual(await store.count("/busy/"), 2001)

    async def test_memory_store_serves_the_contract_basics(self):
        store = await self.open(":memory:")
        kv = await store.create("/m/a", b"1")
        await store.update("/m/a", b"2", kv.mod_revision)
        self.assertEqual((await store.get("/m/a", kv.mod_revision)).value, b"1")
        self.assertEqual([k.value for k in (await store.list("/m/")).items], [b"2"])

    async def test_writes_after_stop_fail_cleanly(self):
        from kapiserver.storage.interface import UnavailableError
        store = await self.open(self.path())
        await store.stop()
        with self.assertRaises(UnavailableError):
            await store.create("/x", b"1")
        with self.assertRaises(UnavailableError):
            await store.get("/x")


class WatchHubTests(unittest.TestCase):
    """The hub offers each event to the watches whose prefix its key starts with, whatever the prefix's length."""

    PREFIXES = ("/registry/", "/registry/configmaps", "/registry/configmaps/", "/registry/configmaps/ns/a",
                "/registry/configmaps-old/", "/registry/secrets/", "")

    def setUp(self) -> None:
        self.hub = sqlite_watch.WatchHub(self.no_history, task.Clock())
        self.seen: dict[str, list[str]] = {}

    async def no_history(self, prefix: str, after: int, bound: int, limit: int) -> list:
        return []

    def watch(self, prefix: str) -> sqlite_watch.HubWatch:
        seen = self.seen.setdefault(prefix, [])
        return self.hub.watch(prefix, self.hub.published, lambda e: seen.append(e.kv.key), lambda err: None)

    def publish(self, *keys: str) -> None:
        events = []
        for key in keys:
            rev = self.hub.published + len(events) + 1
            events.append(Event(PUT, KeyValue(key, b"{}", rev, rev), None, rev))
        self.hub.publish(events, self.hub.published + len(events))

    def test_every_prefix_gets_its_keys(self) -> None:
        for prefix in self.PREFIXES:
            self.watch(prefix)
        keys = ("/registry/configmaps/ns/a", "/registry/configmaps/ns/ab", "/registry/configmaps-old/ns/a",
                "/registry/secrets/ns/s", "/other", "x")
        self.publish(*keys)
        self.assertEqual(self.seen, {p: [k for k in keys if k.startswith(p)] for p in self.PREFIXES})

    def test_watches_that_come_and_go_between_events(self) -> None:
        first = self.watch("/registry/configmaps/")
        self.publish("/registry/configmaps/ns/a")
        self.watch("/registry/")
        first.cancel()
        self.publish("/registry/configmaps/ns/b")
        self.assertEqual(self.seen, {"/registry/configmaps/": ["/registry/configmaps/ns/a"],
                                     "/registry/": ["/registry/configmaps/ns/b"]})

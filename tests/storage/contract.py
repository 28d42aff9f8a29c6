"""The storage contract as a test mixin, run against every backend.

A backend's test module defines::

    class MyBackendContractTests(StorageContractTests, unittest.TestCase):
        async def make_storage(self) -> Storage: ...      # started store
        async def restart_storage(self) -> Storage: ...   # optional

``make_storage`` is called from ``setUp`` and the store is stopped in
``tearDown``.  Nothing here depends on one backend: revisions are always taken
relative to ``current_revision()``, never assumed to start anywhere.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

from twisted.internet import defer, reactor, task
from twisted.trial.unittest import SkipTest

from kapiserver.storage.interface import (
    DELETE, PUT, CompactedError, ConflictError, Event, FutureRevisionError, KeyExistsError,
    KeyNotFoundError, KeyValue, Storage)


def sleep(seconds: float) -> defer.Deferred:
    return task.deferLater(reactor, seconds, lambda: None)


async def until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Wait (without blocking the reactor) until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await sleep(0.01)


class Recorder:
    """Collects what a watch delivers."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.errors: list[Exception] = []
        self.progress: list[int] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)

    def on_error(self, err: Exception) -> None:
        self.errors.append(err)

    def on_progress(self, revision: int) -> None:
        self.progress.append(revision)

    def revisions(self) -> list[int]:
        return [e.revision for e in self.events]

    def summary(self) -> list[tuple[str, str, bytes]]:
        return [(e.type, e.kv.key, e.kv.value) for e in self.events]


def record_watch(test, store, prefix: str, after: int) -> Recorder:
    """Watch ``prefix`` of ``store`` after revision ``after`` into a new Recorder (its
    ``handle``), cancelled when ``test`` ends."""
    rec = Recorder()
    rec.handle = store.watch(prefix, after, rec.on_event, rec.on_error, rec.on_progress)
    test.addCleanup(rec.handle.cancel)
    return rec


class StorageContractTests:
    """Storage semantics every backend must honour (mixin: not a TestCase)."""

    storage: Storage

    async def make_storage(self) -> Storage:
        raise NotImplementedError

    restart_storage: Optional[Callable] = None

    async def setUp(self) -> None:
        self.storage = await self.make_storage()
        self.watches: list = []

    async def tearDown(self) -> None:
        for w in self.watches:
            w.cancel()
        await self.storage.stop()

    # ------------------------------------------------------------ helpers

    def watch(self, prefix: str, after: int) -> Recorder:
        rec = Recorder()
        self.watches.append(self.storage.watch(prefix, after, rec.on_event, rec.on_error, rec.on_progress))
        rec.handle = self.watches[-1]
        return rec

    async def rev(self) -> int:
        return await self.storage.current_revision()

    async def assertFails(self, d: defer.Deferred, exc: type) -> Exception:
        try:
            await d
        except exc as err:
            return err
        raise AssertionError(f"expected {exc.__name__}")

    # ------------------------------------------------------------ revisions

    async def test_revision_increases_by_one_per_write(self):
        r0 = await self.rev()
        kv = await self.storage.create("/t/a", b"1")
        self.assertEqual((kv.create_revision, kv.mod_revision), (r0 + 1, r0 + 1))
        kv = await self.storage.update("/t/a", b"2", kv.mod_revision)
        self.assertEqual((kv.create_revision, kv.mod_revision), (r0 + 1, r0 + 2))
        await self.assertFails(self.storage.create("/t/a", b"x"), KeyExistsError)
        await self.assertFails(self.storage.update("/t/a", b"x", r0 + 1), ConflictError)
        self.assertEqual(await self.rev(), r0 + 2, "a failed write must not use a revision")
        deleted = await self.storage.delete("/t/a")
        self.assertEqual(deleted.mod_revision, r0 + 3)
        self.assertEqual(await self.rev(), r0 + 3)

    async def test_get_latest_and_missing(self):
        created = await self.storage.create("/t/k", b"v")
        got = await self.storage.get("/t/k")
        self.assertEqual(got, KeyValue("/t/k", b"v", created.create_revision, created.mod_revision, 0))
        self.assertIsNone(await self.storage.get("/t/nope"))

    async def test_get_at_past_revision(self):
        v1 = await self.storage.create("/t/k", b"one")
        v2 = await self.storage.update("/t/k", b"two", v1.mod_revision)
        await self.storage.delete("/t/k")
        self.assertIsNone(await self.storage.get("/t/k"))
        self.assertEqual((await self.storage.get("/t/k", v1.mod_revision)).value, b"one")
        old = await self.storage.get("/t/k", v2.mod_revision)
        self.assertEqual((old.value, old.mod_revision, old.create_revision),
                         (b"two", v2.mod_revision, v1.mod_revision))
        self.assertIsNone(await self.storage.get("/t/k", v1.mod_revision - 1))

    async def test_future_revision_is_refused(self):
        await self.storage.create("/t/k", b"v")
        future = await self.rev() + 100
        await self.assertFails(self.storage.get("/t/k", future), FutureRevisionError)
        await self.assertFails(self.storage.list("/t/", revision=future), FutureRevisionError)

    # ------------------------------------------------------------ list

    async def test_list_prefix_isolation(self):
        for key in ("/a/x", "/a/y", "/ab/x", "/a", "/b/x"):
            await self.storage.create(key, key.encode())
        page = await self.storage.list("/a/")
        self.assertEqual([kv.key for kv in page.items], ["/a/x", "/a/y"])
        self.assertEqual([kv.value for kv in page.items], [b"/a/x", b"/a/y"])
        self.assertEqual((page.more, page.count), (False, 2))
        self.assertEqual(page.revision, await self.rev())
        self.assertEqual(await self.storage.count("/a/"), 2)
        self.assertEqual(await self.storage.count("/"), 5)

    async def test_list_is_in_byte_order(self):
        keys = ["/p/b", "/p/B", "/p/a-b", "/p/a/b", "/p/a", "/p/é", "/p/z", "/p/10", "/p/9"]
        for key in keys:
            await self.storage.create(key, b"x")
        page = await self.storage.list("/p/")
        self.assertEqual([kv.key for kv in page.items], sorted(keys, key=lambda k: k.encode()))

    async def test_list_pagination_is_consistent(self):
        keys = [f"/pg/{i:02d}" for i in range(10)]
        for key in keys:
            await self.storage.create(key, key.encode())
        first = await self.storage.list("/pg/", limit=4)
        self.assertEqual([kv.key for kv in first.items], keys[:4])
        self.assertEqual((first.more, first.count), (True, 10))
        # Writes between pages are not seen by pages read at the first page's revision.
        await self.storage.create("/pg/05a", b"new")
        await self.storage.delete("/pg/08")
        seen = [kv.key for kv in first.items]
        start = first.items[-1].key + "\x00"
        counts = []
        while True:
            page = await self.storage.list("/pg/", revision=first.revision, limit=4, start_key=start)
            self.assertEqual(page.revision, first.revision)
            counts.append(page.count)
            seen += [kv.key for kv in page.items]
            if not page.more:
                break
            start = page.items[-1].key + "\x00"
        self.assertEqual(seen, keys)
        self.assertEqual(counts[0], 6, "count is the number of keys from start_key on")
        latest = await self.storage.list("/pg/")
        self.assertIn("/pg/05a", [kv.key for kv in latest.items])
        self.assertNotIn("/pg/08", [kv.key for kv in latest.items])

    async def test_list_at_past_revision_sees_old_state(self):
        a = await self.storage.create("/h/a", b"a1")
        await self.storage.create("/h/b", b"b1")
        then = await self.rev()
        await self.storage.update("/h/a", b"a2", a.mod_revision)
        await self.storage.delete("/h/b")
        await self.storage.create("/h/c", b"c1")
        old = await self.storage.list("/h/", revision=then)
        self.assertEqual([(kv.key, kv.value) for kv in old.items], [("/h/a", b"a1"), ("/h/b", b"b1")])
        self.assertEqual((old.revision, old.count), (then, 2))
        now = await self.storage.list("/h/")
        self.assertEqual([(kv.key, kv.value) for kv in now.items], [("/h/a", b"a2"), ("/h/c", b"c1")])

    # ------------------------------------------------------------ writes

    async def test_create_if_absent(self):
        await self.storage.create("/t/k", b"first")
        err = await self.assertFails(self.storage.create("/t/k", b"second"), KeyExistsError)
        self.assertEqual(err.key, "/t/k")
        self.assertEqual((await self.storage.get("/t/k")).value, b"first")

    async def test_create_after_delete_starts_a_new_life(self):
        first = await self.storage.create("/t/k", b"1")
        await self.storage.delete("/t/k")
        again = await self.storage.create("/t/k", b"2")
        self.assertGreater(again.create_revision, first.create_revision)
        self.assertEqual(again.create_revision, again.mod_revision)

    async def test_cas_update_with_stale_revision_conflicts(self):
        v1 = await self.storage.create("/t/k", b"1")
        v2 = await self.storage.update("/t/k", b"2", v1.mod_revision)
        err = await self.assertFails(self.storage.update("/t/k", b"3", v1.mod_revision), ConflictError)
        self.assertEqual(err.current, v2)
        self.assertEqual((await self.storage.get("/t/k")).value, b"2")

    async def test_unconditional_update(self):
        v1 = await self.storage.create("/t/k", b"1")
        await self.storage.update("/t/k", b"2", v1.mod_revision)
        v3 = await self.storage.update("/t/k", b"3")
        self.assertEqual((v3.value, v3.create_revision), (b"3", v1.create_revision))
        self.assertEqual((await self.storage.get("/t/k")).value, b"3")

    async def test_update_or_delete_missing_key(self):
        await self.assertFails(self.storage.update("/t/none", b"x"), KeyNotFoundError)
        await self.assertFails(self.storage.update("/t/none", b"x", 5), KeyNotFoundError)
        await self.assertFails(self.storage.delete("/t/none"), KeyNotFoundError)
        await self.assertFails(self.storage.delete("/t/none", 5), KeyNotFoundError)

    async def test_guarded_delete(self):
        v1 = await self.storage.create("/t/k", b"1")
        v2 = await self.storage.update("/t/k", b"2", v1.mod_revision)
        err = await self.assertFails(self.storage.delete("/t/k", v1.mod_revision), ConflictError)
        self.assertEqual(err.current, v2)
        self.assertIsNotNone(await self.storage.get("/t/k"))
        gone = await self.storage.delete("/t/k", v2.mod_revision)
        self.assertEqual((gone.key, gone.value, gone.create_revision), ("/t/k", b"2", v1.create_revision))
        self.assertEqual(gone.mod_revision, await self.rev(), "a delete reports its own revision")
        self.assertIsNone(await self.storage.get("/t/k"))

    async def test_concurrent_cas_increments_lose_nothing(self):
        await self.storage.create("/t/counter", b"0")
        rec = self.watch("/t/counter", await self.rev())
        attempts = []

        async def incrementer(times: int) -> None:
            kv = await self.storage.get("/t/counter")
            done = 0
            while done < times:
                attempts.append(1)
                try:
                    kv = await self.storage.update("/t/counter", str(int(kv.value) + 1).encode(), kv.mod_revision)
                    done += 1
                except ConflictError as err:
                    kv = err.current
        await defer.gatherResults([defer.Deferred.fromCoroutine(incrementer(5)) for _ in range(20)],
                                  consumeErrors=True)
        self.assertEqual((await self.storage.get("/t/counter")).value, b"100")
        await until(lambda: len(rec.events) == 100, what="100 update events")
        # Every winning write saw the previous winner's value: one winner per revision.
        for event in rec.events:
            self.assertEqual(int(event.kv.value), int(event.prev_kv.value) + 1)
        self.assertGreater(len(attempts), 100, "concurrent writers should have conflicted")

    # ------------------------------------------------------------ watch

    async def test_watch_replays_history_then_goes_live(self):
        r0 = await self.rev()
        a = await self.storage.create("/w/a", b"a1")
        await self.storage.update("/w/a", b"a2", a.mod_revision)
        await self.storage.create("/w/b", b"b1")
        await self.storage.delete("/w/a")
        rec = self.watch("/w/", r0)
        await until(lambda: len(rec.events) == 4, what="history")
        await self.storage.create("/w/c", b"c1")
        await until(lambda: len(rec.events) == 5, what="live event")
        self.assertEqual(rec.summary(), [(PUT, "/w/a", b"a1"), (PUT, "/w/a", b"a2"), (PUT, "/w/b", b"b1"),
                                         (DELETE, "/w/a", b"a2"), (PUT, "/w/c", b"c1")])
        self.assertEqual(rec.revisions(), list(range(r0 + 1, r0 + 6)))
        created, updated, _, deleted, _ = rec.events
        self.assertTrue(created.is_create)
        self.assertIsNone(created.prev_kv)
        self.assertFalse(updated.is_create)
        self.assertEqual(updated.prev_kv.value, b"a1")
        self.assertEqual(updated.kv.create_revision, r0 + 1)
        self.assertEqual(deleted.kv.mod_revision, r0 + 4)
        self.assertEqual((deleted.prev_kv.value, deleted.prev_kv.mod_revision), (b"a2", r0 + 2))
        self.assertEqual(rec.errors, [])

    async def test_watch_from_a_middle_revision(self):
        r0 = await self.rev()
        for i in range(5):
            await self.storage.create(f"/w/{i}", b"x")
        rec = self.watch("/w/", r0 + 3)
        await until(lambda: len(rec.events) == 2, what="events after the start revision")
        await sleep(0.1)
        self.assertEqual(rec.revisions(), [r0 + 4, r0 + 5])

    async def test_watch_from_current_revision_sees_only_new_events(self):
        await self.storage.create("/w/old", b"x")
        rec = self.watch("/w/", await self.rev())
        await self.storage.create("/w/new", b"y")
        await until(lambda: len(rec.events) == 1, what="the new event")
        await sleep(0.1)
        self.assertEqual(rec.summary(), [(PUT, "/w/new", b"y")])

    async def test_watch_started_during_writes_has_no_gap_or_duplicate(self):
        r0 = await self.rev()
        writes = [self.storage.create(f"/w/{i:03d}", b"x") for i in range(100)]
        await defer.gatherResults(writes[:30], consumeErrors=True)
        rec = self.watch("/w/", r0)  # history replay and live commits race here
        writes += [self.storage.create(f"/w/{i:03d}", b"x") for i in range(100, 200)]
        await defer.gatherResults(writes, consumeErrors=True)
        rec2 = self.watch("/w/", r0 + 50)
        writes = [self.storage.create(f"/w/{i:03d}", b"x") for i in range(200, 250)]
        await defer.gatherResults(writes, consumeErrors=True)
        await until(lambda: len(rec.events) >= 250 and len(rec2.events) >= 200, what="all events")
        await sleep(0.1)
        self.assertEqual(rec.revisions(), list(range(r0 + 1, r0 + 251)))
        self.assertEqual(rec2.revisions(), list(range(r0 + 51, r0 + 251)))

    async def test_overlapping_watchers(self):
        r0 = await self.rev()
        every = self.watch("/o/", r0)
        only_a = self.watch("/o/a/", r0)
        only_b = self.watch("/o/b/", r0)
        for key in ("/o/a/1", "/o/b/1", "/o/a/2", "/o/ab", "/other/a/1"):
            await self.storage.create(key, b"x")
        await until(lambda: len(every.events) == 4 and len(only_a.events) == 2 and len(only_b.events) == 1,
                    what="fan-out")
        await sleep(0.1)
        self.assertEqual([e.kv.key for e in every.events], ["/o/a/1", "/o/b/1", "/o/a/2", "/o/ab"])
        self.assertEqual([e.kv.key for e in only_a.events], ["/o/a/1", "/o/a/2"])
        self.assertEqual([e.kv.key for e in only_b.events], ["/o/b/1"])

    async def test_cancelled_watch_gets_nothing_more(self):
        rec = self.watch("/c/", await self.rev())
        await self.storage.create("/c/1", b"x")
        await until(lambda: len(rec.events) == 1, what="first event")
        rec.handle.cancel()
        rec.handle.cancel()  # idempotent
        await self.storage.create("/c/2", b"x")
        other = self.watch("/c/", await self.rev() - 1)
        await until(lambda: len(other.events) == 1, what="a second watcher")
        await sleep(0.1)
        self.assertEqual([e.kv.key for e in rec.events], ["/c/1"])
        self.assertEqual(rec.errors, [])

    # ------------------------------------------------------------ compaction

    async def test_compaction(self):
        r0 = await self.rev()
        a = await self.storage.create("/k/a", b"a1")
        await self.storage.create("/k/b", b"b1")
        await self.storage.update("/k/a", b"a2", a.mod_revision)
        await self.storage.delete("/k/b")
        await self.storage.create("/k/c", b"c1")
        mid = r0 + 3
        await self.storage.compact(mid)
        self.assertEqual(await self.storage.compacted_revision(), mid)
        err = await self.assertFails(self.storage.get("/k/a", r0 + 1), CompactedError)
        self.assertEqual(err.compacted, mid)
        await self.assertFails(self.storage.list("/k/", revision=r0 + 2), CompactedError)
        # The compacted revision itself and everything after it stay readable.
        at_mid = await self.storage.list("/k/", revision=mid)
        self.assertEqual([(kv.key, kv.value) for kv in at_mid.items], [("/k/a", b"a2"), ("/k/b", b"b1")])
        now = await self.storage.list("/k/")
        self.assertEqual([(kv.key, kv.value) for kv in now.items], [("/k/a", b"a2"), ("/k/c", b"c1")])
        old = self.watch("/k/", r0)
        await until(lambda: old.errors, what="CompactedError on a too-old watch")
        self.assertIsInstance(old.errors[0], CompactedError)
        self.assertEqual(old.events, [])
        ok = self.watch("/k/", mid - 1)
        await until(lambda: len(ok.events) == 3, what="events from the compacted revision on")
        self.assertEqual(ok.revisions(), [mid, mid + 1, mid + 2])
        self.assertEqual(ok.events[1].prev_kv.value, b"b1")
        self.assertEqual(ok.errors, [])

    # ------------------------------------------------------------ leases

    async def test_lease_expiry_deletes_with_an_event(self):
        lease = await self.storage.grant_lease(1)
        if not lease:
            raise SkipTest("this backend has no leases")
        rec = self.watch("/l/", await self.rev())
        await self.storage.create("/l/short", b"x", lease=lease)
        await self.storage.create("/l/forever", b"y")
        await until(lambda: any(e.type == DELETE for e in rec.events), timeout=5.0, what="lease expiry")
        self.assertIsNone(await self.storage.get("/l/short"))
        self.assertIsNotNone(await self.storage.get("/l/forever"))
        deletes = [e for e in rec.events if e.type == DELETE]
        self.assertEqual([(e.kv.key, e.kv.value) for e in deletes], [("/l/short", b"x")])

    async def test_update_keeps_or_replaces_the_lease(self):
        """An update keeps the key's lease unless given one (a renewed TTL, as the master leases do)."""
        short = await self.storage.grant_lease(1)
        if not short:
            raise SkipTest("this backend has no leases")
        long = await self.storage.grant_lease(300)
        rec = self.watch("/lu/", await self.rev())
        kept = await self.storage.create("/lu/kept", b"1", lease=short)
        renewed = await self.storage.create("/lu/renewed", b"1", lease=short)
        kept = await self.storage.update("/lu/kept", b"2", kept.mod_revision)
        self.assertEqual(kept.lease, short)
        renewed = await self.storage.update("/lu/renewed", b"2", renewed.mod_revision, lease=long)
        self.assertEqual(renewed.lease, long)
        await until(lambda: any(e.type == DELETE for e in rec.events), timeout=5.0, what="lease expiry")
        self.assertIsNone(await self.storage.get("/lu/kept"))
        still = await self.storage.get("/lu/renewed")
        self.assertEqual((still.value, still.lease), (b"2", long))

    # ------------------------------------------------------------ restart

    async def test_restart_keeps_data_and_revision(self):
        if self.restart_storage is None:
            raise SkipTest("this backend cannot be restarted by the test")
        v1 = await self.storage.create("/r/a", b"1")
        await self.storage.update("/r/a", b"2", v1.mod_revision)
        await self.storage.create("/r/b", b"3")
        await self.storage.delete("/r/b")
        before = await self.rev()
        self.storage = await self.restart_storage()
        self.assertEqual(await self.rev(), before)
        self.assertEqual((await self.storage.get("/r/a")).value, b"2")
        self.assertIsNone(await self.storage.get("/r/b"))
        self.assertEqual((await self.storage.get("/r/a", v1.mod_revision)).value, b"1")
        written = await self.storage.create("/r/c", b"4")
        self.assertEqual(written.mod_revision, before + 1)

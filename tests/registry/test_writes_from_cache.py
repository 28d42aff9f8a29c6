"""Updates and deletes start from the watch cache's copy (upstream's cachedExistingObject).

The copy may be behind the backend; nothing a client sees may depend on that:
no lost update, no 409 for a precondition that holds, no write skipped as a
no-op that is not one.  Each test holds back the cache's events so its copy is
behind, as it is for a moment after any write made elsewhere.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery import errors
from kapiserver.registry.options import DeleteOptions
from kapiserver.registry.store import Store
from kapiserver.storage.cacher import CachedStorage
from kapiserver.storage.interface import Storage
from kapiserver.storage.sqlite import SQLiteStorage
from tests.storage.contract import until

KEY = "/configmaps/default/cm"


class HeldEvents:
    """A backend whose watches deliver events only while not held, and that counts reads.

    Like etcd it cannot tell its latest revision without a round trip (its ``local_revision``
    answers None), so every consistent read reaches it.
    """

    def __init__(self, backend: Storage) -> None:
        self.backend = backend
        self.holding = False
        self.held: list[tuple[Any, Any]] = []
        self.gets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def local_revision(self) -> None:
        return None

    def get(self, key: str, revision: int = 0) -> defer.Deferred:
        self.gets += 1
        return self.backend.get(key, revision)

    def watch(self, prefix, after, on_event, on_error, on_progress=None):
        def deliver(event) -> None:
            event = self.delivered(event)
            if self.holding:
                self.held.append((on_event, event))
            else:
                on_event(event)
        return self.backend.watch(prefix, after, deliver, on_error, None)

    def delivered(self, event: Any) -> Any:
        """What the watch hands out for ``event`` (the event itself here)."""
        return event

    def release(self) -> None:
        self.holding = False
        held, self.held = self.held, []
        for on_event, event in held:
            on_event(event)


class WritesFromCacheTests(unittest.TestCase):
    async def open(self) -> tuple[Store, CachedStorage, HeldEvents]:
        sqlite = SQLiteStorage(":memory:")
        backend = HeldEvents(sqlite)
        storage = CachedStorage(backend)
        await storage.start()
        self.addCleanup(storage.stop)
        rtype = next(r for r in builtin_resource_types() if (r.group, r.plural) == ("", "configmaps"))
        store = Store(rtype, storage)
        await store.create("default", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
        await storage.list("/configmaps/")  # builds the cache
        await until(lambda: storage.peek(KEY) is not None)
        return store, storage, backend

    async def behind(self, store: Store, storage: CachedStorage, backend: HeldEvents, data: dict) -> dict:
        """Write ``data`` while the cache's events are held: its copy is now one write behind."""
        backend.holding = True
        written, _ = await store.guaranteed_update("default", "cm", lambda cur: {**cur, "data": data})
        self.assertNotEqual(storage.peek(KEY).mod_revision, int(written["metadata"]["resourceVersion"]))
        return written

    @defer.inlineCallbacks
    def test_an_update_from_a_current_copy_reads_nothing(self):
        store, storage, backend = yield defer.Deferred.fromCoroutine(self.open())
        gets = backend.gets
        yield defer.Deferred.fromCoroutine(store.guaranteed_update(
            "default", "cm", lambda cur: {**cur, "data": {"a": "2"}}))
        self.assertEqual(backend.gets, gets)
        got = yield defer.Deferred.fromCoroutine(store.get("default", "cm"))
        self.assertEqual(got["data"], {"a": "2"})

    @defer.inlineCallbacks
    def test_an_update_from_a_copy_behind_loses_nothing(self):
        store, storage, backend = yield defer.Deferred.fromCoroutine(self.open())
        yield defer.Deferred.fromCoroutine(self.behind(store, storage, backend, {"a": "1", "b": "2"}))

        def add_c(cur: dict) -> dict:
            return {**cur, "data": {**cur["data"], "c": "3"}}
        updated, _ = yield defer.Deferred.fromCoroutine(store.guaranteed_update("default", "cm", add_c))
        self.assertEqual(updated["data"], {"a": "1", "b": "2", "c": "3"})
        backend.release()
        got = yield defer.Deferred.fromCoroutine(store.get("default", "cm"))
        self.assertEqual((got["data"], got["metadata"]["resourceVersion"]),
                         (updated["data"], updated["metadata"]["resourceVersion"]))

    @defer.inlineCallbacks
    def test_a_precondition_that_holds_is_not_a_conflict(self):
        store, storage, backend = yield defer.Deferred.fromCoroutine(self.open())
        written = yield defer.Deferred.fromCoroutine(self.behind(store, storage, backend, {"a": "2"}))
        rv = written["metadata"]["resourceVersion"]
        updated, _ = yield defer.Deferred.fromCoroutine(store.guaranteed_update(
            "default", "cm", lambda cur: {**cur, "data": {"a": "3"}}, precondition_rv=rv))
        self.assertEqual(updated["data"], {"a": "3"})
        # and one that does not hold still is
        with self.assertRaises(errors.StatusError) as caught:
            yield defer.Deferred.fromCoroutine(store.guaranteed_update(
                "default", "cm", lambda cur: {**cur, "data": {"a": "4"}}, precondition_rv=rv))
        self.assertEqual(caught.exception.code, 409)

    @defer.inlineCallbacks
    def test_an_update_that_only_looks_like_a_no_op_is_written(self):
        store, storage, backend = yield defer.Deferred.fromCoroutine(self.open())
        yield defer.Deferred.fromCoroutine(self.behind(store, storage, backend, {"a": "2"}))
        # {"a": "1"} is what the cache's copy holds, not what is stored
        updated, _ = yield defer.Deferred.fromCoroutine(store.guaranteed_update(
            "default", "cm", lambda cur: {**cur, "data": {"a": "1"}}))
        self.assertEqual(updated["data"], {"a": "1"})
        backend.release()
        got = yield defer.Deferred.fromCoroutine(store.get("default", "cm"))
        self.assertEqual(got["data"], {"a": "1"})

    @defer.inlineCallbacks
    def test_a_delete_with_a_precondition_that_holds_deletes(self):
        store, storage, backend = yield defer.Deferred.fromCoroutine(self.open())
        written = yield defer.Deferred.fromCoroutine(self.behind(store, storage, backend, {"a": "2"}))
        stale = str(storage.peek(KEY).mod_revision)
        with self.assertRaises(errors.StatusError) as caught:
            yield defer.Deferred.fromCoroutine(store.delete(
                "default", "cm", DeleteOptions(precondition_resource_version=stale)))
        self.assertEqual(caught.exception.code, 409)
        _, deleted = yield defer.Deferred.fromCoroutine(store.delete(
            "default", "cm", DeleteOptions(precondition_resource_version=written["metadata"]["resourceVersion"])))
        self.assertTrue(deleted)
        backend.release()
        with self.assertRaises(errors.StatusError) as caught:
            yield defer.Deferred.fromCoroutine(store.get("default", "cm"))
        self.assertEqual(caught.exception.code, 404)

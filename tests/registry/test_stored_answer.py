"""A write is answered from the value it stored (WriteResult.answer).

The answer is the stored value read back as a GET reads it, so it is what the
next GET returns, and on the embedded store its encoding is memoized on the
very value the watch cache holds: the next GET and list of the object reuse
those bytes instead of decoding and encoding it again.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.endpoints.list_encoding import stored_body
from kapiserver.endpoints.negotiation import MediaTarget
from kapiserver.machinery import codec
from kapiserver.registry.context import Context
from kapiserver.registry.store import Store, StoredObject, WriteResult
from kapiserver.storage.cacher import CachedStorage
from kapiserver.storage.sqlite import SQLiteStorage
from tests.registry.test_writes_from_cache import HeldEvents
from tests.storage.contract import until

KEY = "/configmaps/default/cm"
JSON_TARGET = MediaTarget(codec.JSON)


class StoredAnswerTests(unittest.TestCase):
    async def open(self) -> tuple[Store, CachedStorage]:
        storage = CachedStorage(SQLiteStorage(":memory:"))
        await storage.start()
        self.addCleanup(storage.stop)
        rtype = next(r for r in builtin_resource_types() if (r.group, r.plural) == ("", "configmaps"))
        store = Store(rtype, storage)
        await store.create("default", {"metadata": {"name": "seed"}})
        await storage.list("/configmaps/")  # builds the cache
        return store, storage

    def answer_bytes(self, answer: object) -> bytes:
        assert isinstance(answer, StoredObject)
        encoded = stored_body(answer, JSON_TARGET)
        assert encoded is not None
        return encoded[1]

    @defer.inlineCallbacks
    def test_create_and_update_answer_the_stored_value_the_cache_then_serves(self):
        store, storage = yield defer.Deferred.fromCoroutine(self.open())
        for write in ("create", "update"):
            written: WriteResult
            if write == "create":
                written = yield defer.Deferred.fromCoroutine(store.create_result(
                    "default", {"metadata": {"name": "cm"}, "data": {"a": "<1>"}}))
            else:
                written = yield defer.Deferred.fromCoroutine(store.guaranteed_update_result(
                    "default", "cm", lambda cur: {**cur, "data": {"a": "2"}}))
            answer = written.answer()
            body = self.answer_bytes(answer)
            self.assertEqual(codec.decode_json(body), written.obj)  # the same object the Store returned
            self.assertEqual(self.read_bytes(store, answer), body)  # ... byte for byte what a read answers
            yield until(lambda: (storage.peek(KEY) or answer.item).mod_revision == answer.item.mod_revision)
            cached = storage.peek(KEY)
            self.assertIs(cached, answer.item)  # the cache holds the value the answer was encoded on
            self.assertTrue(cached.encodings)  # ... with the answer's encoding memoized on it
            got = yield defer.Deferred.fromCoroutine(store.get_stored("default", "cm"))
            self.assertIs(got.item, answer.item)  # so the GET reuses those bytes
            self.assertEqual(self.answer_bytes(got), body)

    def read_bytes(self, store: Store, answer: StoredObject) -> bytes:
        """The answer a read of ``answer``'s stored value gives (decoded anew: nothing memoized)."""
        return self.answer_bytes(StoredObject(dataclasses.replace(answer.item), store))

    @defer.inlineCallbacks
    def test_a_put_is_answered_as_its_value_reads_back(self):
        """The answer is encoded from the object the update stored, not from its stored bytes:
        it still reads as they do, the resourceVersion last in metadata wherever the body had it."""
        store, _ = yield defer.Deferred.fromCoroutine(self.open())
        seed = yield defer.Deferred.fromCoroutine(store.get("default", "seed"))
        body = {"data": {"b": "1"}, "metadata": {"resourceVersion": seed["metadata"]["resourceVersion"],
                                                 "name": "seed", "labels": {"x": "y"}}}
        written = yield defer.Deferred.fromCoroutine(store.update_result("default", "seed", body))
        answer = written.answer()
        assert isinstance(answer, StoredObject)
        self.assertIs(answer.external(), written.obj)  # not decoded from the stored bytes
        self.assertEqual(list(written.obj["metadata"])[-1], "resourceVersion")
        self.assertEqual(self.answer_bytes(answer), self.read_bytes(store, answer))

    @defer.inlineCallbacks
    def test_what_the_store_did_not_store_is_answered_as_returned(self):
        store, _ = yield defer.Deferred.fromCoroutine(self.open())
        dry = Context(dry_run=True)
        written = yield defer.Deferred.fromCoroutine(store.create_result("default", {"metadata": {"name": "dry"}},
                                                                         dry))
        self.assertIsNone(written.stored)
        self.assertIs(written.answer(), written.obj)


class CopiedEvents(HeldEvents):
    """A backend whose watch hands out copies of the written values, as etcd's watch does
    (a value written and its event are two objects), and can hold its events back."""

    def delivered(self, event: Any) -> Any:
        return dataclasses.replace(event, kv=dataclasses.replace(event.kv))


class AdoptedValueTests(unittest.TestCase):
    """On a backend like etcd the cache adopts the value a write answered from, whichever
    of the write's answer and its event comes first."""

    async def open(self) -> tuple[Store, CachedStorage, CopiedEvents]:
        backend = CopiedEvents(SQLiteStorage(":memory:"))
        storage = CachedStorage(backend)  # type: ignore[arg-type]
        await storage.start()
        self.addCleanup(storage.stop)
        rtype = next(r for r in builtin_resource_types() if (r.group, r.plural) == ("", "configmaps"))
        store = Store(rtype, storage)
        await store.create("default", {"metadata": {"name": "cm"}, "data": {"a": "0"}})
        await storage.list("/configmaps/")
        await until(lambda: storage.peek(KEY) is not None)
        return store, storage, backend

    async def update(self, store: Store, value: str) -> StoredObject:
        written = await store.guaranteed_update_result("default", "cm", lambda cur: {**cur, "data": {"a": value}})
        answer = written.answer()
        assert isinstance(answer, StoredObject)
        return answer

    @defer.inlineCallbacks
    def test_the_event_arriving_first_or_last_leaves_one_object(self):
        store, storage, backend = yield defer.Deferred.fromCoroutine(self.open())
        answer = yield defer.Deferred.fromCoroutine(self.update(store, "1"))  # its event came first
        yield until(lambda: storage.peek(KEY).mod_revision == answer.item.mod_revision)
        self.assertIs(storage.peek(KEY), answer.item)
        backend.holding = True
        answer = yield defer.Deferred.fromCoroutine(self.update(store, "2"))  # its event comes after
        self.assertNotEqual(storage.peek(KEY).mod_revision, answer.item.mod_revision)
        backend.release()
        yield until(lambda: storage.peek(KEY).mod_revision == answer.item.mod_revision)
        self.assertIs(storage.peek(KEY), answer.item)
        got = yield defer.Deferred.fromCoroutine(store.get("default", "cm", resource_version="0"))
        self.assertEqual(got["data"], {"a": "2"})


class DecodedValueMemoTests(unittest.TestCase):
    """A value decoded once is marked so (``DECODES``, shared by all such values); the first encoding
    of one gives it a memo of its own, and no other value sees that encoding."""

    def test_an_encoding_memoized_on_one_decoded_value_is_not_anothers(self):
        from kapiserver.endpoints.list_encoding import memoized
        from kapiserver.registry.store import decode
        from kapiserver.storage.interface import DECODES, KeyValue
        one = KeyValue("/configmaps/ns/one", b'{"kind":"ConfigMap","metadata":{"name":"one"}}', 1, 1)
        two = KeyValue("/configmaps/ns/two", b'{"kind":"ConfigMap","metadata":{"name":"two"}}', 2, 2)
        decode(one)
        decode(two)
        self.assertIs(one.encodings, DECODES)
        self.assertIs(two.encodings, DECODES)
        self.assertEqual(memoized(one, "k", lambda: b"encoding of one"), b"encoding of one")
        self.assertEqual(memoized(two, "k", lambda: b"encoding of two"), b"encoding of two")
        self.assertEqual(memoized(one, "k", lambda: b"made again"), b"encoding of one")
        self.assertEqual(len(DECODES), 0)
        with self.assertRaises(TypeError):
            DECODES["k"] = b"written into the shared memo"

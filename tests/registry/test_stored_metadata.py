"""The metadata of a stored value, read without decoding the rest (metadata-only informers: the
garbage collector, the watch cache's label index): always what a full decode gives, managedFields
left out."""
from __future__ import annotations

import json

import orjson
from twisted.trial import unittest

from kapiserver.registry.store import CorruptObjectError, decode, decode_metadata, encode
from kapiserver.registry.stored_metadata import scan_metadata
from kapiserver.storage.interface import KeyValue

# managedFields as the server writes them, with the characters a scan could trip on in its keys
MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {f"f:k{i}": {} for i in range(1000)},
                         "f:spec": {"f:containers": {'k:{"name":"c]"}': {".": {}, "f:args": {}}},
                                    "f:ports": {"v:[1]": {}}}}}]


def stored(**metadata) -> dict:
    md = {"name": "n", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z",
          "labels": {"app": "a]b", "tier": 'quote"d'}, "annotations": {"note": "a \\ backslash, ] and \" }"},
          "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u-0",
                               "blockOwnerDeletion": True}],
          "finalizers": ["example.com/hold"], "deletionTimestamp": "2026-01-02T00:00:00Z",
          "managedFields": MANAGED}
    md.update(metadata)
    return {"kind": "ConfigMap", "apiVersion": "v1", "metadata": md, "data": {f"k{i}": "" for i in range(1000)}}


def kv(value: bytes) -> KeyValue:
    return KeyValue("/registry/configmaps/default/n", value, 3, 9)


def expected(value: bytes) -> dict:
    md = decode(kv(value))["metadata"]
    md.pop("managedFields", None)
    return md


class StoredMetadataTests(unittest.TestCase):
    def test_what_the_server_stores_is_read_without_a_full_decode(self):
        value = encode(stored())
        self.assertIsNotNone(scan_metadata(value))
        md = decode_metadata(kv(value))
        self.assertEqual(md, expected(value))
        self.assertEqual(md["ownerReferences"][0]["uid"], "u-0")
        self.assertEqual(md["finalizers"], ["example.com/hold"])
        self.assertEqual(md["deletionTimestamp"], "2026-01-02T00:00:00Z")
        self.assertEqual(md["resourceVersion"], "9")
        self.assertNotIn("managedFields", md)

    def test_keys_after_managed_fields_are_read(self):
        obj = stored()
        md = obj["metadata"]
        managed = md.pop("managedFields")
        md = {"managedFields": managed, **md}  # managedFields first, every other key after it
        value = encode(dict(obj, metadata=md))
        self.assertIsNotNone(scan_metadata(value))
        self.assertEqual(decode_metadata(kv(value)), expected(value))

    def test_other_layouts_give_the_same_metadata(self):
        obj = stored()
        layouts = {
            "data first": {"data": obj["data"], **obj},
            "metadata last": {k: obj[k] for k in ("kind", "apiVersion", "data", "metadata")},
            "an escaped backslash in managedFields": stored(managedFields=[{"manager": "a\\", "fieldsV1": {}}]),
            "no managedFields": dict(obj, metadata={k: v for k, v in obj["metadata"].items()
                                                    if k != "managedFields"}),
            "empty metadata": {"kind": "ConfigMap", "metadata": {}},
            "no metadata": {"kind": "ConfigMap", "apiVersion": "v1"},
        }
        for name, layout in layouts.items():
            value = orjson.dumps(layout)
            self.assertEqual(decode_metadata(kv(value)), expected(value), name)
        # indented JSON (another writer's): the same metadata too
        value = json.dumps(stored(), indent=2).encode()
        self.assertEqual(decode_metadata(kv(value)), expected(value))

    def test_a_corrupt_value_is_reported(self):
        for value in (b"not json", b"[1, 2]", b'{"kind":"ConfigMap","metadata":"x"}',
                      b'{"kind":"ConfigMap","metadata":{"name":"n",'):
            with self.assertRaises(CorruptObjectError):
                decode_metadata(kv(value))

"""The built-in definitions read one schema at a time give what parsing the whole file gives."""
from __future__ import annotations

import importlib.util
import os

import orjson
from twisted.trial import unittest

from kapiserver.machinery import openapi_definitions as od


def _package_file() -> bytes:
    spec = importlib.util.find_spec("kubernetes_validate")
    assert spec is not None and spec.submodule_search_locations
    with open(os.path.join(list(spec.submodule_search_locations)[0], od.DEFINITIONS_FILE), "rb") as f:
        return f.read()


class RawDefinitionsTests(unittest.TestCase):
    def setUp(self) -> None:
        self.data = _package_file()
        self.whole = orjson.loads(self.data)["$defs"]

    def test_every_schema_read_by_its_span_is_the_parsed_one(self) -> None:
        spans = od.locate(self.data)
        assert spans is not None, "the package's file is not laid out as locate expects"
        self.assertEqual(list(spans), list(self.whole))
        raw = od.read_raw()
        self.assertEqual({name: raw[name] for name in raw}, self.whole)

    def test_group_version_kinds_without_parsing_the_schemas(self) -> None:
        kinds = od.read_raw().group_version_kinds()
        self.assertEqual(kinds, {name: schema[od.GVK] for name, schema in self.whole.items() if schema.get(od.GVK)})
        self.assertEqual(kinds["io.k8s.api.core.v1.Pod"], [{"group": "", "kind": "Pod", "version": "v1"}])

    def test_another_layout_is_parsed_whole(self) -> None:
        compact = orjson.dumps({"$defs": self.whole})
        self.assertIsNone(od.locate(compact))
        raw = od.RawDefinitions(compact, lambda span: self.fail("no span to read"))
        self.assertEqual(dict(raw), self.whole)

    def test_definitions_normalize_what_they_read(self) -> None:
        definitions = od.Definitions(od.read_raw())
        self.assertEqual(definitions.names(), sorted(self.whole))
        pod = definitions.get("io.k8s.api.core.v1.Pod")
        self.assertEqual(pod["properties"]["spec"]["$ref"], "#/definitions/io.k8s.api.core.v1.PodSpec")
        self.assertNotIn("enum", pod["properties"]["kind"])
        self.assertEqual(definitions.get(od.QUANTITY)["type"], "string")
        self.assertEqual(definitions.gvk_index()[("apps", "v1", "Deployment")], "io.k8s.api.apps.v1.Deployment")
        with self.assertRaises(KeyError):
            definitions.get("io.k8s.api.core.v1.NoSuchKind")

    def test_a_property_description_is_the_normalized_schemas(self) -> None:
        reading, normalized = od.Definitions(od.read_raw()), od.Definitions(od.read_raw())
        names = ["io.k8s.api.core.v1.PodStatus", "io.k8s.api.apps.v1.DeploymentSpec", od.QUANTITY,
                 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.api.core.v1.PodStatus"]
        for name in names:
            for prop in [*(normalized.get(name).get("properties") or {}), "noSuchProperty"]:
                self.assertEqual(reading.property_description(name, prop),
                                 ((normalized.get(name).get("properties") or {}).get(prop) or {}).get(
                                     "description", ""), (name, prop))
        self.assertIn("phase", reading.property_description("io.k8s.api.core.v1.PodStatus", "phase"))
        with self.assertRaises(KeyError):
            reading.property_description("io.k8s.api.core.v1.NoSuchKind", "name")

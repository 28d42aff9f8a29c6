"""A CRD's kinds in /openapi/v2 and /openapi/v3 as kube-apiserver v1.32.13 publishes them.

The fixture holds a CRD exercising every rule of upstream's CRD OpenAPI builder
(nullable and required, int-or-string, preserve-unknown-fields at the root and
below, embedded resources, junctors, CEL rules, an empty enum, an example)
and what the real kube-apiserver published for it, captured from the anchor
build; the server in process must publish the same definitions.
"""
from __future__ import annotations

import json
import os

from twisted.trial import unittest

from kapiserver.apiextensions.openapi import kind_schema, publishable, TypeMetaDocs
from kapiserver.testing.cases import ServerTestCase, run
from tests.apiextensions.test_crd_api import CRDS, condition

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "openapi_upstream.json")


def upstream() -> dict:
    with open(FIXTURE) as f:
        return json.load(f)


class CRDOpenAPITests(ServerTestCase):
    async def _publish(self) -> dict:
        golden = upstream()
        r = await self.client.post(CRDS, golden["crd"])
        self.assertEqual(r.code, 201, r.body)

        async def established():
            got = await self.client.get(f"{CRDS}/foos.example.com")
            return condition(got.body, "Established").get("status") == "True"
        await self.wait_for(established)
        return golden

    @run
    async def test_v2_definitions_are_upstream_s(self):
        golden = await self._publish()

        async def published():
            doc = (await self.client.get("/openapi/v2")).body
            return doc if "com.example.v2.Foo" in doc["definitions"] else None
        doc = await self.wait_for(published)
        for name, expected in golden["v2"].items():
            self.assertEqual(doc["definitions"][name], expected, name)

    @run
    async def test_v3_schemas_are_upstream_s(self):
        golden = await self._publish()
        for version in ("v1", "v2"):
            async def published():
                r = await self.client.get(f"/openapi/v3/apis/example.com/{version}")
                return r.body if r.code == 200 else None
            doc = await self.wait_for(published)
            for name in (f"com.example.{version}.Foo", f"com.example.{version}.FooList"):
                self.assertEqual(doc["components"]["schemas"][name], golden["v3"][name], name)

    @run
    async def test_unserved_version_leaves_the_documents(self):
        golden = await self._publish()
        crd = (await self.client.get(f"{CRDS}/foos.example.com")).body
        crd["spec"]["versions"][1]["served"] = False
        r = await self.client.put(f"{CRDS}/foos.example.com", crd)
        self.assertEqual(r.code, 200, r.body)

        async def gone():
            doc = (await self.client.get("/openapi/v2")).body
            return doc if "com.example.v2.Foo" not in doc["definitions"] else None
        doc = await self.wait_for(gone)
        self.assertEqual(doc["definitions"]["com.example.v1.Foo"], golden["v2"]["com.example.v1.Foo"])
        self.assertEqual((await self.client.get("/openapi/v3/apis/example.com/v2")).code, 404)


class PublishableTests(unittest.TestCase):
    docs = TypeMetaDocs("api", "kind", "meta")

    def test_no_or_unknown_typed_or_non_structural_schema_is_a_bare_object(self):
        for schema in (None, {"type": "object", "properties": {"a": {"type": "file"}}},
                       {"type": "object", "properties": {"a": {}}}):
            self.assertIsNone(publishable(schema))
            self.assertEqual(kind_schema(schema, self.docs, v2=True), {"type": "object"})
            self.assertEqual(kind_schema(schema, self.docs, v2=False), {"type": "object"})

    def test_v2_of_a_root_preserving_unknown_fields_is_a_bare_object(self):
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        self.assertEqual(kind_schema(schema, self.docs, v2=True), {"type": "object"})
        v3 = kind_schema(schema, self.docs, v2=False)
        self.assertEqual(sorted(v3["properties"]), ["apiVersion", "kind", "metadata"])
        self.assertIs(v3["x-kubernetes-preserve-unknown-fields"], True)

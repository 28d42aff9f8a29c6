"""One declared Kubernetes version: /version, OpenAPI, schemas, protobuf tables and discovery agree."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver import kube_version
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery import protobuf_tables_generated
from kapiserver.machinery.openapi_definitions import DEFINITIONS_FILE, load_definitions
from kapiserver.testing.cases import InMemoryServerTestCase, run


class DeclaredVersionTests(InMemoryServerTestCase):
    @run
    async def test_served_documents_name_the_declared_version(self) -> None:
        reply = await self.client.get("/version")
        self.assertEqual(reply.code, 200)
        info = reply.body
        self.assertEqual((info["major"], info["minor"]), (str(kube_version.MAJOR), str(kube_version.MINOR)))
        self.assertEqual(info["gitVersion"], kube_version.GIT_VERSION)
        reply = await self.client.get("/openapi/v2")
        self.assertEqual(reply.code, 200)
        self.assertEqual(reply.body["info"]["version"], f"v{kube_version.MAJOR}.{kube_version.MINOR}.{kube_version.PATCH}")


class DerivedDataTests(unittest.TestCase):
    def test_schemas_and_protobuf_tables_come_from_the_declared_version(self) -> None:
        self.assertIn(f"/v{kube_version.MAJOR}.{kube_version.MINOR}.0-local/", DEFINITIONS_FILE)
        self.assertEqual(protobuf_tables_generated.API_MODULE_TAG, f"v0.{kube_version.MINOR}.{kube_version.PATCH}")

    def test_every_served_builtin_kind_exists_in_the_declared_version(self) -> None:
        """Discovery lists only kinds of the emulated release: each has its schema there."""
        defs = load_definitions()
        missing = [rtype.schema_name for rtype in builtin_resource_types()
                   if rtype.schema_name and rtype.schema_name not in defs]
        self.assertEqual(missing, [])

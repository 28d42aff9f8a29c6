"""The whole server tree (handler chain and delegation chain) driven in memory through StubTreq."""
from __future__ import annotations

from kapiserver.testing.cases import ServerTestCase, run
from kapiserver.testing.client import InMemoryClient

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"color": "blue"}}


class InMemoryTreeTests(ServerTestCase):
    def setUp(self):
        d = super().setUp()
        d.addCallback(lambda _: setattr(self, "memory", InMemoryClient(self.server.api.handler)))
        return d

    @run
    async def test_crud_through_every_link(self) -> None:
        created = await self.memory.post("/api/v1/namespaces/default/configmaps", CM)
        self.assertEqual(created.code, 201, created.body)
        got = await self.memory.get("/api/v1/namespaces/default/configmaps/settings")
        self.assertEqual((got.code, got.body["data"]), (200, {"color": "blue"}))
        # the same object over a real socket: one server, two transports
        over_tcp = await self.client.get("/api/v1/namespaces/default/configmaps/settings")
        self.assertEqual(over_tcp.body["metadata"]["uid"], got.body["metadata"]["uid"])
        deleted = await self.memory.delete("/api/v1/namespaces/default/configmaps/settings")
        self.assertEqual(deleted.code, 200)

    @run
    async def test_discovery_and_the_end_of_the_chain(self) -> None:
        groups = await self.memory.get("/apis")
        self.assertIn("apps", [g["name"] for g in groups.body["groups"]])
        missing = await self.memory.get("/apis/nothing.example.com/v1/widgets")
        self.assertEqual((missing.code, missing.body["kind"], missing.body["reason"]), (404, "Status", "NotFound"))
        version = await self.memory.get("/version")
        self.assertEqual(version.code, 200)

    @run
    async def test_the_filters_run_in_memory_too(self) -> None:
        whoami = await self.memory.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                        headers={"Impersonate-User": "bob"})
        self.assertEqual(whoami.body["status"]["userInfo"]["username"], "bob")
        bad = await self.memory.get("/api/v1/namespaces/default/configmaps?timeout=soon")
        self.assertEqual((bad.code, bad.body["reason"]), (400, "BadRequest"))

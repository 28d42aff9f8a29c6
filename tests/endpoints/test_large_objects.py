"""Writes of large objects (issue 31): the work is done off the reactor, the answers are the usual ones."""
from __future__ import annotations

import gc

from twisted.python import threadable

from kapiserver.endpoints import respond
from kapiserver.machinery import codec, protobuf
from kapiserver.registry.store import LARGE_BODY_ON_THREAD_BYTES
from kapiserver.testing.cases import ServerTestCase, run

CM = "/api/v1/namespaces/default/configmaps"


class LargeObjectAnswerTests(ServerTestCase):
    def record_answers(self) -> list[bool]:
        """Whether each answer's encoding from a stored value ran on the reactor thread."""
        on_reactor: list[bool] = []
        encode = respond.stored_body

        def recorded(*args):
            on_reactor.append(threadable.isInIOThread())
            return encode(*args)
        self.patch(respond, "stored_body", recorded)
        return on_reactor

    def configmap(self, name: str, size: int) -> bytes:
        return codec.encode_json({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                  "data": {"v": "<" + "x" * size}})

    @run
    async def test_a_large_objects_answer_is_encoded_off_the_reactor_and_is_what_a_get_answers(self):
        on_reactor = self.record_answers()
        for name, size in (("small", 100), ("large", LARGE_BODY_ON_THREAD_BYTES)):
            created = await self.client.request("POST", CM, raw=self.configmap(name, size))
            self.assertEqual(created.code, 201, created.raw[:300])
            got = await self.client.request("GET", f"{CM}/{name}")
            self.assertEqual(created.raw, got.raw)  # Go's escaping of "<" included
            self.assertIn(b'"v":"\\u003cxxx', got.raw)
            as_protobuf = await self.client.request("GET", f"{CM}/{name}",
                                                    headers={"Accept": protobuf.MEDIA_TYPE})
            self.assertEqual(protobuf.decode_object(as_protobuf.raw).obj["data"], {"v": "<" + "x" * size})
            pretty = await self.client.request("GET", f"{CM}/{name}?pretty=true")
            self.assertEqual(pretty.raw, codec.encode_json(got.body, pretty=True))
        self.assertEqual(on_reactor, [True, True, True, False, False, False])

    @run
    async def test_the_collector_runs_again_after_a_large_write(self):
        """The cyclic collector is held off while a large body is handled, and only then."""
        created = await self.client.request("POST", CM, raw=self.configmap("large", LARGE_BODY_ON_THREAD_BYTES))
        self.assertEqual(created.code, 201)
        self.assertTrue(gc.isenabled())
        refused = await self.client.request("POST", CM, raw=self.configmap("bad name!", LARGE_BODY_ON_THREAD_BYTES))
        self.assertEqual(refused.code, 422)
        self.assertTrue(gc.isenabled())

"""Protobuf watch streams (``application/vnd.kubernetes.protobuf;stream=watch``),
read as client-go reads them: 4-byte big-endian lengths, each followed by a
WatchEvent message whose object holds the object's full protobuf body."""
from __future__ import annotations

import base64

import treq
from twisted.internet import defer

from kapiserver.machinery import codec, protobuf
from kapiserver.registry import watch as registry_watch
from kapiserver.testing.cases import ServerTestCase, run, sleep

PB = protobuf.MEDIA_TYPE
CM = "/api/v1/namespaces/default/configmaps"
WATCH_LIST = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


def cm(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


class ProtobufWatchTests(ServerTestCase):
    async def open_watch(self, path: str, query: str, accept: str, framed: bool = True):
        """Start a watch; returns (response, frames list filled as bytes arrive, done Deferred).
        Unframed (JSON): the list gets the raw chunks."""
        response = await treq.get(f"{self.server.url}{path}?watch=true&{query}", headers={"Accept": accept},
                                  unbuffered=True, persistent=False)
        frames: list[bytes] = []
        buf = bytearray()

        def collect(chunk: bytes) -> None:
            if not framed:
                frames.append(chunk)
                return
            buf.extend(chunk)
            complete, rest = protobuf.split_watch_frames(bytes(buf))
            frames.extend(complete)
            buf[:] = rest

        done = treq.collect(response, collect)
        return response, frames, done

    async def watch_query_from_now(self) -> str:
        """A 2 s watch from the ConfigMaps' current revision, once the namespace controller's
        write (kube-root-ca.crt) is in, so that it is not among the events."""
        async def root_ca_published():
            return (await self.client.get(CM + "/kube-root-ca.crt")).code == 200
        await self.wait_for(root_ca_published)
        start = (await self.client.get(CM)).body["metadata"]["resourceVersion"]
        return f"resourceVersion={start}&timeoutSeconds=2"

    @staticmethod
    def events(frames: list[bytes]) -> list[tuple[str, dict]]:
        return [(t, obj) for t, _, obj in map(protobuf.decode_watch_event, frames)]

    @run
    async def test_events_are_length_prefixed_watch_event_frames(self):
        start = (await self.client.post(CM, cm("before", a="1"))).body["metadata"]["resourceVersion"]
        response, frames, done = await self.open_watch(
            CM, f"resourceVersion={start}&timeoutSeconds=2&fieldSelector=metadata.name!%3Dkube-root-ca.crt",
            f"{PB};stream=watch")
        self.assertEqual(response.code, 200)
        self.assertEqual(response.headers.getRawHeaders("content-type"), [f"{PB};stream=watch"])
        created = (await self.client.post(CM, cm("w", k="v"))).body
        await self.client.patch(CM + "/w", {"data": {"k": "v2"}})
        await self.client.delete(CM + "/w")
        await done
        events = self.events(frames)
        self.assertEqual([(t, o["metadata"]["name"]) for t, o in events],
                         [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")])
        self.assertEqual(events[0][1], created)  # the same object a JSON GET shows
        self.assertEqual(events[1][1]["data"], {"k": "v2"})
        # each frame's object is a complete protobuf body: magic, envelope with the kind
        _, env, _ = protobuf.decode_watch_event(frames[0])
        self.assertEqual((env.api_version, env.kind), ("v1", "ConfigMap"))

    @run
    async def test_plain_protobuf_accept_also_streams_frames(self):
        # client-go's typed watch sends its content types without stream=watch
        response, frames, done = await self.open_watch(CM, "timeoutSeconds=1", f"{PB}, application/json")
        self.assertEqual(response.headers.getRawHeaders("content-type"), [f"{PB};stream=watch"])
        await done

    @run
    async def test_watch_list_initial_events_and_bookmark_blueprint(self):
        async def root_ca_published():  # the namespace controller's write, before the watch starts
            return (await self.client.get(CM + "/kube-root-ca.crt")).code == 200
        await self.wait_for(root_ca_published)
        for name in ("a", "b"):
            await self.client.post(CM, cm(name))
        response, frames, done = await self.open_watch(
            CM, WATCH_LIST + "&timeoutSeconds=2&fieldSelector=metadata.name!%3Dkube-root-ca.crt", PB)
        await done
        events = self.events(frames)
        self.assertEqual([t for t, _ in events], ["ADDED", "ADDED", "BOOKMARK"])
        self.assertEqual(sorted(o["metadata"]["name"] for _, o in events[:2]), ["a", "b"])
        bookmark = events[2][1]
        self.assertEqual((bookmark["kind"], bookmark["apiVersion"]), ("ConfigMap", "v1"))
        annotations = bookmark["metadata"]["annotations"]
        self.assertEqual(annotations["k8s.io/initial-events-end"], "true")
        # the empty list in the stream's encoding, from which client-go's WatchList builds its list
        blueprint = base64.b64decode(annotations["kubernetes.io/initial-events-list-blueprint"])
        self.assertTrue(blueprint.startswith(protobuf.MAGIC))
        self.assertEqual(protobuf.decode_object(blueprint).obj,
                         {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": None})
        listed = (await self.client.get(CM)).body
        self.assertGreaterEqual(int(bookmark["metadata"]["resourceVersion"]),
                                max(int(i["metadata"]["resourceVersion"]) for i in listed["items"]))

    @run
    async def test_metadata_informer_watch(self):
        # client-go's metadata client: PartialObjectMetadata frames
        await self.client.post(CM, cm("m", secret="not-in-metadata"))
        accept = (f"{PB};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
                  "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
        _, frames, done = await self.open_watch(CM, WATCH_LIST + "&timeoutSeconds=1", accept)
        await done
        decoded = [protobuf.decode_watch_event(f) for f in frames]
        self.assertEqual({(env.api_version, env.kind) for _, env, _ in decoded},
                         {("meta.k8s.io/v1", "PartialObjectMetadata")})
        self.assertIn("m", [obj["metadata"].get("name") for t, _, obj in decoded if t == "ADDED"])
        self.assertNotIn(b"not-in-metadata", b"".join(frames))
        (end,) = [obj for t, _, obj in decoded if t == "BOOKMARK"
                  and obj["metadata"].get("annotations", {}).get("k8s.io/initial-events-end")]
        blueprint = end["metadata"]["annotations"]["kubernetes.io/initial-events-list-blueprint"]
        self.assertEqual(protobuf.decode_object(base64.b64decode(blueprint)).obj["kind"],
                         "PartialObjectMetadataList")

    @run
    async def test_each_event_is_encoded_once_per_content_type(self):
        calls = {"protobuf": 0, "json": 0}
        real_protobuf, real_json = protobuf.encode_object, codec.encode_json

        def count_protobuf(obj):
            if obj.get("metadata", {}).get("name") == "once":
                calls["protobuf"] += 1
            return real_protobuf(obj)

        def count_json(obj, *args):
            if isinstance(obj, dict) and (obj.get("object") or {}).get("metadata", {}).get("name") == "once":
                calls["json"] += 1
            return real_json(obj, *args)

        self.patch(protobuf, "encode_object", count_protobuf)
        self.patch(codec, "encode_json", count_json)
        query = await self.watch_query_from_now()
        watches = [await self.open_watch(CM, query, PB) for _ in range(3)]
        json_watches = [await self.open_watch(CM, query, "application/json", framed=False) for _ in range(2)]
        await sleep(0.2)
        await self.client.post(CM, cm("once"))
        await defer.gatherResults([done for _, _, done in watches + json_watches])
        for _, frames, _ in watches:
            self.assertIn(("ADDED", "once"), [(t, o["metadata"]["name"]) for t, o in self.events(frames)])
        for _, chunks, _ in json_watches:
            self.assertEqual(codec.decode_json(b"".join(chunks))["type"], "ADDED")
        self.assertEqual(calls, {"protobuf": 1, "json": 1})

    @run
    async def test_watchers_with_a_field_selector_share_the_decoding_and_encoding_of_an_event_they_all_see(self):
        # the scheduler's and the kubelet's pod watches have field selectors, kube-controller-manager's
        # has none: an event they all see is encoded once per type, not once per watcher
        calls = {"ADDED": 0, "MODIFIED": 0}
        decoded = {"v1": 0, "v2": 0}
        real_protobuf, real_decode = protobuf.encode_object, registry_watch.decode

        def count_protobuf(obj):
            if obj.get("metadata", {}).get("name") == "shared":
                calls["MODIFIED" if obj.get("data", {}).get("k") == "v2" else "ADDED"] += 1
            return real_protobuf(obj)

        def count_decode(kv):
            obj = real_decode(kv)
            if obj["metadata"]["name"] == "shared":
                decoded[obj["data"]["k"]] += 1
            return obj

        self.patch(protobuf, "encode_object", count_protobuf)
        self.patch(registry_watch, "decode", count_decode)
        query = await self.watch_query_from_now()
        selected = [await self.open_watch(CM, f"{query}&fieldSelector=metadata.name%3Dshared", PB) for _ in range(2)]
        others = await self.open_watch(CM, f"{query}&fieldSelector=metadata.name!%3Dshared", PB)
        everything = await self.open_watch(CM, query, PB)
        await sleep(0.2)
        await self.client.post(CM, cm("shared", k="v1"))
        await self.client.patch(CM + "/shared", {"data": {"k": "v2"}})
        await defer.gatherResults([done for _, _, done in [*selected, others, everything]])
        for _, frames, _ in [*selected, everything]:
            self.assertEqual([(t, o["metadata"]["name"], o["data"]["k"]) for t, o in self.events(frames)],
                             [("ADDED", "shared", "v1"), ("MODIFIED", "shared", "v2")])
        self.assertEqual(self.events(others[1]), [])
        self.assertEqual(calls, {"ADDED": 1, "MODIFIED": 1})
        # and decode it once for all of them: the create's object, the update's new and old ones
        self.assertEqual(decoded, {"v1": 2, "v2": 1})

    @run
    async def test_custom_resources_stream_json_or_406(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gizmos.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "gizmos", "kind": "Gizmo"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        # the CRD itself is protobuf in both directions
        created = await self.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                         raw=protobuf.encode_object(crd), content_type=PB, headers={"Accept": PB})
        self.assertEqual((created.code, created.header("content-type")), (201, PB), created.raw)
        url = "/apis/example.com/v1/namespaces/default/gizmos"

        async def served():
            return (await self.client.get(url)).code == 200
        await self.wait_for(served)
        r = await treq.get(f"{self.server.url}{url}?watch=true&timeoutSeconds=1", headers={"Accept": PB},
                           persistent=False)
        self.assertEqual(r.code, 406)
        await treq.content(r)
        response = await treq.get(f"{self.server.url}{url}?watch=true&timeoutSeconds=1",
                                  headers={"Accept": f"{PB}, application/json"}, persistent=False)
        self.assertEqual(response.headers.getRawHeaders("content-type"), ["application/json"])
        await treq.content(response)

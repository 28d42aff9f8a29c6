"""Lists written piece by piece: the same bytes as the whole list encoded at once,
in every encoding and shape, and a client that stops reading holds a bounded buffer."""
from __future__ import annotations

import json
import re
import socket
import time

import orjson
from twisted.internet import reactor, task
from twisted.trial import unittest

from kapiserver.endpoints import list_encoding, list_stream, table
from kapiserver.machinery import codec, protobuf
from kapiserver.registry.options import ListOptions
from kapiserver.testing.cases import ServerTestCase, run
from tests.endpoints.slow_reader import SlowReader

NS = "/api/v1/namespaces/default"
CM = NS + "/configmaps"
PB = protobuf.MEDIA_TYPE


def configmap(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": name[:2]}},
            "data": data}


class ListBytesTests(ServerTestCase):
    async def fill(self) -> None:
        odd = {"html": "<a href='x'>&amp;</a>", "unicode": "żółw \u2028 line", "yaml": "key: value\n- item"}
        for i in range(7):
            r = await self.client.post(CM, configmap(f"cm-{i}", n=str(i), **odd))
            self.assertEqual(r.code, 201)

    async def expected(self, query: str = "", answer: bytes = b"", typed: bool = True) -> dict:
        """The list as one object, as the Store reads it (what used to be encoded whole); with
        the ListMeta of ``answer`` (JSON or YAML) when given, since writes elsewhere (the
        bootstrap controllers') move the revision in between.  ``typed``: as a ConfigMapList
        carries its items, without their kind and apiVersion (a Table's rows keep them)."""
        store = self.server.api.served.store("", "v1", "configmaps")
        args = {k.encode(): [v.encode()] for k, v in (p.split("=", 1) for p in query.split("&") if p)}
        listed = await store.list("default", ListOptions.from_args(args))
        if typed:  # kube-apiserver's typed (built-in) lists carry their items without TypeMeta
            listed["items"] = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
                               for item in listed["items"]]
        if answer:
            listed["metadata"] = codec.decode_yaml(answer)["metadata"]
        return listed

    @run
    async def test_json_compact_and_indented_match_the_whole_encoding(self):
        await self.fill()
        r = await self.client.get(CM + "?resourceVersion=0")
        self.assertEqual(r.code, 200)
        self.assertIsNone(r.header("content-length"))  # chunked
        self.assertEqual({"kind", "apiVersion"} & {key for item in r.body["items"] for key in item}, set())
        self.assertEqual(r.raw, codec.encode_json(await self.expected("resourceVersion=0", r.raw)))
        r = await self.client.get(CM + "?resourceVersion=0&pretty=true")
        self.assertEqual(r.raw, codec.encode_json(await self.expected("resourceVersion=0", r.raw), pretty=True))
        # a second list reuses the memoized encodings: still the same bytes
        r = await self.client.get(CM + "?resourceVersion=0")
        self.assertEqual(r.raw, codec.encode_json(await self.expected("resourceVersion=0", r.raw)))

    @run
    async def test_only_what_programs_ask_for_is_memoized_on_the_cached_values(self):
        await self.fill()
        cache = self.server.storage.cache_for("/configmaps/")
        for accept in ("application/yaml", "application/json"):
            self.assertEqual((await self.client.get(CM + "?resourceVersion=0", headers={"Accept": accept})).code, 200)
        self.assertEqual((await self.client.get(CM + "?resourceVersion=0&pretty=true")).code, 200)
        r = await self.client.get(CM + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                                  "&allowWatchBookmarks=true&timeoutSeconds=1")
        self.assertEqual(r.code, 200)
        values = [cache.get(key) for key in cache._keys if key.startswith("/configmaps/default/cm-")]
        self.assertEqual(len(values), 7)
        # one encoding each (compact JSON), shared by the LIST and the watch-list's initial events
        self.assertEqual({len(kv.encodings or {}) for kv in values}, {1})
        first = values[0]
        self.assertIn(b'{"type":"ADDED","object":' + next(iter(first.encodings.values())) + b"}\n", r.raw)
        r = await self.client.get(CM + "?resourceVersion=0", headers={"Accept": PB})
        self.assertEqual({len(kv.encodings or {}) for kv in values}, {2})

    @run
    async def test_empty_lists(self):
        for query in ("", "?pretty=true"):
            r = await self.client.get(NS + "/podtemplates" + query)
            listed = {"kind": "PodTemplateList", "apiVersion": "v1", "metadata": json.loads(r.raw)["metadata"],
                      "items": []}
            self.assertEqual(r.raw, codec.encode_json(listed, pretty=bool(query)))
        r = await self.client.get(NS + "/podtemplates", headers={"Accept": "application/yaml"})
        self.assertIn(b"\nitems: []\n", r.raw)

    @run
    async def test_yaml_matches_the_whole_encoding(self):
        await self.fill()
        r = await self.client.get(CM + "?resourceVersion=0", headers={"Accept": "application/yaml"})
        self.assertEqual(r.header("content-type"), "application/yaml")
        self.assertEqual(r.raw, codec.encode_yaml(await self.expected("resourceVersion=0", r.raw)))

    @run
    async def test_protobuf_matches_the_whole_encoding(self):
        await self.fill()
        for query in ("resourceVersion=0", "limit=3", "labelSelector=app%3Dcm"):
            r = await self.client.get(CM + "?" + query, headers={"Accept": PB})
            self.assertEqual(r.header("content-type"), PB)
            expected = await self.expected(query.replace("%3D", "="))
            # (writes elsewhere, such as the bootstrap controllers', move the list's revision)
            expected["metadata"]["resourceVersion"] = protobuf.decode_object(r.raw).obj["metadata"]["resourceVersion"]
            self.assertEqual(r.raw, protobuf.encode_object(expected), query)
            decoded = protobuf.decode_object(r.raw).obj
            self.assertEqual([i["metadata"]["name"] for i in decoded["items"]],
                             [i["metadata"]["name"] for i in expected["items"]])

    @run
    async def test_partial_object_metadata_list_in_json_and_protobuf(self):
        await self.fill()
        for version in ("v1", "v1beta1"):
            shape = f";as=PartialObjectMetadataList;g=meta.k8s.io;v={version}"
            expected = await self.expected("resourceVersion=0")
            whole = {"kind": "PartialObjectMetadataList", "apiVersion": f"meta.k8s.io/{version}",
                     "metadata": expected["metadata"],
                     "items": [{"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}",
                                "metadata": i["metadata"]} for i in expected["items"]]}
            r = await self.client.get(CM + "?resourceVersion=0", headers={"Accept": "application/json" + shape})
            whole["metadata"] = json.loads(r.raw)["metadata"]
            self.assertEqual(r.raw, codec.encode_json(whole))
            r = await self.client.get(CM + "?resourceVersion=0", headers={"Accept": PB + shape})
            whole["metadata"] = protobuf.decode_object(r.raw).obj["metadata"]
            self.assertEqual(r.raw, protobuf.encode_object(whole))

    @run
    async def test_table_rows_match_the_whole_table(self):
        await self.fill()
        accept = "application/json;as=Table;g=meta.k8s.io;v=v1"
        for include in ("", "&includeObject=Object", "&includeObject=None"):
            r = await self.client.get(CM + "?resourceVersion=0" + include, headers={"Accept": accept})
            expected = await self.expected("resourceVersion=0", typed=False)
            whole = table.to_table(self.server.api.served.store("", "v1", "configmaps").rtype, expected["items"],
                                   include.rsplit("=", 1)[-1] if include else "Metadata", expected["metadata"])
            got = json.loads(r.raw)
            # AGE may tick between the two; everything else is byte for byte the same
            for a, b in zip(got["rows"], whole["rows"]):
                a["cells"][-1] = b["cells"][-1] = None
            self.assertEqual(orjson.dumps(got), orjson.dumps(json.loads(codec.encode_json(whole))))
        r = await self.client.get(CM + "?includeObject=Everything", headers={"Accept": accept})
        self.assertEqual(r.code, 400)

    @run
    async def test_a_repeated_list_is_the_same_bytes_until_something_changes(self):
        # more than one slice of a memoized run (list_encoding.RUN_SLICE)
        for i in range(40):
            self.assertEqual((await self.client.post(CM, configmap(f"big-{i:02d}", v="x" * 8000))).code, 201)
        shapes = [("application/json", lambda r: json.loads(r.raw)["metadata"], codec.encode_json),
                  (PB, lambda r: protobuf.decode_object(r.raw).obj["metadata"], protobuf.encode_object)]

        async def check(what: str) -> None:
            for query in ("resourceVersion=0", ""):
                for accept, list_meta, encode in shapes:
                    for _ in range(3):  # the first lists fill the memo, the last one reuses it
                        r = await self.client.get(CM + "?" + query, headers={"Accept": accept})
                        expected = await self.expected(query)
                        expected["metadata"] = list_meta(r)
                        self.assertEqual(r.raw, encode(expected), (what, query, accept))
        await check("first lists")
        page = self.server.storage.cache_for("/configmaps/")._last_page[1]
        runs = [v for v in page.memo.values() if isinstance(v, bytes)]
        self.assertEqual(len(runs), 2)  # JSON and protobuf, each kept once
        self.assertGreater(min(map(len, runs)), list_encoding.RUN_SLICE)
        cm = json.loads((await self.client.get(CM + "/big-03")).raw)
        cm["data"] = {"v": "changed"}
        self.assertEqual((await self.client.put(CM + "/big-03", cm)).code, 200)
        self.assertEqual((await self.client.delete(CM + "/big-05")).code, 200)
        await check("after a change")
        r = await self.client.get(CM + "?resourceVersion=0")
        items = {i["metadata"]["name"]: i["data"] for i in json.loads(r.raw)["items"]}
        self.assertEqual((items["big-03"], "big-05" in items), ({"v": "changed"}, False))

    @run
    async def test_a_get_answers_the_bytes_of_the_object_in_every_form(self):
        # a GET of a stored value answers the encodings memoized on it (compact JSON, protobuf)
        await self.fill()
        store = self.server.api.served.store("", "v1", "configmaps")
        obj = await store.get("default", "cm-2")
        forms = [({}, codec.encode_json(obj)), ({"Accept": PB}, protobuf.encode_object(obj)),
                 ({"Accept": "application/yaml"}, codec.encode_yaml(obj)),
                 ({"User-Agent": "curl/8"}, codec.encode_json(obj, pretty=True))]
        for _ in range(2):  # the first GET fills the memo, the second reuses it
            for headers, expected in forms:
                r = await self.client.get(CM + "/cm-2", headers=headers)
                self.assertEqual((r.code, r.raw), (200, expected), headers)
        r = await self.client.get(CM + "/cm-2", headers={
            "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
        self.assertEqual((r.body["kind"], r.body["metadata"]["name"]), ("PartialObjectMetadata", "cm-2"))
        self.assertNotIn("data", r.body)
        head = await self.client.request("HEAD", CM + "/cm-2")
        self.assertEqual((head.code, head.raw, head.header("content-length")), (200, b"", str(len(forms[0][1]))))
        obj["data"] = {"n": "changed"}
        self.assertEqual((await self.client.put(CM + "/cm-2", obj)).code, 200)
        r = await self.client.get(CM + "/cm-2")
        self.assertEqual((r.body["data"], r.raw), ({"n": "changed"}, codec.encode_json(await store.get("default", "cm-2"))))

    @run
    async def test_a_value_listed_as_stored_keeps_no_second_copy_and_answers_the_same_bytes(self):
        # a plain ConfigMap's compact JSON is its stored value with its resourceVersion added: the
        # memo is where that goes (an int), and every answer built from it is still the whole encoding
        for i in range(5):
            self.assertEqual((await self.client.post(CM, configmap(f"plain-{i}", n=str(i)))).code, 201)
        await self.fill()  # and values that do not splice (Go's escapes of <, >, &)
        r = await self.client.get(CM + "?resourceVersion=0")
        self.assertEqual(r.raw, codec.encode_json(await self.expected("resourceVersion=0", r.raw)))
        cache = self.server.storage.cache_for("/configmaps/")
        memos = {key: next(iter(cache.get(key).encodings.values())) for key in cache._keys
                 if key.startswith("/configmaps/default/")}
        self.assertEqual({type(m) for k, m in memos.items() if "/plain-" in k}, {int})
        self.assertEqual({type(m) for k, m in memos.items() if "/cm-" in k}, {bytes})
        store = self.server.api.served.store("", "v1", "configmaps")
        for name in ("plain-3", "cm-3"):
            r = await self.client.get(CM + "/" + name)
            self.assertEqual(r.raw, codec.encode_json(await store.get("default", name)), name)
        r = await self.client.get(CM + "?limit=3")  # another page: its items from their memos
        self.assertEqual(r.raw, codec.encode_json(await self.expected("limit=3", r.raw)))

    @run
    async def test_limit_and_continue_still_page(self):
        await self.fill()
        names = [i["metadata"]["name"] for i in (await self.expected())["items"]]
        r = await self.client.get(CM + "?limit=4")
        self.assertEqual([i["metadata"]["name"] for i in r.body["items"]], names[:4])
        self.assertEqual(r.body["metadata"]["remainingItemCount"], len(names) - 4)
        r = await self.client.get(CM + "?limit=4&continue=" + r.body["metadata"]["continue"])
        self.assertEqual([i["metadata"]["name"] for i in r.body["items"]], names[4:8])


class SlowListReaderTests(ServerTestCase):
    @run
    async def test_a_client_that_stops_reading_holds_a_bounded_buffer(self):
        """A 40 MB list to a client that reads nothing: the server encodes about what the
        socket buffers take, then waits; the client reads it all in the end."""
        blob = "x" * (400 * 1024)
        for i in range(100):
            self.assertEqual((await self.client.post(CM, configmap(f"big-{i:03}", blob=blob))).code, 201)
        reader = SlowReader(self, self.server.url, b"GET " + CM.encode()
                            + b"?resourceVersion=0 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
        streams = await reader.writing_streams(polls=100)
        self.assertEqual(len(streams), 1)
        stream = streams[0]
        await reader.let_it_write()
        total = 100 * len(blob)
        # kernel socket buffers (both ends of the loopback) plus one slice and the transport's buffer
        self.assertLess(stream.bytes_written, 12 * 1024 * 1024, "the server encoded ahead of the reader")
        self.assertLessEqual(stream.largest_write, list_stream.BATCH_BYTES + 450 * 1024)
        self.assertTrue(stream.paused)
        # the client reads: the rest follows
        received = await reader.read_all(stream, total, hang_guard=30)
        self.assertTrue(stream.finished)
        self.assertGreater(received, total)


class StalledListReaderTests(ServerTestCase):
    settings = {"request_timeout_seconds": 2}

    @run
    async def test_a_list_still_unread_at_the_request_deadline_loses_its_connection(self):
        blob = "x" * (400 * 1024)
        for i in range(60):
            self.assertEqual((await self.client.post(CM, configmap(f"big-{i:03}", blob=blob))).code, 201)
        port = int(self.server.url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.connect(("127.0.0.1", port))
        self.addCleanup(sock.close)
        sock.sendall(b"GET " + CM.encode() + b"?resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(100):
            await task.deferLater(reactor, 0.05, lambda: None)
            if list_stream.active_streams():
                break
        stream = list_stream.active_streams()[0]
        await task.deferLater(reactor, 2.5, lambda: None)
        self.assertTrue(stream.stopped)
        self.assertFalse(stream.finished)
        self.assertEqual(list_stream.active_streams(), [])
        # what the client gets is a cut answer: the connection ends before the list does
        sock.settimeout(5)
        received = b""
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except ConnectionResetError:  # dropped, as upstream drops it
                break
            if not chunk:
                break
            received += chunk
        self.assertLess(len(received), 60 * len(blob))
        # and the server goes on serving
        self.assertEqual((await self.client.get(CM + "/big-000")).code, 200)


class SlowWatchListReaderTests(ServerTestCase):
    @run
    async def test_initial_events_of_a_watch_list_wait_for_the_reader(self):
        """A watch-list of 40 MB to a client that reads nothing is neither buffered nor closed:
        its initial events are encoded as the client reads them, then the end bookmark follows."""
        blob = "x" * (400 * 1024)
        for i in range(100):
            self.assertEqual((await self.client.post(CM, configmap(f"big-{i:03}", blob=blob))).code, 201)
        port = int(self.server.url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.connect(("127.0.0.1", port))
        self.addCleanup(sock.close)
        sock.sendall(b"GET " + CM.encode() + b"?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                     b"&allowWatchBookmarks=true HTTP/1.1\r\nHost: x\r\n\r\n")
        watches = self.server.api.watches
        for _ in range(100):
            await task.deferLater(reactor, 0.05, lambda: None)
            if watches.watches:
                break
        for _ in range(10):
            await task.deferLater(reactor, 0.05, lambda: None)
        stream = next(iter(watches.watches)).sink
        self.assertTrue(stream.feeding)
        self.assertTrue(stream.paused)
        self.assertLess(stream._initial_index, 40)  # the rest is not even encoded yet
        self.assertEqual(len(stream.backlog), 1)  # the initial-events-end bookmark, waiting its turn
        # an event meanwhile waits behind the initial ones
        self.assertEqual((await self.client.post(CM, configmap("late"))).code, 201)
        sock.setblocking(False)
        received = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b'"name":"late"' not in received:
            try:
                chunk = sock.recv(1 << 20)
            except BlockingIOError:
                await task.deferLater(reactor, 0.01, lambda: None)
                continue
            if not chunk:
                break
            received += chunk
        names = []  # (event type, object name) in the order received
        for event in received.split(b'{"type":"')[1:]:
            kind = event.split(b'"', 1)[0]
            found = re.search(rb'"name":"([^"]*)"', event)
            names.append((kind, found.group(1) if found and kind != b"BOOKMARK" else None))
        kinds = [kind for kind, _ in names]
        self.assertEqual(kinds.count(b"BOOKMARK"), 1)
        bookmark_at = kinds.index(b"BOOKMARK")
        initial = [name for kind, name in names[:bookmark_at]]
        self.assertEqual(sum(1 for n in initial if n.startswith(b"big-")), 100)
        self.assertEqual(names[-1], (b"ADDED", b"late"))
        self.assertFalse(stream.feeding)


class TypeMetaTrimTests(unittest.SynchronousTestCase):
    def test_an_item_not_stamped_first_is_encoded_anew_without_type_meta(self):
        trim = list_encoding._TypeMetaTrim("ConfigMap", "v1")
        self.assertEqual(trim(b'{"kind":"ConfigMap","apiVersion":"v1","data":{"a":"b"}}'), b'{"data":{"a":"b"}}')
        self.assertEqual(trim(b'{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap"}'), b'{"data":{"a":"b"}}')
        self.assertEqual(trim(b'{"kind":"ConfigMap","apiVersion":"v1"}'), b"{}")

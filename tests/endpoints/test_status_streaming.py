"""A 422 Invalid of many causes written as a stream (endpoints/status_stream.py): the same bytes
as the whole Status encoded at once, upstream's code, reason and every cause end to end, and a
client that does not read holds the server to a slice at a time."""
from __future__ import annotations

import hashlib

from twisted.internet import defer, task
from twisted.internet.testing import StringTransport
from twisted.trial import unittest
from twisted.web import http, server
from twisted.web.resource import Resource

from kapiserver.endpoints import list_stream
from kapiserver.endpoints.list_stream import ListStream
from kapiserver.endpoints.negotiation import negotiate
from kapiserver.endpoints.status_stream import CAUSES_PER_PIECE, STREAMED_CAUSES, StatusBody, first_occurrences, \
    streamable
from kapiserver.machinery import codec, errors, protobuf
from kapiserver.testing.cases import ServerTestCase, run
from tests.endpoints.slow_reader import SlowReader

CM = "/api/v1/namespaces/default/configmaps"
PB = protobuf.MEDIA_TYPE
KUBE_FINALIZER = "name is neither a standard finalizer name nor is it fully qualified"


def finalizer_causes(count: int) -> list[errors.Cause]:
    """What core's validation finds in ``count`` finalizers ``a``: one cause each, at its index."""
    return [errors.field_invalid(f"metadata.finalizers[{i}]", "a", KUBE_FINALIZER) for i in range(count)]


def whole(err: errors.StatusError, accept: str) -> bytes:
    """The Status encoded at once, as write_status writes a small one."""
    status = err.to_status()
    return protobuf.encode_object(status) if accept == PB else codec.encode_json(status)


async def streamed(err: errors.InvalidError, accept: str) -> bytes:
    body = StatusBody(err, negotiate(accept).for_status())
    await body.prepare()
    return body.head() + b"".join(body.piece(i) for i in range(body.piece_count())) + body.tail()


class StatusBodyTests(unittest.TestCase):
    """The pieces put together are the whole encoding, byte for byte."""

    def check(self, err: errors.StatusError) -> defer.Deferred:
        async def go() -> None:
            assert isinstance(err, errors.InvalidError)
            for accept in ("application/json", PB):
                self.assertTrue(streamable(err, negotiate(accept).for_status(), pretty=False))
                self.assertEqual(await streamed(err, accept), whole(err, accept), accept)
        return defer.ensureDeferred(go())

    def test_distinct_causes(self):
        return self.check(errors.invalid("ConfigMap", "", "fin", finalizer_causes(3 * CAUSES_PER_PIECE + 7)))

    def test_repeated_causes_are_listed_once_in_the_message(self):
        causes = finalizer_causes(1500)
        causes[700:700] = causes[10:20] * 3  # the same field and message again, far from the first
        causes += [errors.field_required("spec.x")] * 600  # an error without field path: its message only
        err = errors.invalid("Widget", "example.com", "w", causes)
        self.assertEqual(err.message.count("metadata.finalizers[15]: "), 1)
        self.assertEqual(len(err.to_status()["details"]["causes"]), len(causes))
        return self.check(err)

    def test_one_distinct_cause_has_no_brackets(self):
        err = errors.invalid("ConfigMap", "", "x", [errors.field_invalid("data", "v", "bad")] * STREAMED_CAUSES)
        self.assertEqual(err.message, 'ConfigMap "x" is invalid: data: Invalid value: "v": bad')
        return self.check(err)

    def test_go_escapes_and_non_ascii_in_names_fields_and_messages(self):
        causes = [errors.field_invalid(f"metadata.labels[<é&{i}>]", "\u2028żółw<b>", "a 'quoted' \"detail\"")
                  for i in range(STREAMED_CAUSES + 3)]
        err = errors.invalid("Pod", "", "n<&>ß", causes)
        err.details["uid"] = "0000-1111"
        return self.check(err)

    def test_what_is_written_whole(self):
        err = errors.invalid("ConfigMap", "", "fin", finalizer_causes(STREAMED_CAUSES))
        json_target = negotiate("application/json").for_status()
        self.assertFalse(streamable(err, json_target, pretty=True))  # indented JSON
        self.assertFalse(streamable(err, negotiate("application/yaml").for_status(), pretty=False))
        few = errors.invalid("ConfigMap", "", "fin", finalizer_causes(STREAMED_CAUSES - 1))
        self.assertFalse(streamable(few, json_target, pretty=False))
        err.message = "another message"  # (set by whoever raised it: the rendered pieces would not be it)
        self.assertFalse(streamable(err, json_target, pretty=False))

    def test_first_occurrences(self):
        a, b, c = (errors.Cause(errors.INVALID, m, "f") for m in "abc")
        no_field = errors.Cause(errors.INVALID, "f: a", "")  # renders as the first one
        first, distinct = self.successResultOf(defer.ensureDeferred(
            first_occurrences([a, b, a, c, b, no_field, c])))
        self.assertEqual(list(first), [1, 1, 0, 1, 0, 0, 0])
        self.assertEqual(distinct, 3)


def _chunked_body(data: bytes) -> bytes:
    """The body of an HTTP/1.1 answer in chunked transfer encoding."""
    _, _, rest = data.partition(b"\r\n\r\n")
    body = bytearray()
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return bytes(body)
        body += rest[:size]
        rest = rest[size + 2:]


class SlowReaderTests(unittest.TestCase):
    """An answer's stream over a transport that says when its buffer is full (HTTPChannel's flow
    control, as a TCP transport drives it), the reactor a Clock: nothing is encoded while paused."""

    def test_a_paused_transport_stops_the_encoding_until_it_resumes(self):
        async def go() -> None:
            err = errors.invalid("ConfigMap", "", "fin", finalizer_causes(40 * CAUSES_PER_PIECE))
            assert isinstance(err, errors.InvalidError)
            body = StatusBody(err, negotiate("application/json").for_status())
            await body.prepare()
            transport = StringTransport()
            channel = http.HTTPChannel()
            channel.site = server.Site(Resource())
            channel.makeConnection(transport)
            request = server.Request(channel, False)
            channel.requests.append(request)  # (the request the channel is answering)
            request.method, request.clientproto = b"POST", b"HTTP/1.1"
            request.setResponseCode(422)
            clock = task.Clock()
            stream = ListStream(request, body, clock)
            stream.start()
            first = len(transport.value())
            self.assertGreater(first, 0)
            self.assertLessEqual(stream.largest_write, list_stream.BATCH_BYTES + 2 * 200 * CAUSES_PER_PIECE)
            channel.pauseProducing()  # the transport's buffer is full
            self.assertTrue(stream.paused)
            clock.advance(0)
            clock.advance(1)
            self.assertEqual(len(transport.value()), first)  # nothing more encoded or written
            self.assertFalse(stream.finished)
            channel.resumeProducing()
            while not stream.finished:
                clock.advance(0)
            self.assertEqual(_chunked_body(transport.value()), whole(err, "application/json"))
            self.assertEqual(stream.bytes_written, len(whole(err, "application/json")))
        return defer.ensureDeferred(go())


class InvalidEndToEndTests(ServerTestCase):
    async def post_finalizers(self, count: int, accept: str, query: str = ""):
        body = codec.encode_json({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "fin", "finalizers": ["a"] * count}})
        return await self.client.request("POST", CM + query, raw=body, headers={"Accept": accept})

    @run
    async def test_a_large_invalid_body_gets_upstreams_422_with_every_cause(self):
        """70,000 finalizers (a body over LARGE_BODY_ON_THREAD_BYTES, decoded on a thread): upstream's
        422 Invalid, every cause in details and in the message, in JSON and protobuf (streamed), YAML
        and indented JSON (written whole)."""
        count = 70_000
        expected = errors.invalid("ConfigMap", "", "fin", finalizer_causes(count))
        r = await self.post_finalizers(count, "application/json")
        self.assertEqual(r.code, 422)
        self.assertIsNone(r.header("content-length"))  # streamed (chunked)
        self.assertEqual((r.body["reason"], r.body["code"]), ("Invalid", 422))
        self.assertEqual(len(r.body["details"]["causes"]), count)
        self.assertEqual(r.body["details"]["causes"][-1], {
            "reason": "FieldValueInvalid", "message": f'Invalid value: "a": {KUBE_FINALIZER}',
            "field": f"metadata.finalizers[{count - 1}]"})
        self.assertTrue(r.body["message"].startswith(
            f'ConfigMap "fin" is invalid: [metadata.finalizers[0]: Invalid value: "a": {KUBE_FINALIZER}, '
            f'metadata.finalizers[1]: '))
        self.assertEqual(r.raw, whole(expected, "application/json"))
        r = await self.post_finalizers(count, "application/vnd.kubernetes.protobuf, application/json")
        self.assertEqual((r.code, r.header("content-type")), (422, PB))
        self.assertEqual(r.raw, whole(expected, PB))
        self.assertEqual(len(protobuf.decode_object(r.raw).obj["details"]["causes"]), count)
        # YAML and indented JSON: rendered and encoded on a thread, written whole
        r = await self.post_finalizers(count, "application/yaml")
        self.assertEqual((r.code, r.header("content-type")), (422, "application/yaml"))
        self.assertEqual(r.raw, codec.encode_yaml(expected.to_status()))
        r = await self.post_finalizers(count, "application/json", "?pretty=true")
        self.assertEqual(r.code, 422)
        self.assertEqual(r.raw, codec.encode_json(expected.to_status(), pretty=True))


# SHA-256 of kube-apiserver v1.32.13's answers to a ConfigMap with 1,500 finalizers "a" (captured from the
# anchor, 2026-11-29; 428,477, 378,893 and 439,952 bytes): the streamed answers are these bytes.
UPSTREAM_1500_FINALIZERS = {
    "application/json": "05af0fc6a55a536434b1f8826f2466ea84464e6adff8e828b65c30f10148eaa1",
    "application/vnd.kubernetes.protobuf, application/json":
        "d928c83f91b6726ff12dd65dd4a8cd324736ad9e72cc7bef4ba3c02ea13f712f",
    "application/yaml": "7a5b926668add079e49ac0674b5820ff22c39b98fca4a6c6bc0809219eecb6c0",
}


class UpstreamBytesTests(ServerTestCase):
    @run
    async def test_the_answer_to_1500_bad_finalizers_is_upstreams_byte_for_byte(self):
        body = codec.encode_json({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "fin", "finalizers": ["a"] * 1500}})
        for accept, digest in UPSTREAM_1500_FINALIZERS.items():
            r = await self.client.request("POST", CM, raw=body, headers={"Accept": accept})
            self.assertEqual(r.code, 422)
            self.assertEqual(hashlib.sha256(r.raw).hexdigest(), digest, accept)


class SlowReaderEndToEndTests(ServerTestCase):
    @run
    async def test_a_client_that_does_not_read_its_422_holds_a_bounded_buffer(self):
        """100,000 bad finalizers (a ~26 MB Status) to a client that reads nothing: the server
        writes about what the socket buffers take, then waits; the client reads it all in the end."""
        count = 100_000
        data = codec.encode_json({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "fin", "finalizers": ["a"] * count}})
        total = len(whole(errors.invalid("ConfigMap", "", "fin", finalizer_causes(count)), "application/json"))
        reader = SlowReader(self, self.server.url,
                            b"POST " + CM.encode() + b" HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
                            b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode()
                            + b"\r\n\r\n" + data)
        streams = await reader.writing_streams(StatusBody)
        self.assertEqual(len(streams), 1)
        stream = streams[0]
        await reader.let_it_write()
        # kernel socket buffers (both ends of the loopback) plus a slice and the transport's buffer
        self.assertLess(stream.bytes_written, 12 * 1024 * 1024, "the server encoded ahead of the reader")
        self.assertTrue(stream.paused)
        received = await reader.read_all(stream, total)
        self.assertTrue(stream.finished)
        self.assertGreater(received, total)

"""``pods/log`` through an in-process kapiserver to a stand-in kubelet on a loopback TLS port
(upstream's ``LogLocation`` and ``LocationStreamer``): the query the kubelet gets for each
PodLogOptions field, a kubelet's refusal as upstream's Status (``GenericHttpResponseChecker``), a
followed log reaching the client line by line, and a client that leaves closing the kubelet's
connection."""
from __future__ import annotations

import json
from typing import Any

import treq
from twisted.internet import defer, protocol, reactor

from kapiserver.testing.cases import ServerTestCase, run
from tests.endpoints.streaming.standin import NS, Reader, StandInKubelet, add_node_and_pod


class PodLogTests(ServerTestCase):
    async def _start(self) -> None:
        await super()._start()
        self.kubelet = StandInKubelet()
        port = self.kubelet.listen()
        self.addCleanup(self.kubelet.stop)
        await add_node_and_pod(self.client, port)

    async def log_with_query(self, query: str) -> bytes:
        """The URI the kubelet got for ``pods/p/log?<query>`` (it answers one line)."""
        arrival = self.kubelet.next_request()
        answer = self.client.get(NS + "/pods/p/log?" + query)
        seen = await arrival
        seen.request.write(b"a line\n")
        seen.request.finish()
        r = await answer
        self.assertEqual((r.code, r.raw, r.header("Content-Type")), (200, b"a line\n", "text/plain"))
        return seen.uri

    @run
    async def test_each_log_option_reaches_the_kubelet_by_its_name(self):
        # url.Values.Encode: sorted by key, ':' escaped; booleans only when true
        self.assertEqual(await self.log_with_query(
            "container=c&follow=true&previous=1&timestamps=TRUE&tailLines=10&limitBytes=100"
            "&sinceTime=2024-03-01T10:20:30.5%2B02:00"),
            b"/containerLogs/default/p/c?follow=true&limitBytes=100&previous=true&sinceTime=2024-03-01T08%3A20%3A30Z"
            b"&tailLines=10&timestamps=true")
        self.assertEqual(await self.log_with_query("sinceSeconds=30&follow=false&previous=0&timestamps=False"),
                         b"/containerLogs/default/p/c?sinceSeconds=30")
        self.assertEqual(await self.log_with_query("sinceTime=2024-03-01T08:20:30Z&tailLines=0"),
                         b"/containerLogs/default/p/c?sinceTime=2024-03-01T08%3A20%3A30Z&tailLines=0")
        self.assertEqual(await self.log_with_query(""), b"/containerLogs/default/p/c")

    async def refused(self, code: int, body: bytes, content_type: bytes = b"text/plain; charset=utf-8") -> Any:
        self.kubelet.refusal = (code, content_type, body)
        return await self.client.get(NS + "/pods/p/log?follow=true")

    @run
    async def test_a_kubelets_refusal_is_upstreams_status(self):
        r = await self.refused(404, b"container c is not running")
        self.assertEqual((r.code, r.raw), (404, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                                b'"message":"the server could not find the requested resource ( pods/log'
                                                b' p)","reason":"NotFound","details":{"name":"p","kind":"pods/log"},'
                                                b'"code":404}\n'))
        r = await self.refused(400, b'previous terminated container "c" in pod "p" not found')
        self.assertEqual((r.code, r.raw), (400, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                                b'"message":"previous terminated container \\"c\\" in pod \\"p\\" not '
                                                b'found","reason":"BadRequest","code":400}\n'))
        r = await self.refused(500, b"failed to get container status")
        self.assertEqual((r.code, r.raw), (500, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                                b'"message":"Internal error occurred: failed to get container status",'
                                                b'"reason":"InternalError","details":{"causes":[{"message":"failed to '
                                                b'get container status"}]},"code":500}\n'))
        # the kubelet's authorizer refusing the API server's identity keeps the kubelet's words
        r = await self.refused(403, b"Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, "
                                    b"subresource=proxy)")
        self.assertEqual((r.code, r.body["reason"], r.body["message"], r.body["details"]),
                         (403, "Forbidden", "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, "
                                            "subresource=proxy) ( pods/log p)", {"name": "p", "kind": "pods/log"}))
        r = await self.refused(503, b"kubelet is shutting down")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                         (503, "ServiceUnavailable", "the server is currently unable to handle the request ( pods/log p)"))
        r = await self.refused(502, b"bad gateway")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                         (502, "InternalError", 'an error on the server ("bad gateway") has prevented the request from '
                                                'succeeding ( pods/log p)'))
        r = await self.refused(401, b"Unauthorized")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                         (401, "Unauthorized", "the server has asked for the client to provide credentials "
                                               "( pods/log p)"))
        self.assertEqual(len(self.kubelet.seen), 7)  # each was the kubelet's answer

    @run
    async def test_a_followed_log_reaches_the_client_as_the_kubelet_writes_it(self):
        arrival = self.kubelet.next_request()
        response = await treq.get(self.server.url + NS + "/pods/p/log?follow=true", persistent=False)
        self.assertEqual((response.code, response.headers.getRawHeaders("content-type")), (200, ["text/plain"]))
        seen = await arrival
        chunks: list[bytes] = []
        first: defer.Deferred[None] = defer.Deferred()

        def received(data: bytes) -> None:
            chunks.append(data)
            if not first.called:
                first.callback(None)
        body_done = treq.collect(response, received)
        seen.request.write(b"2024-03-01T08:20:30Z starting\n")
        await first  # before the kubelet has finished
        self.assertEqual(b"".join(chunks), b"2024-03-01T08:20:30Z starting\n")
        self.assertFalse(body_done.called)
        seen.request.write(b"2024-03-01T08:20:31Z ready\n")
        seen.request.finish()  # the container ended
        await body_done
        self.assertEqual(b"".join(chunks), b"2024-03-01T08:20:30Z starting\n2024-03-01T08:20:31Z ready\n")
        self.assertFalse(await seen.cut)

    @run
    async def test_a_client_that_leaves_closes_the_kubelets_connection(self):
        arrival = self.kubelet.next_request()
        reader = Reader()
        port = int(self.server.url.rsplit(":", 1)[1])
        await protocol.ClientCreator(reactor, lambda: reader).connectTCP("127.0.0.1", port)
        reader.transport.write(b"GET " + NS.encode() + b"/pods/p/log?follow=true HTTP/1.1\r\nHost: kapiserver\r\n\r\n")
        seen = await arrival
        seen.request.write(b"first line\n")
        received = await reader.wait_for(b"first line\n")
        self.assertTrue(received.startswith(b"HTTP/1.1 200 OK\r\n"))
        reader.transport.abortConnection()
        self.assertTrue(await seen.cut)  # the kubelet's request ended with its connection, not an answer

    @run
    async def test_the_kubelet_not_listening_is_upstreams_500(self):
        await self.kubelet.stop()  # the node's kubelet port now refuses connections
        r = await self.client.get(NS + "/pods/p/log")
        port = self.kubelet.port_number
        self.assertEqual((r.code, r.body.get("reason")), (500, None))
        self.assertEqual(r.body["message"], f'Get "https://127.0.0.1:{port}/containerLogs/default/p/c": '
                                            f'dial tcp 127.0.0.1:{port}: connect: connection refused')
        self.assertEqual(json.loads(r.raw)["kind"], "Status")

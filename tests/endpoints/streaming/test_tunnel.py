"""The port-forward WebSocket tunnel end to end in memory: a client speaking SPDY inside binary
WebSocket messages, a kubelet taking plain SPDY bytes."""
from __future__ import annotations

import json

from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.trial import unittest

from kapiserver.endpoints.streaming.tunnel import serve_tunnel
from kapiserver.machinery.httpstream import websocket as ws
from tests.endpoints.streaming.fakes import FakeClient, FakeDialer

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
REQUEST = [(b"Host", b"apiserver"), (b"Connection", b"Upgrade"), (b"Upgrade", b"websocket"),
           (b"Sec-WebSocket-Key", KEY), (b"Sec-WebSocket-Version", b"13"),
           (b"Sec-WebSocket-Protocol", b"SPDY/3.1+portforward.k8s.io"),
           (b"X-Stream-Protocol-Version", b"portforward.k8s.io"), (b"User-Agent", b"kubectl/v1.32.0")]
PATH = b"/portForward/default/pod"
UPGRADED = [(b"Connection", b"Upgrade"), (b"Upgrade", b"SPDY/3.1"),
            (b"X-Stream-Protocol-Version", b"portforward.k8s.io")]
DATE = b"Thu, 01 Jan 1970 00:00:00 GMT"


class TunnelTests(unittest.TestCase):

    def setUp(self):
        self.clock = Clock()
        self.client = FakeClient(self.clock)
        self.dialer = FakeDialer(self.clock)
        self.results: list[int] = []

    def serve(self, request: list[tuple[bytes, bytes]] = REQUEST) -> None:
        kubelet_headers = [(name, value) for name, value in request if name != b"Host"]
        done = serve_tunnel(self.client, request, self.dialer, PATH, kubelet_headers,
                            response_headers=[(b"Audit-Id", b"42")], clock=self.clock)
        done.addCallback(self.results.append)

    def settle(self) -> None:
        for _ in range(5):
            self.clock.advance(0)

    def test_no_tunnelling_protocol_is_a_400(self):
        self.serve([(name, b"v4.channel.k8s.io" if name == b"Sec-WebSocket-Protocol" else value)
                    for name, value in REQUEST])
        self.assertEqual(self.client.transport.value(),
                         b"HTTP/1.1 400 Bad Request\r\nAudit-Id: 42\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         b"X-Content-Type-Options: nosniff\r\nConnection: close\r\nDate: " + DATE + b"\r\n"
                         b"Content-Length: 56\r\n\r\nunable to upgrade: no tunneling spdy protocols provided\n")
        self.settle()
        self.assertEqual(self.dialer.calls, [])
        self.assertEqual(self.results, [400])

    def test_a_bad_websocket_handshake_is_refused_before_any_dialling(self):
        self.serve([(name, b"12" if name == b"Sec-WebSocket-Version" else value) for name, value in REQUEST])
        answer = self.client.transport.value()
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\nAudit-Id: 42\r\n"), answer)
        self.assertIn(b"\r\nSec-Websocket-Version: 13\r\n", answer)
        self.assertTrue(answer.endswith(b"\r\n\r\nBad Request\n"))
        self.assertEqual(self.dialer.calls, [])

    def test_a_tunnel_relays_spdy_bytes_in_binary_messages(self):
        self.serve()
        [call] = self.dialer.calls
        # the request made a SPDY upgrade: no WebSocket headers, the protocols without their prefix
        self.assertEqual(call.path, PATH)
        names = [name.lower() for name, _ in call.headers]
        for gone in (b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-protocol"):
            self.assertNotIn(gone, names)
        self.assertEqual(call.header_values(b"Upgrade"), [b"SPDY/3.1"])
        self.assertEqual(call.header_values(b"Connection"), [b"Upgrade"])
        self.assertEqual(call.header_values(b"X-Stream-Protocol-Version"), [b"portforward.k8s.io"])
        self.assertEqual(call.header_values(b"User-Agent"), [b"kubectl/v1.32.0"])
        self.assertEqual(call.method, b"POST")  # upstream's createSPDYRequest
        self.assertEqual(self.client.transport.value(), b"")  # nothing before the kubelet has answered

        kubelet = call.upgrade(UPGRADED, after_head=b"spdy-from-kubelet")
        self.assertEqual(self.client.head(),
                         b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                         b"Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n")
        # what the kubelet sent with its 101 follows the client's 101, as a binary message
        self.assertEqual(self.client.frames(), [(ws.Opcode.BINARY, b"spdy-from-kubelet")])
        # a client message's payload reaches the kubelet as it arrives, fragments too
        self.client.send(ws.encode_client_frame(ws.Opcode.BINARY, b"syn-", fin=False))
        self.assertEqual(kubelet.value(), b"syn-")
        self.client.send(ws.encode_client_frame(ws.Opcode.PING, b"hb"))
        self.client.send(ws.encode_client_frame(ws.Opcode.CONTINUATION, b"stream"))
        self.assertEqual(kubelet.value(), b"syn-stream")
        self.assertEqual(self.client.frames(), [ws.Pong(b"hb")])
        # the client closes: its code is echoed, the kubelet connection closes
        self.client.send(ws.encode_close(1000, "done", mask=b"abcd"))
        self.assertEqual(self.client.frames(), [ws.Close(1000, "")])
        self.assertTrue(kubelet.disconnecting)
        self.settle()
        self.assertEqual(self.results, [101])

    def test_the_kubelets_error_answer_is_relayed(self):
        self.serve()
        body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden","code":403}'
        self.dialer.calls[0].answer(403, b"Forbidden", [(b"Content-Type", b"application/json"),
                                                        (b"Transfer-Encoding", b"chunked")], body)
        self.assertEqual(self.client.transport.value(),
                         b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % len(body) +
                         b"Connection: close\r\n\r\n" + body)
        self.settle()
        self.assertEqual(self.results, [403])

    def test_a_redirect_or_an_unreachable_kubelet_is_a_500_status(self):
        self.serve()
        self.dialer.calls[0].answer(302, b"Found", [(b"Location", b"/elsewhere")], b"")
        head, body = self.client.transport.value().split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 500 Internal Server Error\r\n"))
        self.assertIn(b"\r\nContent-Type: application/json\r\n", head)
        self.assertIn(b"\r\nAudit-Id: 42\r\n", head)
        self.assertEqual(json.loads(body), {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                            "message": "invalid upgrade response: status code 302", "code": 500})

        self.client = FakeClient(self.clock)
        self.serve()
        self.dialer.calls[1].fail(ConnectionRefusedError("10.0.0.1:10250"))
        body = json.loads(self.client.transport.value().split(b"\r\n\r\n", 1)[1])
        self.assertEqual(body["code"], 500)
        self.assertIn("10.0.0.1:10250", body["message"])

    def test_a_101_without_the_spdy_headers_is_a_500(self):
        self.serve()
        kubelet = self.dialer.calls[0].upgrade([(b"Connection", b"Upgrade"), (b"Upgrade", b"websocket")])
        answer = self.client.transport.value()
        self.assertTrue(answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n"))
        self.assertTrue(answer.endswith(b"\r\n\r\nunable to upgrade: missing upgrade headers in response\n"))
        self.assertTrue(kubelet.disconnecting)

    def test_a_websocket_protocol_error_fails_the_connection_after_what_came_before(self):
        self.serve()
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        self.client.send(ws.encode_client_frame(ws.Opcode.BINARY, b"frame") + ws.encode_frame(ws.Opcode.BINARY, b"x"))
        self.assertEqual(kubelet.value(), b"frame")
        self.assertEqual(self.client.frames(), [ws.Close(1002, "an unmasked client frame")])
        self.assertTrue(kubelet.disconnecting)

    def test_a_text_message_ends_the_tunnel(self):
        self.serve()
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        self.client.send_message(b"hello", ws.Opcode.TEXT)
        self.assertEqual(self.client.frames(), [ws.Close(1000, "")])
        self.assertEqual(kubelet.value(), b"")
        self.assertTrue(kubelet.disconnecting)

    def test_the_kubelet_closing_closes_the_websocket(self):
        self.serve()
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        kubelet.protocol.dataReceived(b"last words")
        kubelet.end()
        self.assertEqual(self.client.frames(), [(ws.Opcode.BINARY, b"last words"), ws.Close(1000, "")])
        self.assertTrue(self.client.transport.disconnecting)
        self.settle()
        self.assertEqual(self.results, [101])

    def test_backpressure_both_ways(self):
        self.serve()
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        self.client.transport.producer.pauseProducing()
        self.assertEqual(kubelet.producerState, "paused")
        self.client.transport.producer.resumeProducing()
        self.assertEqual(kubelet.producerState, "producing")
        kubelet.producer.pauseProducing()
        self.assertEqual(self.client.transport.producerState, "paused")

    def test_a_client_sending_megabytes_before_its_upgrade_is_aborted(self):
        self.serve()
        self.client.send(b"x" * ((1 << 20) + 1))  # nothing may come before the 101; a little is held
        self.assertTrue(self.client.transport.aborted)
        self.client.send(b"more")  # and nothing after the abort is read
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        self.assertEqual(kubelet.value(), b"")

    def test_the_client_leaving_while_the_kubelet_is_dialled(self):
        self.serve()
        self.client.transport.end()
        kubelet = self.dialer.calls[0].upgrade(UPGRADED)
        self.assertTrue(kubelet.disconnecting)
        self.settle()
        self.assertEqual(self.results, [101])

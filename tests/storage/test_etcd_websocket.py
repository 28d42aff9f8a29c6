"""The WebSocket a watch runs on, against an in-memory transport: the upgrade, frames both ways.

The real gateway is exercised by every etcd watch test; these cover what it
does rarely or never on loopback (a frame split across reads, a fragmented
message, a ping, a close, a refused upgrade).
"""
from __future__ import annotations

import os

import orjson
from twisted.internet.testing import StringTransport
from twisted.trial import unittest

from kapiserver.storage.etcd.websocket import WebSocketStream, accept_key, frame, mask
from kapiserver.storage.interface import StorageError


def server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(opcode, unmasked payload) of each client frame in ``data``; asserts each is masked."""
    out = []
    while data:
        opcode, length, at = data[0] & 0x0F, data[1] & 0x7F, 2
        assert data[1] & 0x80, "a client frame must be masked"
        if length == 126:
            length, at = int.from_bytes(data[2:4], "big"), 4
        elif length == 127:
            length, at = int.from_bytes(data[2:10], "big"), 10
        key = data[at:at + 4]
        out.append((opcode, mask(data[at + 4:at + 4 + length], key)))
        data = data[at + 4 + length:]
    return out


class WebSocketStreamTests(unittest.TestCase):

    def connect(self) -> tuple[WebSocketStream, StringTransport, list[dict]]:
        messages: list[dict] = []
        stream = WebSocketStream(b"127.0.0.1:2379", "/v3/watch", messages.append)
        transport = StringTransport()
        stream.makeConnection(transport)
        return stream, transport, messages

    def upgrade(self, stream: WebSocketStream, transport: StringTransport) -> None:
        request = transport.value().decode()
        key = [line.split(": ", 1)[1] for line in request.split("\r\n") if line.startswith("Sec-WebSocket-Key")][0]
        transport.clear()
        stream.dataReceived(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            b"Sec-WebSocket-Accept: " + accept_key(key.encode()) + b"\r\n\r\n")

    def test_the_upgrade_request_and_its_acceptance(self):
        stream, transport, _ = self.connect()
        request = transport.value()
        self.assertTrue(request.startswith(b"GET /v3/watch HTTP/1.1\r\nHost: 127.0.0.1:2379\r\n"))
        self.assertIn(b"\r\nUpgrade: websocket\r\n", request)
        self.assertIn(b"\r\nSec-WebSocket-Version: 13\r\n", request)
        self.assertFalse(stream.opened.called)
        self.upgrade(stream, transport)
        self.assertTrue(stream.opened.called)
        # RFC 6455's own example of the accept value
        self.assertEqual(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_a_refused_upgrade_fails_opened_with_what_etcd_answered(self):
        stream, transport, _ = self.connect()
        stream.dataReceived(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
        failure = self.failureResultOf(stream.opened, StorageError)
        self.assertIn("404 Not Found", str(failure.value))
        self.assertIn("not found", str(failure.value))
        self.assertTrue(transport.disconnecting)

    def test_a_wrong_accept_key_is_refused(self):
        stream, transport, _ = self.connect()
        stream.dataReceived(b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: bogus\r\n\r\n")
        self.failureResultOf(stream.opened, StorageError)

    def test_messages_of_every_length_encoding_byte_by_byte(self):
        stream, transport, messages = self.connect()
        self.upgrade(stream, transport)
        documents = [{"result": {"n": 1}}, {"result": {"v": "x" * 300}}, {"result": {"v": "y" * 70000}}]
        wire = b"".join(frame(0x1, orjson.dumps(d)) for d in documents)
        for i in range(len(wire)):
            stream.dataReceived(wire[i:i + 1])
        self.assertEqual(messages, documents)

    def test_whole_frames_then_part_of_one_in_a_read_each_delivered_once_in_order(self):
        stream, transport, messages = self.connect()
        self.upgrade(stream, transport)
        documents = [{"result": {"n": n, "v": "x" * (n * 60)}} for n in range(6)]  # short and 16-bit lengths
        wire = b"".join(frame(0x1, orjson.dumps(d)) for d in documents)
        cut = len(frame(0x1, orjson.dumps(documents[0]))) + len(frame(0x1, orjson.dumps(documents[1]))) + 3
        stream.dataReceived(wire[:cut])  # two whole frames and three bytes of the third
        self.assertEqual(messages, documents[:2])
        stream.dataReceived(wire[cut:] + frame(0x9, b"hi"))  # the rest, then a ping
        self.assertEqual(messages, documents)
        self.assertEqual(server_frames(transport.value()), [(0xA, b"hi")])

    def test_frames_in_the_same_read_as_the_upgrade_are_delivered(self):
        stream, transport, messages = self.connect()
        request = transport.value().decode()
        key = [line.split(": ", 1)[1] for line in request.split("\r\n") if line.startswith("Sec-WebSocket-Key")][0]
        stream.dataReceived(b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: " +
                            accept_key(key.encode()) + b"\r\n\r\n" + frame(0x1, b'{"result":{}}'))
        self.assertEqual(messages, [{"result": {}}])

    def test_a_fragmented_message_is_reassembled(self):
        stream, transport, messages = self.connect()
        self.upgrade(stream, transport)
        body = orjson.dumps({"result": {"events": ["a" * 10, "b" * 10]}})
        first = bytes((0x01, len(body[:7]))) + body[:7]  # text, not final
        middle = bytes((0x00, len(body[7:20]))) + body[7:20]  # continuation, not final
        ping = frame(0x9, b"hi")  # a control frame may come between fragments
        last = bytes((0x80, len(body[20:]))) + body[20:]  # continuation, final
        stream.dataReceived(first + middle + ping + last)
        self.assertEqual(messages, [orjson.loads(body)])
        self.assertEqual(server_frames(transport.value()), [(0xA, b"hi")])

    def test_send_writes_one_masked_text_frame(self):
        stream, transport, _ = self.connect()
        stream.send({"ignored": "before the upgrade"})
        self.upgrade(stream, transport)
        stream.send({"progress_request": {}})
        stream.send({"create_request": {"key": "x" * 200}})
        self.assertEqual(server_frames(transport.value()),
                         [(0x1, b'{"progress_request":{}}'),
                          (0x1, orjson.dumps({"create_request": {"key": "x" * 200}}))])

    def test_a_close_is_answered_and_ends_the_connection(self):
        stream, transport, _ = self.connect()
        self.upgrade(stream, transport)
        stream.dataReceived(frame(0x8, (1000).to_bytes(2, "big") + b"bye"))
        self.assertEqual(server_frames(transport.value()), [(0x8, (1000).to_bytes(2, "big"))])
        self.assertTrue(transport.disconnecting)

    def test_a_lost_connection_before_the_upgrade_fails_opened_and_ends(self):
        stream, transport, _ = self.connect()
        stream.connectionLost(None)
        self.failureResultOf(stream.opened)
        self.assertTrue(stream.ended.called)

    def test_mask_is_its_own_inverse(self):
        key = os.urandom(4)
        for payload in (b"", b"a", b"abcd", b"abcde" * 99):
            self.assertEqual(mask(mask(payload, key), key), payload)
        self.assertEqual(mask(b"\x00\x00\x00\x00\x00", b"\x01\x02\x03\x04"), b"\x01\x02\x03\x04\x01")

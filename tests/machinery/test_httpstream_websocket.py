"""WebSocket handshakes (as wsstream's x/net server and gorilla's Upgrader answer them) and
the incremental frame parser and encoders (RFC 6455)."""
from __future__ import annotations

import struct

from twisted.trial import unittest

from kapiserver.machinery.httpstream import websocket as ws
from kapiserver.machinery.httpstream.websocket import Opcode

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 1.3's example
MASK = b"\x37\xfa\x21\x3d"


def request(**overrides: bytes) -> list[tuple[bytes, bytes]]:
    headers = {b"Connection": b"Upgrade", b"Upgrade": b"websocket", b"Sec-WebSocket-Key": KEY,
               b"Sec-WebSocket-Version": b"13", b"Sec-WebSocket-Protocol": b"v5.channel.k8s.io"}
    for name, value in overrides.items():
        key = name.replace("_", "-").encode()
        headers = {k: v for k, v in headers.items() if k.lower() != key.lower()}
        if value:
            headers[key] = value
    return list(headers.items())


class HandshakeTests(unittest.TestCase):

    def test_accept_key_is_rfc_6455s_example(self):
        self.assertEqual(ws.accept_key(KEY), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_wsstream_accepts_v5_with_the_protocol_and_accept_headers(self):
        result = ws.handshake_as_wsstream(b"GET", request(), ["v5.channel.k8s.io"])
        self.assertIsInstance(result, ws.HandshakeAccepted)
        self.assertEqual(result.protocol, "v5.channel.k8s.io")
        self.assertEqual(result.response,
                         b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                         b"Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n")

    def test_wsstream_chooses_in_the_clients_order_and_gorilla_in_the_servers(self):
        headers = request(Sec_WebSocket_Protocol=b"v4.channel.k8s.io, v5.channel.k8s.io")
        supported = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
        self.assertEqual(ws.handshake_as_wsstream(b"GET", headers, supported).protocol, "v4.channel.k8s.io")
        self.assertEqual(ws.handshake_as_gorilla(b"GET", headers, supported).protocol, "v5.channel.k8s.io")

    def test_wsstream_refusals_are_raw_answers_with_x_net_texts(self):
        cases = [
            (b"POST", request(), 405, b"HTTP/1.1 405 Method Not Allowed\r\n\r\nbad method"),
            (b"GET", request(Upgrade=b"h2c"), 400, b"HTTP/1.1 400 Bad Request\r\n\r\nnot websocket protocol"),
            (b"GET", request(Connection=b"keep-alive"), 400, b"HTTP/1.1 400 Bad Request\r\n\r\nnot websocket protocol"),
            (b"GET", request(Sec_WebSocket_Key=b""), 400, b"HTTP/1.1 400 Bad Request\r\n\r\nmismatch challenge/response"),
            (b"GET", request(Sec_WebSocket_Version=b"8"), 400,
             b"HTTP/1.1 400 Bad Request\r\nSec-WebSocket-Version: 13\r\n\r\nmissing or bad WebSocket Version"),
            # a protocol the server does not serve, or none at all when "" is not served: a bare 403
            (b"GET", request(Sec_WebSocket_Protocol=b"channel.k8s.io"), 403, b"HTTP/1.1 403 Forbidden\r\n\r\n"),
            (b"GET", request(Sec_WebSocket_Protocol=b""), 403, b"HTTP/1.1 403 Forbidden\r\n\r\n"),
        ]
        for method, headers, code, answer in cases:
            result = ws.handshake_as_wsstream(method, headers, ["v5.channel.k8s.io"])
            self.assertIsInstance(result, ws.HandshakeRejected, (method, headers))
            self.assertEqual((result.code, result.response), (code, answer))

    def test_wsstream_serves_no_protocol_when_the_empty_one_is_allowed(self):
        result = ws.handshake_as_wsstream(b"GET", request(Sec_WebSocket_Protocol=b""), ["", "channel.k8s.io"])
        self.assertEqual(result.protocol, "")
        self.assertNotIn(b"Sec-WebSocket-Protocol", result.response)

    def test_gorilla_refusals_are_http_errors_with_the_version_header(self):
        result = ws.handshake_as_gorilla(b"POST", request(), [], date=b"Thu, 01 Jan 1970 00:00:00 GMT")
        self.assertEqual(result.code, 405)
        self.assertEqual(result.response,
                         b"HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         b"Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n"
                         b"Date: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Length: 19\r\n\r\nMethod Not Allowed\n")
        self.assertIn("request method is not GET", result.reason)
        # token lists: "keep-alive, Upgrade" holds the upgrade token, "upgraded" does not
        accepted = ws.handshake_as_gorilla(b"GET", request(Connection=b"keep-alive, Upgrade"), [])
        self.assertIsInstance(accepted, ws.HandshakeAccepted)
        refused = ws.handshake_as_gorilla(b"GET", request(Connection=b"upgraded"), [])
        self.assertEqual(refused.code, 400)
        self.assertEqual(ws.handshake_as_gorilla(b"GET", request(Sec_WebSocket_Version=b"8"), []).code, 400)
        self.assertEqual(ws.handshake_as_gorilla(b"GET", request(Sec_WebSocket_Key=b""), []).code, 400)


def client_frame(opcode: Opcode, payload: bytes, fin: bool = True) -> bytes:
    return ws.encode_client_frame(opcode, payload, fin=fin, mask=MASK)


class FrameParserTests(unittest.TestCase):

    def feed_bytewise(self, parser: ws.FrameParser, data: bytes) -> list[ws.Event]:
        events: list[ws.Event] = []
        for index in range(len(data)):
            events.extend(parser.feed(data[index:index + 1]))
        return events

    def payload(self, events: list[ws.Event]) -> bytes:
        return b"".join(event.data for event in events if isinstance(event, ws.MessageData))

    def assertProtocolError(self, data: bytes, code: int, parser: ws.FrameParser | None = None) -> str:
        with self.assertRaises(ws.WebSocketProtocolError) as raised:
            (parser or ws.FrameParser()).feed(data)
        self.assertEqual(raised.exception.close_code, code)
        return raised.exception.message

    def test_a_masked_binary_message_is_unmasked(self):
        events = ws.FrameParser().feed(client_frame(Opcode.BINARY, b"\x00hello"))
        self.assertEqual(events, [ws.MessageStart(Opcode.BINARY), ws.MessageData(b"\x00hello"), ws.MessageEnd()])

    def test_payloads_come_out_as_they_arrive_with_the_mask_kept_in_step(self):
        payload = bytes(range(256)) * 300  # a 64-bit length, fed a byte at a time
        parser = ws.FrameParser()
        events = self.feed_bytewise(parser, client_frame(Opcode.BINARY, payload))
        self.assertEqual(self.payload(events), payload)
        self.assertGreater(len([e for e in events if isinstance(e, ws.MessageData)]), 1000)
        self.assertEqual(events[-1], ws.MessageEnd())

    def test_a_fragmented_message_with_a_ping_between_its_fragments(self):
        data = (client_frame(Opcode.TEXT, "h\u00e9".encode()[:2], fin=False)
                + client_frame(Opcode.PING, b"are you there")
                + client_frame(Opcode.CONTINUATION, "h\u00e9".encode()[2:] + b"llo", fin=False)
                + client_frame(Opcode.CONTINUATION, b"", fin=True))
        events = self.feed_bytewise(ws.FrameParser(), data)
        self.assertEqual(events[0], ws.MessageStart(Opcode.TEXT))
        self.assertIn(ws.Ping(b"are you there"), events)
        self.assertEqual(self.payload(events), "h\u00e9llo".encode())  # the é was split between frames
        self.assertEqual(events[-1], ws.MessageEnd())

    def test_empty_messages_and_16_bit_lengths(self):
        parser = ws.FrameParser()
        self.assertEqual(parser.feed(client_frame(Opcode.BINARY, b"")), [ws.MessageStart(Opcode.BINARY), ws.MessageEnd()])
        events = parser.feed(client_frame(Opcode.BINARY, b"x" * 1000))
        self.assertEqual(self.payload(events), b"x" * 1000)

    def test_close_frames(self):
        self.assertEqual(ws.FrameParser().feed(ws.encode_close(1001, "bye", mask=MASK)), [ws.Close(1001, "bye")])
        self.assertEqual(ws.FrameParser().feed(ws.encode_close(None, mask=MASK)), [ws.Close(None, "")])
        parser = ws.FrameParser()
        # after a close nothing more is read
        self.assertEqual(parser.feed(ws.encode_close(1000, mask=MASK) + client_frame(Opcode.BINARY, b"late")),
                         [ws.Close(1000, "")])
        self.assertTrue(parser.closed)
        self.assertEqual(parser.feed(client_frame(Opcode.BINARY, b"later")), [])

    def test_protocol_errors_carry_their_close_codes(self):
        self.assertIn("unmasked", self.assertProtocolError(ws.encode_frame(Opcode.BINARY, b"x"), 1002))
        self.assertIn("reserved", self.assertProtocolError(b"\xc2\x80" + MASK, 1002))
        self.assertIn("opcode 3", self.assertProtocolError(b"\x83\x80" + MASK, 1002))
        self.assertIn("fragmented control", self.assertProtocolError(client_frame(Opcode.PING, b"", fin=False), 1002))
        self.assertIn("126 bytes", self.assertProtocolError(client_frame(Opcode.PING, b"p" * 126), 1002))
        self.assertIn("outside", self.assertProtocolError(client_frame(Opcode.CONTINUATION, b"x"), 1002))
        inside = client_frame(Opcode.BINARY, b"a", fin=False) + client_frame(Opcode.BINARY, b"b")
        self.assertIn("inside a fragmented", self.assertProtocolError(inside, 1002))
        self.assertIn("64-bit", self.assertProtocolError(b"\x82\xff" + b"\x80" + b"\x00" * 7 + MASK, 1002))
        self.assertIn("1-byte", self.assertProtocolError(client_frame(Opcode.CLOSE, b"\x03"), 1002))
        for code in (999, 1004, 1005, 1006, 1015, 2000, 5000):
            self.assertIn(f"code {code}", self.assertProtocolError(client_frame(Opcode.CLOSE, struct.pack("!H", code)),
                                                                    1002))
        self.assertIn("not UTF-8", self.assertProtocolError(client_frame(Opcode.TEXT, b"\xff"), 1007))
        self.assertIn("close reason", self.assertProtocolError(client_frame(Opcode.CLOSE, b"\x03\xe8\xc3"), 1007))
        # a server reading a server's frames (tests) refuses masked ones
        self.assertIn("masked server", self.assertProtocolError(client_frame(Opcode.BINARY, b""), 1002,
                                                                 ws.FrameParser(masked=False)))

    def test_what_came_before_an_error_is_kept_with_it(self):
        parser = ws.FrameParser()
        with self.assertRaises(ws.WebSocketProtocolError) as raised:
            parser.feed(client_frame(Opcode.BINARY, b"first") + ws.encode_frame(Opcode.BINARY, b"unmasked"))
        self.assertEqual(raised.exception.events,
                         [ws.MessageStart(Opcode.BINARY), ws.MessageData(b"first"), ws.MessageEnd()])
        self.assertTrue(parser.closed)

    def test_a_message_over_the_limit_is_refused_across_its_fragments(self):
        parser = ws.FrameParser(max_message_size=10)
        parser.feed(client_frame(Opcode.BINARY, b"123456", fin=False))
        message = self.assertProtocolError(client_frame(Opcode.CONTINUATION, b"78901"), 1009, parser)
        self.assertIn("over 10 bytes", message)
        # the limit is checked from the frame's head: a huge declared length is refused before its payload
        self.assertProtocolError(b"\x82\xff" + struct.pack("!Q", 1 << 40) + MASK, 1009, ws.FrameParser())

    def test_server_frames_round_trip_through_a_client_side_parser(self):
        parser = ws.FrameParser(masked=False)
        for size in (0, 125, 126, 65535, 65536):
            payload = bytes(size % 251 for _ in range(size))
            events = parser.feed(ws.encode_frame(Opcode.BINARY, payload))
            self.assertEqual(self.payload(events), payload)
        self.assertEqual(ws.encode_frame(Opcode.BINARY, b"ab"), b"\x82\x02ab")
        self.assertEqual(len(ws.encode_frame(Opcode.BINARY, b"x" * 126)), 4 + 126)
        self.assertEqual(len(ws.encode_frame(Opcode.BINARY, b"x" * 65536)), 10 + 65536)

    def test_masking_is_rfc_6455s_example(self):
        # RFC 6455 5.7: a masked "Hello"
        self.assertEqual(ws.encode_client_frame(Opcode.TEXT, b"Hello", mask=b"\x37\xfa\x21\x3d"),
                         b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58")

    def test_the_assembler_gives_whole_messages_within_its_bound(self):
        assembler = ws.MessageAssembler(max_size=8)
        messages = []
        for event in ws.FrameParser().feed(client_frame(Opcode.BINARY, b"abc", fin=False)
                                           + client_frame(Opcode.CONTINUATION, b"def")):
            message = assembler.add(event)
            if message is not None:
                messages.append(message)
        self.assertEqual(messages, [(Opcode.BINARY, b"abcdef")])
        with self.assertRaises(ws.WebSocketProtocolError) as raised:
            for event in ws.FrameParser().feed(client_frame(Opcode.BINARY, b"123456789")):
                assembler.add(event)
        self.assertEqual(raised.exception.close_code, 1009)

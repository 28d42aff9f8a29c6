"""SPDY/3.1 as moby/spdystream speaks it: the header dictionary and compression, frames both
ways, the reader's checks, and the session's stream handling (no flow control)."""
from __future__ import annotations

import struct
import zlib

from twisted.trial import unittest

from kapiserver.machinery.httpstream import spdy


def raw_block(headers: list[tuple[bytes, bytes]]) -> bytes:
    """An uncompressed header block written by hand: count, then length-prefixed names and values."""
    out = struct.pack("!I", len(headers))
    for name, value in headers:
        out += struct.pack("!I", len(name)) + name + struct.pack("!I", len(value)) + value
    return out


def control(frame_type: int, flags: int, payload: bytes) -> bytes:
    return struct.pack("!HHI", 0x8003, frame_type, (flags << 24) | len(payload)) + payload


def go_compressor() -> "zlib._Compress":
    """A compression context as spdystream's framer sets it up (zlib.BestCompression, the dictionary)."""
    return zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, spdy.HEADER_DICTIONARY)


def compressed(context: "zlib._Compress", block: bytes) -> bytes:
    return context.compress(block) + context.flush(zlib.Z_SYNC_FLUSH)


class HeaderCompressionTests(unittest.TestCase):

    def test_the_dictionary_is_spdy3s(self):
        # 1423 bytes; zlib names a preset dictionary by its Adler-32, which the peer checks
        self.assertEqual(len(spdy.HEADER_DICTIONARY), 1423)
        self.assertEqual(zlib.adler32(spdy.HEADER_DICTIONARY), 0xE3C6A7C2)
        self.assertTrue(spdy.HEADER_DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head"))
        self.assertTrue(spdy.HEADER_DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0."))

    def test_replies_compressed_by_hand_in_one_context_parse(self):
        context = go_compressor()
        first = compressed(context, raw_block([(b"x-stream-protocol-version", b"v4.channel.k8s.io")]))
        # the dictionary's id is in the zlib head (FDICT), as Go's zlib.NewWriterLevelDict writes it
        self.assertEqual(first[:2], b"\x78\xf9")
        self.assertEqual(first[2:6], struct.pack("!I", 0xE3C6A7C2))
        second = compressed(context, raw_block([(b"streamtype", b"error"), (b"multi", b"a\x00b")]))
        wire = (control(2, 0, struct.pack("!I", 1) + first)
                + control(2, 1, struct.pack("!I", 3) + second))
        parser = spdy.FrameParser()
        frames = [frame for index in range(len(wire)) for frame in parser.feed(wire[index:index + 1])]
        self.assertEqual(frames, [
            spdy.SynReply(1, {"x-stream-protocol-version": ["v4.channel.k8s.io"]}),
            spdy.SynReply(3, {"streamtype": ["error"], "multi": ["a", "b"]}, fin=True),
        ])
        # the second block alone does not decode: it refers to what the first one said
        with self.assertRaises(spdy.SpdyError):
            spdy.FrameParser().feed(control(2, 0, struct.pack("!I", 3) + second))

    def test_this_sides_blocks_decompress_with_the_dictionary(self):
        encoder = spdy.FrameEncoder()
        wire = encoder.encode(spdy.SynStream(1, {"streamtype": ["stdin"]}))
        (length,) = struct.unpack_from("!I", wire, 4)
        self.assertEqual(len(wire), 8 + length)
        inflate = zlib.decompressobj(15, spdy.HEADER_DICTIONARY)
        self.assertEqual(inflate.decompress(wire[18:]), raw_block([(b"streamtype", b"stdin")]))
        second = encoder.encode(spdy.SynStream(3, {"streamtype": ["stdout"]}))
        self.assertEqual(inflate.decompress(second[18:]), raw_block([(b"streamtype", b"stdout")]))

    def test_header_blocks_are_checked_as_spdystream_checks_them(self):
        def reply(block: bytes) -> bytes:
            return control(2, 0, struct.pack("!I", 1) + compressed(go_compressor(), block))

        cases = {
            "not lowercased": raw_block([(b"Streamtype", b"error")]),
            "multiple headers": raw_block([(b"a", b"1"), (b"a", b"2")]),
            "1001 headers": struct.pack("!I", 1001),
            "payload size": raw_block([(b"a", b"1")]) + b"trailing",
        }
        for message, block in cases.items():
            with self.assertRaises(spdy.SpdyError, msg=message) as raised:
                spdy.FrameParser().feed(reply(block))
            self.assertIn(message, str(raised.exception))
        # a block that inflates past the limit is refused before it is all inflated
        bomb = raw_block([(b"a", b"x" * 5000)])
        with self.assertRaises(spdy.SpdyError) as raised:
            spdy.FrameParser(max_header_block=1000).feed(reply(bomb))
        self.assertIn("over 1000 bytes", str(raised.exception))


class FrameTests(unittest.TestCase):

    def test_every_frame_type_round_trips(self):
        frames: list[spdy.Frame] = [
            spdy.SynStream(1, {"streamtype": ["error"]}, associated_to=0, priority=3, fin=True),
            spdy.SynReply(2, {}, fin=False),
            spdy.RstStream(5, spdy.RstStatus.CANCEL),
            spdy.Settings((spdy.Setting(7, 65536, 1), spdy.Setting(4, 100)), clear=True),
            spdy.Ping(7),
            spdy.GoAway(3, spdy.GoAwayStatus.OK),
            spdy.HeadersFrame(1, {"a": ["b"]}, fin=True),
            spdy.WindowUpdate(1, 4096),
            spdy.DataFrame(1, b"hello", fin=True),
        ]
        encoder = spdy.FrameEncoder()
        wire = b"".join(encoder.encode(frame) for frame in frames)
        parser = spdy.FrameParser()
        parsed = [frame for index in range(len(wire)) for frame in parser.feed(wire[index:index + 1])]
        # DATA comes out a byte at a time; join its pieces
        data = [frame for frame in parsed if isinstance(frame, spdy.DataFrame)]
        self.assertEqual(b"".join(piece.data for piece in data), b"hello")
        self.assertEqual([piece.fin for piece in data], [False] * 4 + [True])
        self.assertEqual([frame for frame in parsed if not isinstance(frame, spdy.DataFrame)], frames[:-1])
        self.assertEqual(encoder.encode(spdy.Ping(7)), b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x07")
        self.assertEqual(encoder.encode(spdy.DataFrame(1, b"", fin=True)), b"\x00\x00\x00\x01\x01\x00\x00\x00")

    def test_data_pieces_come_out_as_they_arrive(self):
        parser = spdy.FrameParser()
        wire = spdy.FrameEncoder.data(3, b"x" * 100, fin=True)
        self.assertEqual(parser.feed(wire[:58]), [spdy.DataFrame(3, b"x" * 50)])
        self.assertEqual(parser.feed(wire[58:]), [spdy.DataFrame(3, b"x" * 50, fin=True)])
        self.assertEqual(parser.feed(b""), [])

    def test_the_readers_checks(self):
        cases = {
            "stream id zero": struct.pack("!II", 0, 1) + b"x",
            "PING id 0": control(6, 0, struct.pack("!I", 0)),
            "PING with flags": control(6, 1, struct.pack("!I", 1)),
            "GOAWAY with flags 0x00, 4 bytes": control(7, 0, struct.pack("!I", 1)),
            "WINDOW_UPDATE with flags 0x01": control(9, 1, struct.pack("!II", 1, 1)),
            "RST_STREAM with status 0": control(3, 0, struct.pack("!II", 1, 0)),
            "SETTINGS with 5 entries": control(4, 0, struct.pack("!I", 5) + b"\x00" * 8),
            "unknown type 10": control(10, 0, b""),
            "SYN_STREAM of 4 bytes": control(1, 0, b"\x00" * 4),
        }
        for message, wire in cases.items():
            with self.assertRaises(spdy.SpdyError, msg=message) as raised:
                spdy.FrameParser().feed(wire)
            self.assertIn(message, str(raised.exception))
        with self.assertRaises(spdy.SpdyError) as raised:
            spdy.FrameParser(max_control_payload=100).feed(struct.pack("!HHI", 0x8003, 4, 101))
        self.assertIn("101 bytes", str(raised.exception))


def pipe(sender: spdy.SpdySession, receiver: spdy.SpdySession) -> list[spdy.SessionEvent]:
    return receiver.receive(sender.data_to_send())


class SessionTests(unittest.TestCase):

    def setUp(self):
        self.client = spdy.SpdySession(client=True)
        self.server = spdy.SpdySession(client=False)

    def open(self, kind: str) -> int:
        stream_id = self.client.open_stream({"streamtype": [kind]})
        events = pipe(self.client, self.server)
        self.assertEqual(events, [spdy.StreamOpened(stream_id, {"streamtype": [kind]}, False)])
        self.server.reply(stream_id)
        self.assertEqual(pipe(self.server, self.client), [spdy.StreamReplied(stream_id, {})])
        return stream_id

    def test_client_streams_have_odd_ids_and_carry_data_once_replied(self):
        error, stdin = self.open("error"), self.open("stdin")
        self.assertEqual((error, stdin), (1, 3))
        self.client.send_data(stdin, b"ls\n")
        self.client.close_stream(stdin)
        self.assertEqual(pipe(self.client, self.server), [spdy.StreamData(3, b"ls\n"), spdy.StreamEnded(3)])
        self.server.send_data(error, b"{}", fin=True)
        self.assertEqual(pipe(self.server, self.client), [spdy.StreamData(1, b"{}"), spdy.StreamEnded(1)])
        # a stream is gone once both sides have ended it
        self.assertIn(stdin, self.server.streams)
        self.server.close_stream(stdin)
        self.assertEqual(pipe(self.server, self.client), [spdy.StreamEnded(stdin)])
        self.assertNotIn(stdin, self.server.streams)
        self.assertNotIn(stdin, self.client.streams)
        self.assertIn(error, self.client.streams)
        with self.assertRaises(spdy.SpdyStateError):
            self.client.send_data(stdin, b"late")

    def test_a_stream_without_a_reply_takes_no_data_either_way(self):
        stream_id = self.client.open_stream({"streamtype": ["stdout"]})
        pipe(self.client, self.server)
        with self.assertRaises(spdy.SpdyStateError):
            self.client.send_data(stream_id, b"early")
        # data the server sends before its reply is dropped, as spdystream drops it
        self.client.receive(spdy.FrameEncoder.data(stream_id, b"early"))
        self.server.reply(stream_id)
        events = pipe(self.server, self.client)
        self.assertEqual(events, [spdy.StreamReplied(stream_id, {})])

    def test_a_refused_stream_is_reset_before_its_reply(self):
        stream_id = self.client.open_stream({"streamtype": ["resize"]})
        pipe(self.client, self.server)
        self.server.reset_stream(stream_id, spdy.RstStatus.REFUSED_STREAM)
        self.assertEqual(pipe(self.server, self.client), [spdy.StreamReset(stream_id, 3, False)])
        self.assertNotIn(stream_id, self.client.streams)

    def test_pings_are_answered_and_this_sides_are_reported(self):
        self.server.ping()
        pipe(self.server, self.client)
        self.assertEqual(self.client.data_to_send(), spdy.FrameEncoder().encode(spdy.Ping(2)))
        ping_id = self.client.ping()
        self.assertEqual(ping_id, 1)
        pipe(self.client, self.server)  # the server echoes it
        self.assertEqual(pipe(self.server, self.client), [spdy.PingAnswered(1)])
        self.assertEqual(self.client.ping(), 3)

    def test_goaway_ends_every_stream_and_the_reading(self):
        first, second = self.open("error"), self.open("stdout")
        self.server.go_away()
        self.server.send_data(first, b"after goaway")
        events = pipe(self.server, self.client)
        # the server names the last stream it took: 3
        self.assertEqual(events, [spdy.GoAwayReceived(3, 0), spdy.StreamEnded(first), spdy.StreamEnded(second)])
        self.assertEqual(self.client.receive(spdy.FrameEncoder().encode(spdy.Ping(2))), [])
        with self.assertRaises(spdy.SpdyStateError):
            self.client.open_stream({})

    def test_close_resets_open_streams_then_says_goaway(self):
        error, stdin = self.open("error"), self.open("stdin")
        self.client.close_stream(stdin)
        self.client.close()
        parser = spdy.FrameParser()
        frames = parser.feed(self.client.data_to_send())
        # stdin was finished (FIN sent): no RST for it, as spdystream's resetStream
        self.assertEqual(frames, [spdy.DataFrame(stdin, b"", fin=True), spdy.RstStream(error, spdy.RstStatus.CANCEL),
                                  spdy.GoAway(0, spdy.GoAwayStatus.OK)])
        # a server names the last stream its client opened
        self.server.close()
        frames = spdy.FrameParser().feed(self.server.data_to_send())
        self.assertEqual(frames[-1], spdy.GoAway(3, spdy.GoAwayStatus.OK))

    def test_a_stream_id_going_backwards_is_reset_with_a_protocol_error(self):
        encoder = spdy.FrameEncoder()  # a client's side, by hand
        self.assertEqual(self.server.receive(encoder.encode(spdy.SynStream(3, {}))), [spdy.StreamOpened(3, {}, False)])
        events = self.server.receive(encoder.encode(spdy.SynStream(1, {})))
        self.assertEqual(events, [])
        self.assertEqual(spdy.FrameParser().feed(self.server.data_to_send()),
                         [spdy.RstStream(1, spdy.RstStatus.PROTOCOL_ERROR)])

    def test_frames_before_a_protocol_error_are_handled(self):
        stream_id = self.open("stdout")
        self.server.send_data(stream_id, b"last words")
        bad_ping = struct.pack("!HHII", 0x8003, 6, 4, 0)
        with self.assertRaises(spdy.SpdyError) as raised:
            self.client.receive(self.server.data_to_send() + bad_ping)
        self.assertEqual(raised.exception.events, [spdy.StreamData(stream_id, b"last words")])
        self.assertEqual(self.client.receive(b"anything"), [])  # the connection is done

    def test_no_flow_control_either_way(self):
        stream_id = self.open("stdout")
        # far past SPDY/3.1's 64 KiB initial window, with no WINDOW_UPDATE from the peer: sent at once
        self.server.send_data(stream_id, b"x" * (1 << 20))
        received = pipe(self.server, self.client)
        self.assertEqual(sum(len(event.data) for event in received if isinstance(event, spdy.StreamData)), 1 << 20)
        # and nothing is sent back for it (spdystream never sends WINDOW_UPDATE), nor for SETTINGS
        self.assertEqual(self.client.receive(spdy.FrameEncoder().encode(
            spdy.Settings((spdy.Setting(7, 1024),)))), [])
        self.assertEqual(self.client.receive(spdy.FrameEncoder().encode(spdy.WindowUpdate(stream_id, 10))), [])
        self.assertEqual(self.client.data_to_send(), b"")

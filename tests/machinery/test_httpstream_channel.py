"""The channel.k8s.io framing, the error channel's Status (client-go's decoders, the stream
translator's Status bytes) and the resize channel's JSON."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery.httpstream import channel
from kapiserver.machinery.httpstream.websocket import Opcode


class FramingTests(unittest.TestCase):

    def test_binary_messages_carry_a_channel_byte(self):
        self.assertEqual(channel.encode_message(channel.STDOUT, b"foo\n"), (Opcode.BINARY, b"\x01foo\n"))
        self.assertEqual(channel.decode_message(b"\x00foo\n"), (channel.STDIN, b"foo\n"))

    def test_base64_messages_carry_a_digit_and_base64_text(self):
        # wsstream's example: "foo\n" on stdin is "0Zm9vCg=="
        self.assertEqual(channel.encode_message(channel.STDIN, b"foo\n", base64_text=True), (Opcode.TEXT, b"0Zm9vCg=="))
        self.assertEqual(channel.decode_message(b"1Cg==", base64_text=True), (channel.STDOUT, b"\n"))
        with self.assertRaises(channel.ChannelProtocolError):
            channel.decode_message(b"0!!!", base64_text=True)
        with self.assertRaises(channel.ChannelProtocolError):
            channel.decode_message(b"")

    def test_v5_close_message(self):
        self.assertEqual(channel.close_message(channel.STDIN), b"\xff\x00")
        self.assertEqual(channel.parse_close_message(b"\xff\x04"), channel.RESIZE)
        with self.assertRaises(channel.ChannelProtocolError) as raised:
            channel.parse_close_message(b"\xff\x00\x00")
        self.assertEqual(str(raised.exception), "Single channel byte should follow stream close signal. Got 2 bytes")
        self.assertTrue(channel.protocol_supports_close("v5.channel.k8s.io"))
        self.assertFalse(channel.protocol_supports_close("v4.channel.k8s.io"))

    def test_protocol_names(self):
        self.assertEqual(channel.SPDY_EXECUTOR_PROTOCOLS, ("v5.channel.k8s.io", "v4.channel.k8s.io",
                                                           "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"))
        self.assertTrue(channel.is_tunneling_protocol("SPDY/3.1+portforward.k8s.io"))
        self.assertFalse(channel.is_tunneling_protocol("portforward.k8s.io"))
        self.assertFalse(channel.is_tunneling_protocol("SPDY/3.1+portforward.example.com"))
        self.assertTrue(channel.protocol_is_base64("v4.base64.channel.k8s.io"))


class ErrorChannelTests(unittest.TestCase):

    def exit_status(self, message: str) -> bytes:
        return (b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: x",'
                b'"reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"%s"}]}}'
                % message.encode())

    def test_v4_statuses_decode_as_client_go_does(self):
        decode = channel.decode_error_stream
        self.assertEqual(decode(4, b""), channel.CommandSucceeded())
        self.assertEqual(decode(4, b'{"metadata":{},"status":"Success"}'), channel.CommandSucceeded())
        self.assertEqual(decode(5, self.exit_status("3")), channel.CommandExited(3))
        self.assertEqual(decode(4, self.exit_status("256")),
                         channel.CommandFailed('error stream protocol error: invalid exit code value "256"'))
        self.assertEqual(decode(4, b'{"status":"Failure","reason":"NonZeroExitCode"}'),
                         channel.CommandFailed("error stream protocol error: details must be set"))
        self.assertEqual(decode(4, b'{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[]}}'),
                         channel.CommandFailed("error stream protocol error: no ExitCode cause given"))
        self.assertEqual(decode(4, b'{"status":"Failure","message":"container not found (\\"c\\")"}'),
                         channel.CommandFailed('container not found ("c")'))
        self.assertEqual(decode(4, b'{"status":"Pending"}'),
                         channel.CommandFailed("error stream protocol error: unknown error"))
        failed = decode(4, b"not json")
        self.assertIsInstance(failed, channel.CommandFailed)
        self.assertTrue(failed.message.startswith("error stream protocol error: "))
        self.assertTrue(failed.message.endswith(' in "not json"'))

    def test_older_versions_decode_text(self):
        self.assertEqual(channel.decode_error_stream(3, b"boom"),
                         channel.CommandFailed("error executing remote command: boom"))
        self.assertEqual(channel.decode_error_stream(1, b"boom"),
                         channel.CommandFailed("Error executing remote command: boom"))

    def test_the_translators_status_bytes(self):
        self.assertEqual(channel.go_json(channel.outcome_status(channel.CommandSucceeded())),
                         b'{"metadata":{},"status":"Success"}')
        self.assertEqual(channel.go_json(channel.outcome_status(channel.CommandExited(3))),
                         b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: '
                         b'command terminated with exit code 3","reason":"NonZeroExitCode",'
                         b'"details":{"causes":[{"reason":"ExitCode","message":"3"}]}}')
        self.assertEqual(channel.go_json(channel.outcome_status(channel.CommandFailed("a <b>"))),
                         b'{"metadata":{},"status":"Failure","message":"Internal error occurred: a \\u003cb\\u003e",'
                         b'"reason":"InternalError","details":{"causes":[{"message":"a \\u003cb\\u003e"}]},"code":500}')

    def test_a_decoded_status_keeps_its_fields_in_gos_order(self):
        status = channel.status_from_object({"code": 403, "reason": "Forbidden", "message": "no", "status": "Failure",
                                             "apiVersion": "v1", "kind": "Status", "metadata": {}})
        self.assertEqual(list(status), ["kind", "apiVersion", "metadata", "status", "message", "reason", "code"])


class TerminalSizeTests(unittest.TestCase):

    def test_sizes_are_a_stream_of_json_values(self):
        decoder = channel.TerminalSizeDecoder()
        self.assertEqual(decoder.feed(b'{"Width":80,'), [])
        self.assertEqual(decoder.feed(b'"Height":24}\n{"width":100,"HEIGHT":40}{"Width"'),
                         [channel.TerminalSize(80, 24), channel.TerminalSize(100, 40)])
        self.assertEqual(decoder.feed(b':1,"Height":2,"other":true}'), [channel.TerminalSize(1, 2)])
        self.assertEqual(channel.TerminalSize(100, 40).encode(), b'{"Width":100,"Height":40}\n')

    def test_bad_sizes_are_refused(self):
        for bad in (b'{"Width":-1}', b'{"Width":65536}', b'{"Width":"80"}', b'[80,24]'):
            with self.assertRaises(channel.ChannelProtocolError, msg=bad):
                channel.TerminalSizeDecoder().feed(bad)
        decoder = channel.TerminalSizeDecoder(max_pending=16)
        with self.assertRaises(channel.ChannelProtocolError):
            decoder.feed(b'{"Width":' + b" " * 20)

"""The stream translator end to end in memory: a v5.channel.k8s.io WebSocket client on one side,
a SPDY kubelet (a server-side session) on the other."""
from __future__ import annotations

import json

from twisted.internet import defer, endpoints, protocol, reactor
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial import unittest

from kapiserver.endpoints.streaming.translator import StreamOptions, serve_translated
from kapiserver.machinery.httpstream import spdy
from kapiserver.machinery.httpstream import websocket as ws
from tests.endpoints.streaming.fakes import FakeClient, FakeDialer, FakeKubelet, HijackedTCP, TCPDialer

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
REQUEST = [(b"Host", b"apiserver"), (b"Connection", b"Upgrade"), (b"Upgrade", b"websocket"),
           (b"Sec-WebSocket-Key", KEY), (b"Sec-WebSocket-Version", b"13"),
           (b"Sec-WebSocket-Protocol", b"v5.channel.k8s.io")]
PATH = b"/exec/default/pod/c?command=sh&input=1&output=1&error=1"
V4 = [(b"Connection", b"Upgrade"), (b"Upgrade", b"SPDY/3.1"), (b"X-Stream-Protocol-Version", b"v4.channel.k8s.io")]
EXIT_3 = (b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing '
          b'command [sh], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode",'
          b'"message":"3"}]}}')


class TranslatorTests(unittest.TestCase):

    def setUp(self):
        self.clock = Clock()
        self.client = FakeClient(self.clock)
        self.dialer = FakeDialer(self.clock)
        self.results: list[int] = []

    def serve(self, options: StreamOptions = StreamOptions(True, True, True, False),
              request: list[tuple[bytes, bytes]] = REQUEST, method: bytes = b"GET") -> None:
        done = serve_translated(self.client, request, options, self.dialer, PATH, [(b"User-Agent", b"kapiserver")],
                                method=method, clock=self.clock)
        done.addCallback(self.results.append)

    def upgrade(self, headers: list[tuple[bytes, bytes]] = V4) -> FakeKubelet:
        kubelet = FakeKubelet(self.dialer.calls[0].upgrade(headers))
        kubelet.reply_all()
        return kubelet

    def settle(self) -> None:
        for _ in range(5):
            self.clock.advance(0)

    def error_channel(self, frames: list) -> list[dict]:
        return [json.loads(payload[1:]) for opcode, payload in
                (frame for frame in frames if isinstance(frame, tuple)) if payload[:1] == b"\x03"]

    def test_a_refused_handshake_is_answered_raw_and_no_kubelet_is_dialled(self):
        self.serve(request=[(name, value) for name, value in REQUEST if name != b"Sec-WebSocket-Protocol"])
        self.assertEqual(self.client.transport.value(), b"HTTP/1.1 403 Forbidden\r\n\r\n")
        self.settle()
        self.assertEqual(self.dialer.calls, [])
        self.assertEqual(self.results, [403])

    def test_an_exec_from_handshake_to_exit_code(self):
        self.serve()
        # 101 with the v5 protocol, then at once the empty "ready" message on stdout
        self.assertEqual(self.client.head(),
                         b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                         b"Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n")
        self.assertEqual(self.client.frames(), [(ws.Opcode.BINARY, b"\x01")])
        # the SPDY upgrade client-go's executor asks for
        [call] = self.dialer.calls
        self.assertEqual((call.method, call.path), (b"POST", PATH))
        self.assertEqual(call.header_values(b"User-Agent"), [b"kapiserver"])
        self.assertEqual(call.header_values(b"Upgrade"), [b"SPDY/3.1"])
        self.assertEqual(call.header_values(b"Connection"), [b"Upgrade"])
        self.assertEqual(call.header_values(b"X-Stream-Protocol-Version"),
                         [b"v5.channel.k8s.io", b"v4.channel.k8s.io", b"v3.channel.k8s.io", b"v2.channel.k8s.io",
                          b"channel.k8s.io"])
        kubelet = FakeKubelet(call.upgrade(V4))
        # streams are opened one at a time, each after the previous one's reply
        events = kubelet.pump()
        self.assertEqual(events, [spdy.StreamOpened(1, {"streamtype": ["error"]}, False)])
        kubelet.session.reply(1)
        kubelet.flush()
        self.assertEqual(kubelet.pump(), [spdy.StreamOpened(3, {"streamtype": ["stdin"]}, False)])
        kubelet.session.reply(3)
        kubelet.flush()
        kubelet.reply_all()
        self.assertEqual(kubelet.streams, {"error": 1, "stdin": 3, "stdout": 5, "stderr": 7})

        self.client.send_message(b"\x00echo hi\n")
        self.client.send_message(b"\x00exit 3\n")
        self.client.send_message(b"\xff\x00")  # v5: stdin is done
        kubelet.pump()
        self.assertEqual(kubelet.received["stdin"], b"echo hi\nexit 3\n")
        self.assertEqual(kubelet.ended, {"stdin"})

        kubelet.send("stdout", b"hi\n")
        kubelet.send("stderr", b"warning\n")
        self.assertEqual(self.client.frames(), [(ws.Opcode.BINARY, b"\x01hi\n"), (ws.Opcode.BINARY, b"\x02warning\n")])
        # the kubelet's end: the exit Status on the error stream, then its streams end
        kubelet.send("error", EXIT_3, fin=True)
        kubelet.send("stdout", b"", fin=True)
        self.assertEqual(self.client.frames(), [])  # stderr has not ended yet
        kubelet.send("stderr", b"", fin=True)
        frames = self.client.frames()
        self.assertEqual(frames[0], (ws.Opcode.BINARY,
                                     b'\x03{"metadata":{},"status":"Failure","message":"command terminated with non-zero'
                                     b' exit code: command terminated with exit code 3","reason":"NonZeroExitCode",'
                                     b'"details":{"causes":[{"reason":"ExitCode","message":"3"}]}}'))
        self.assertEqual(frames[1:], [ws.Close(1000, "")])
        # the kubelet's connection: the streams this side had not ended reset (stdin had its FIN), GOAWAY, closed
        kubelet.pump()
        self.assertEqual(kubelet.frames[-4:], [spdy.RstStream(1, spdy.RstStatus.CANCEL),
                                               spdy.RstStream(5, spdy.RstStatus.CANCEL),
                                               spdy.RstStream(7, spdy.RstStatus.CANCEL), spdy.GoAway(0, 0)])
        self.assertTrue(kubelet.transport.disconnecting)
        self.assertTrue(self.client.transport.disconnecting)
        self.settle()
        self.assertEqual(self.results, [200])

    def test_a_tty_session_resizes_and_has_no_stderr_stream(self):
        self.serve(StreamOptions(stdin=True, stdout=True, stderr=True, tty=True))
        kubelet = self.upgrade()
        self.assertEqual(list(kubelet.streams), ["error", "stdin", "stdout", "resize"])
        self.client.send_message(b'\x04{"Width":100,')
        self.client.send_message(b'\x04"Height":40}')
        self.client.send_message(b'\x04{"width":80,"height":24}')
        kubelet.pump()
        self.assertEqual(kubelet.received["resize"], b'{"Width":100,"Height":40}\n{"Width":80,"Height":24}\n')
        kubelet.send("error", b'{"metadata":{},"status":"Success"}', fin=True)
        kubelet.send("stdout", b"", fin=True)
        frames = self.client.frames()
        self.assertIn((ws.Opcode.BINARY, b'\x03{"metadata":{},"status":"Success"}'), frames)

    def test_what_the_client_sends_before_the_streams_exist_waits_for_them(self):
        self.serve()
        self.client.send_message(b"\x00early\n")
        self.client.send_message(b"\xff\x00")
        self.client.send(ws.encode_client_frame(ws.Opcode.PING, b"still there?"))
        # pings are answered while the kubelet is dialled
        self.assertIn(ws.Pong(b"still there?"), self.client.frames())
        kubelet = self.upgrade()
        kubelet.pump()
        self.assertEqual(kubelet.received["stdin"], b"early\n")
        self.assertIn("stdin", kubelet.ended)

    def test_backpressure_both_ways(self):
        self.serve()
        kubelet = self.upgrade()
        client_transport, kubelet_transport = self.client.transport, kubelet.transport
        # a client that does not read (its transport's buffer is full) pauses the kubelet connection
        client_transport.producer.pauseProducing()
        self.assertEqual(kubelet_transport.producerState, "paused")
        client_transport.producer.resumeProducing()
        self.assertEqual(kubelet_transport.producerState, "producing")
        # a kubelet that does not read pauses the client
        kubelet_transport.producer.pauseProducing()
        self.assertEqual(client_transport.producerState, "paused")
        kubelet_transport.producer.resumeProducing()
        self.assertEqual(client_transport.producerState, "producing")

    def test_a_client_flooding_stdin_before_the_streams_exist_is_paused(self):
        self.serve()
        self.client.send_message(b"\x00" + b"x" * (70 << 10))
        self.assertEqual(self.client.transport.producerState, "paused")
        kubelet = self.upgrade()
        self.assertEqual(self.client.transport.producerState, "producing")
        kubelet.pump()
        self.assertEqual(len(kubelet.received["stdin"]), 70 << 10)

    def test_the_kubelet_not_replying_to_a_stream_times_out(self):
        self.serve()
        kubelet = FakeKubelet(self.dialer.calls[0].upgrade(V4))
        kubelet.pump()
        self.clock.advance(29)
        self.assertEqual(self.error_channel(self.client.frames()), [])
        self.clock.advance(1)
        self.assertEqual(self.error_channel(self.client.frames()), [
            {"metadata": {}, "status": "Failure", "message": "Internal error occurred: Timeout occurred",
             "reason": "InternalError", "details": {"causes": [{"message": "Timeout occurred"}]}, "code": 500}])
        self.settle()
        self.assertTrue(kubelet.transport.ended)
        self.assertEqual(self.results, [500])

    def test_a_refused_stream_is_stream_reset(self):
        self.serve()
        kubelet = FakeKubelet(self.dialer.calls[0].upgrade(V4))
        kubelet.pump()
        kubelet.session.reset_stream(1, spdy.RstStatus.REFUSED_STREAM)
        kubelet.flush()
        [status] = self.error_channel(self.client.frames())
        self.assertEqual(status["message"], "Internal error occurred: Stream reset")

    def test_a_kubelet_status_instead_of_an_upgrade_goes_to_the_error_channel(self):
        self.serve()
        body = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"pod not found","reason":"NotFound","code":404}')
        self.dialer.calls[0].answer(404, b"Not Found", [(b"Content-Type", b"application/json")], body)
        frames = self.client.frames()
        self.assertEqual(frames[1:], [(ws.Opcode.BINARY, b"\x03" + body), ws.Close(1000, "")])
        self.settle()
        self.assertEqual(self.results, [404])

    def test_other_failures_are_internal_errors_on_the_error_channel(self):
        self.serve()
        self.dialer.calls[0].fail(ConnectionRefusedError("127.0.0.1:10250"))
        [status] = self.error_channel(self.client.frames())
        self.assertTrue(status["message"].startswith("Internal error occurred: error sending request: "), status)
        self.assertIn("127.0.0.1:10250", status["message"])

        client = self.client = FakeClient(self.clock)
        self.serve()
        self.dialer.calls[1].answer(502, b"Bad Gateway", [], b"  no route \n")
        [status] = self.error_channel(client.frames())
        self.assertEqual(status["message"], "Internal error occurred: unable to upgrade connection: no route")

    def test_the_client_going_away_closes_the_kubelet_connection(self):
        self.serve()
        kubelet = self.upgrade()
        self.client.transport.end()
        kubelet.pump()
        self.assertIsInstance(kubelet.frames[-1], spdy.GoAway)
        self.assertTrue(kubelet.transport.disconnecting)
        self.settle()
        self.assertEqual(self.results, [101])

    def test_the_kubelet_connection_ending_ends_the_session_with_what_it_said(self):
        self.serve()
        kubelet = self.upgrade()
        self.client.frames()  # the ready message
        kubelet.send("stdout", b"partial")
        kubelet.transport.end()
        frames = self.client.frames()
        self.assertEqual(frames[0], (ws.Opcode.BINARY, b"\x01partial"))
        # as upstream: an error stream that said nothing is a success
        self.assertEqual(frames[1:], [(ws.Opcode.BINARY, b'\x03{"metadata":{},"status":"Success"}'),
                                      ws.Close(1000, "")])

    def test_a_spdy_protocol_error_from_the_kubelet_ends_the_session(self):
        self.serve()
        kubelet = self.upgrade()
        self.client.frames()  # the ready message
        kubelet.session.send_data(kubelet.streams["stdout"], b"output")
        kubelet.transport.protocol.dataReceived(kubelet.session.data_to_send() + b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x00")
        frames = self.client.frames()
        self.assertEqual(frames[0], (ws.Opcode.BINARY, b"\x01output"))
        self.assertEqual(frames[-1], ws.Close(1000, ""))
        self.assertEqual(len(self.error_channel(frames)), 1)
        self.assertTrue(kubelet.transport.disconnecting)

    def test_a_bad_close_message_closes_both_sides(self):
        self.serve()
        kubelet = self.upgrade()
        self.client.frames()  # the ready message
        self.client.send_message(b"\xff\x00\x00")
        self.assertEqual(self.client.frames(), [ws.Close(1000, "")])
        kubelet.pump()
        self.assertIsInstance(kubelet.frames[-1], spdy.GoAway)

    def test_the_kubelet_is_pinged_every_five_seconds(self):
        self.serve()
        kubelet = self.upgrade()
        self.clock.advance(5)
        kubelet.pump()
        self.assertEqual(kubelet.frames[-1], spdy.Ping(1))
        self.clock.advance(5)  # answered (pump echoes it): the next one goes out
        kubelet.pump()
        self.assertEqual(kubelet.frames[-1], spdy.Ping(3))

    def test_four_idle_hours_close_the_session(self):
        self.serve()
        kubelet = self.upgrade()
        self.clock.advance(3 * 3600)
        self.client.send_message(b"\x00x")
        self.clock.advance(3600)
        self.assertFalse(self.client.transport.disconnecting)
        self.clock.advance(3 * 3600)
        self.assertTrue(self.client.transport.disconnecting)
        self.assertTrue(kubelet.transport.disconnecting)


class SpdyKubelet(protocol.Protocol):
    """A kubelet on loopback: accepts the streams; when stdin ends, prints it, exits with 3."""

    def connectionMade(self) -> None:
        self.session = spdy.SpdySession(client=False)
        self.streams: dict[str, int] = {}
        self.stdin = b""

    def dataReceived(self, data: bytes) -> None:
        for event in self.session.receive(data):
            if isinstance(event, spdy.StreamOpened):
                self.streams[event.headers["streamtype"][0]] = event.stream_id
                self.session.reply(event.stream_id)
            elif isinstance(event, spdy.StreamData) and event.stream_id == self.streams.get("stdin"):
                self.stdin += event.data
            elif isinstance(event, spdy.StreamEnded) and event.stream_id == self.streams.get("stdin"):
                self.session.send_data(self.streams["stdout"], b"got " + self.stdin, fin=True)
                self.session.send_data(self.streams["stderr"], b"", fin=True)
                self.session.send_data(self.streams["error"], EXIT_3, fin=True)
        self.transport.write(self.session.data_to_send())


class V5Client(protocol.Protocol):
    """kubectl's side: waits for the ready message, sends stdin and its end, collects the rest."""

    def __init__(self) -> None:
        self.buffer = b""
        self.parser = ws.FrameParser(masked=False)
        self.assembler = ws.MessageAssembler(1 << 20)
        self.messages: list[bytes] = []
        self.finished: defer.Deferred[list[bytes]] = defer.Deferred()
        self.upgraded = False

    def dataReceived(self, data: bytes) -> None:
        if not self.upgraded:
            self.buffer += data
            if b"\r\n\r\n" not in self.buffer:
                return
            head, data = self.buffer.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 101 "), head
            self.upgraded = True
        for event in self.parser.feed(data):
            message = self.assembler.add(event)
            if message is None:
                continue
            self.messages.append(message[1])
            if message[1] == b"\x01":  # ready
                self.transport.write(ws.encode_client_frame(ws.Opcode.BINARY, b"\x00ping"))
                self.transport.write(ws.encode_client_frame(ws.Opcode.BINARY, b"\xff\x00"))

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.finished.callback(self.messages)


class LoopbackTranslatorTests(unittest.TestCase):
    """The translator between real loopback TCP connections."""

    async def test_an_exec_over_real_connections(self):
        kubelet_port = reactor.listenTCP(0, protocol.Factory.forProtocol(SpdyKubelet), interface="127.0.0.1")
        self.addCleanup(kubelet_port.stopListening)
        served: list[defer.Deferred[int]] = []

        class Hijacking(protocol.Protocol):
            def connectionMade(self) -> None:
                dialer = TCPDialer(kubelet_port.getHost().port, V4)
                served.append(serve_translated(HijackedTCP(self.transport), REQUEST, StreamOptions(True, True, True,
                                                                                                    False),
                                               dialer, PATH, [], clock=reactor))

        api_port = reactor.listenTCP(0, protocol.Factory.forProtocol(Hijacking), interface="127.0.0.1")
        self.addCleanup(api_port.stopListening)
        client = V5Client()
        await endpoints.connectProtocol(endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", api_port.getHost().port),
                                        client)
        messages = await client.finished
        self.assertEqual(messages[:2], [b"\x01", b"\x01got ping"])
        self.assertEqual(json.loads(messages[2][1:])["details"], {"causes": [{"reason": "ExitCode", "message": "3"}]})
        self.assertEqual(len(messages), 3)
        self.assertEqual(await served[0], 200)

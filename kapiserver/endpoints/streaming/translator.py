"""Exec and attach for ``v5.channel.k8s.io`` WebSocket clients, through SPDY to the kubelet:
upstream's ``StreamTranslatorHandler`` (apiserver/pkg/util/proxy/streamtranslator.go, websocket.go).

kubectl 1.30+ runs exec/attach over a WebSocket (``remotecommand.NewWebSocketExecutor``)
speaking ``v5.channel.k8s.io``; kubelets serve them over SPDY.  Upstream, in order:

1. the WebSocket handshake (``wsstream.Conn.Open``, golang.org/x/net/websocket,
   only ``v5.channel.k8s.io``): a refusal is written raw and the connection closes;
2. the ``101``, then at once an empty message on the first written channel
   (stdout, else stderr, else the error channel), which tells the client the
   connection is ready;
3. the SPDY upgrade to the kubelet, as client-go's SPDY executor makes it:
   ``Connection: Upgrade``, ``Upgrade: SPDY/3.1`` and ``X-Stream-Protocol-Version``
   v5, v4, v3, v2, then ``channel.k8s.io``; the kubelet's choice (v4 for kubelets
   today) is read from its ``X-Stream-Protocol-Version``.  An unreachable kubelet
   is ``error sending request: ...``; an answer that is not an upgrade is the
   kubelet's Status if its body is one, else ``unable to upgrade connection: <body>``;
4. the streams, one after the other, each awaiting its SYN_REPLY (30 s each,
   ``Timeout occurred``; a refusal is ``Stream reset``): ``streamType`` error,
   stdin, stdout, stderr (not with a TTY), resize (a TTY, from v3);
5. the relay: channel 0 to the stdin stream (a v5 close message ``[255, 0]``
   half-closes it with FIN), channel 4's JSON sizes re-encoded to the resize
   stream, the stdout and stderr streams to channels 1 and 2; the error stream
   read to its end;
6. when stdout, stderr and the error stream have ended, the error stream's content
   decides (client-go's v4 decoder) the Status written on channel 3: Success, a
   ``NonZeroExitCode`` wrapping ``command terminated with exit code N``, or an
   internal error; then the SPDY connection is closed (RST_STREAM for the
   streams, GOAWAY) and the WebSocket (close 1000).

Every failure after the ``101`` is a Status on channel 3 (``InternalError``, or the
kubelet's own Status), never an HTTP answer.  The SPDY connection is pinged
every 5 s (the translator's round tripper); the WebSocket is closed after 4 hours
without a message either way.

Where this side differs: when the client goes away (or breaks the protocol), the
kubelet connection is closed at once (upstream lets the command run on and
discards its output); a kubelet connection that ends while streams are being
created fails at once with ``connection to the kubelet ended while creating
streams`` (upstream waits out the 30 s and says ``Timeout occurred``).

Backpressure: the kubelet's transport is the producer of the client's and the
reverse, so a client that does not read pauses the whole SPDY connection (as
spdystream's reader stops when a stream's reader does), and a kubelet that does
not read pauses the client.  Nothing is buffered without a bound: stdin and
resize data that arrives before the streams exist (at most 1 MiB; the client is
paused past 64 KiB), the error stream (1 MiB).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.endpoints.streaming import answers
from kapiserver.endpoints.streaming.flow import KubeletConnection, default_clock
from kapiserver.endpoints.streaming.interfaces import HijackedConnection, UpgradeDialer, UpgradeResponse
from kapiserver.endpoints.streaming.wsconn import WebSocketConnection
from kapiserver.machinery.httpstream import channel, heads, spdy
from kapiserver.machinery.httpstream import websocket as ws

log = Logger()

STREAM_CREATION_TIMEOUT = 30.0  # httpstream/spdy's createStreamResponseTimeout
SPDY_PING_PERIOD = 5.0  # the translator's RoundTripperConfig.PingPeriod
IDLE_TIMEOUT = 4 * 3600.0  # websocket.go's defaultIdleConnectionTimeout
MAX_ERROR_STREAM = 1 << 20
MAX_PENDING = 1 << 20  # stdin/resize bytes held until the streams exist
PAUSE_PENDING = 64 << 10  # ... past which the client is paused

# Headers the request to the kubelet gets from here, not from the caller
_UPGRADE_HEADERS = frozenset({b"connection", b"upgrade", b"x-stream-protocol-version"})


@dataclass(frozen=True)
class StreamOptions:
    """Which streams the command has (the exec/attach request's stdin, stdout, stderr, tty)."""
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def spdy_request_headers(kubelet_headers: heads.HeaderList) -> list[tuple[bytes, bytes]]:
    """The caller's headers, then the SPDY upgrade and the versions client-go's executor offers."""
    headers = [(name, value) for name, value in kubelet_headers if name.lower() not in _UPGRADE_HEADERS]
    headers.append((b"Connection", b"Upgrade"))
    headers.append((b"Upgrade", spdy.HEADER_SPDY31.encode()))
    headers.extend((b"X-Stream-Protocol-Version", name.encode()) for name in channel.SPDY_EXECUTOR_PROTOCOLS)
    return headers


def streams_to_create(options: StreamOptions, version: int) -> list[str]:
    """The SPDY streams client-go's executor opens, in its order."""
    kinds = [channel.STREAM_TYPE_ERROR]
    if options.stdin:
        kinds.append(channel.STREAM_TYPE_STDIN)
    if options.stdout:
        kinds.append(channel.STREAM_TYPE_STDOUT)
    if options.stderr and not options.tty:
        kinds.append(channel.STREAM_TYPE_STDERR)
    if options.tty and version >= 3:
        kinds.append(channel.STREAM_TYPE_RESIZE)
    return kinds


def first_written_channel(options: StreamOptions) -> int:
    """Where the empty "ready" message goes (createWebSocketStreams)."""
    if options.stdout:
        return channel.STDOUT
    if options.stderr:
        return channel.STDERR
    return channel.ERROR


def status_of_failed_upgrade(response: UpgradeResponse) -> tuple[dict, int]:
    """What ``SpdyRoundTripper.NewConnection`` makes of an answer that is not an upgrade:
    the body's Status, else ``unable to upgrade connection: <body>`` (an internal error)."""
    try:
        decoded = json.loads(response.body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind", "Status") == "Status":
        status = channel.status_from_object(decoded)
        code = status.get("code")
        return status, code if isinstance(code, int) and code else 500
    text = response.body.decode("utf-8", "replace").strip()
    return channel.internal_error_status(f"unable to upgrade connection: {text}"), 500


_DIALING, _CREATING, _STREAMING, _FINISHED = "dialing", "creating streams", "streaming", "finished"


class _Translator:
    """One translated exec/attach session (a WebSocket listener and a SPDY client)."""

    def __init__(self, options: StreamOptions, label: str, clock: IReactorTime) -> None:
        self.options = options
        self.label = label
        self.clock = clock
        self.client = WebSocketConnection(self, label, echo_close_code=False)
        self.kubelet = KubeletConnection(self)
        self.session = spdy.SpdySession(client=True)
        self.state = _DIALING
        self.version = 0
        self.stream_ids: dict[str, int] = {}
        self.stream_kinds: dict[int, str] = {}
        self.to_create: list[str] = []
        self.awaited = ""  # the stream type whose reply is awaited
        self.ended: set[str] = set()
        self.error_data = bytearray()
        self.pending: list[tuple[int, bytes | None]] = []  # (channel, data), data None: v5 close
        self.pending_size = 0
        self.stdin_closed = False
        self.resize_decoder = channel.TerminalSizeDecoder()
        self.resize_closed = False
        self.message_channel: int | None = None  # the channel of the message being read
        self.close_signal = bytearray()
        self.close_signal_size = 0
        self.code = 101
        self.done: defer.Deferred[int] = defer.Deferred()
        self._registered = False
        self._spdy_started = False  # SPDY frames may go to the kubelet
        self._creation_timer: IDelayedCall | None = None
        self._ping_timer: IDelayedCall | None = None
        self._ping_waiting = False
        self._idle_timer: IDelayedCall | None = None
        self._last_activity = clock.seconds()

    @property
    def finished(self) -> bool:
        return self.state == _FINISHED

    # ---------------------------------------------------------------- setup

    def begin(self, accept: bytes) -> None:
        """The WebSocket is accepted: 101, the ready message, then read the client."""
        self.client.accept(accept)
        self.client.send_binary(bytes([first_written_channel(self.options)]))
        self.client.release()
        self._idle_timer = self.clock.callLater(IDLE_TIMEOUT, self._idle_check)

    def dialed(self, response: UpgradeResponse) -> None:
        if self.finished:
            self.kubelet.close()
            return
        if response.code != 101:
            status, code = status_of_failed_upgrade(response)
            log.info("{label}: the kubelet answered {code} {phrase} instead of an upgrade",
                     label=self.label, code=response.code, phrase=response.phrase.decode("latin-1"))
            self.finish(status, code)
            return
        connection = response.header(b"Connection").lower()
        upgrade = response.header(b"Upgrade").lower()
        if b"upgrade" not in connection or spdy.HEADER_SPDY31.lower().encode() not in upgrade:
            log.warn("{label}: the kubelet's 101 lacks the SPDY upgrade headers: {headers!r}",
                     label=self.label, headers=response.headers)
            self.finish(channel.internal_error_status("unable to upgrade connection: "), 500)
            return
        if not self.kubelet.connected or self.kubelet.lost:
            self.fail("the kubelet connection ended before the upgrade was read")
            return
        protocol = response.header(b"X-Stream-Protocol-Version").decode("latin-1").strip()
        version = channel.PROTOCOL_VERSIONS.get(protocol)
        if version is None:
            self.fail(f"the kubelet chose the stream protocol {protocol!r}, which was not offered")
            return
        self.version = version
        log.info("{label}: the kubelet speaks {protocol}", label=self.label, protocol=protocol or "(none: v1)")
        self.state = _CREATING
        self.to_create = streams_to_create(self.options, version)
        self._spdy_started = True
        self.kubelet.release()
        if self.finished:  # what the kubelet sent with its 101 ended it
            return
        self._ping_timer = self.clock.callLater(SPDY_PING_PERIOD, self._ping)
        self._open_next_stream()

    def dial_failed(self, failure: Failure) -> None:
        log.info("{label}: the kubelet could not be reached: {error}", label=self.label,
                 error=failure.getErrorMessage())
        self.fail(f"error sending request: {failure.getErrorMessage()}")

    def _open_next_stream(self) -> None:
        if not self.to_create:
            self._start_streaming()
            return
        kind = self.to_create.pop(0)
        self.awaited = kind
        stream_id = self.session.open_stream({channel.STREAM_TYPE_HEADER.lower(): [kind]})
        self.stream_ids[kind] = stream_id
        self.stream_kinds[stream_id] = kind
        self._flush()
        self._creation_timer = self.clock.callLater(STREAM_CREATION_TIMEOUT, self._creation_timed_out, kind)

    def _creation_timed_out(self, kind: str) -> None:
        self._creation_timer = None
        log.warn("{label}: the kubelet did not reply to the {kind} stream in {seconds} s",
                 label=self.label, kind=kind, seconds=STREAM_CREATION_TIMEOUT)
        self.fail("Timeout occurred")

    def _cancel_creation_timer(self) -> None:
        if self._creation_timer is not None and self._creation_timer.active():
            self._creation_timer.cancel()
        self._creation_timer = None

    def _start_streaming(self) -> None:
        self.state = _STREAMING
        client, kubelet = self.client, self.kubelet
        client.wire.registerProducer(kubelet.gate.producer_for("client-full"), True)
        kubelet.wire.registerProducer(client.gate.producer_for("kubelet-full"), True)
        self._registered = True
        pending, self.pending, self.pending_size = self.pending, [], 0
        for number, data in pending:
            if self.finished:
                return
            if data is None:
                self._channel_closed(number)
            else:
                self._channel_data(number, data)
        client.gate.resume("setup")
        log.debug("{label}: streams open: {streams}", label=self.label, streams=self.stream_ids)
        self._check_complete()

    # ---------------------------------------------------------------- the client's messages

    def ws_message_start(self, opcode: ws.Opcode) -> None:
        self.message_channel = None
        self._last_activity = self.clock.seconds()

    def ws_message_data(self, data: bytes) -> None:
        self._last_activity = self.clock.seconds()
        if self.message_channel is None:
            self.message_channel = data[0]
            data = data[1:]
            if self.message_channel == channel.CLOSE_SIGNAL:
                self.close_signal.clear()
                self.close_signal_size = 0
        if self.message_channel == channel.CLOSE_SIGNAL:
            self.close_signal_size += len(data)
            if len(self.close_signal) < 1:
                self.close_signal += data[:1]
            return
        if data:
            self._channel_data(self.message_channel, data)

    def ws_message_end(self) -> None:
        number, self.message_channel = self.message_channel, None
        if number != channel.CLOSE_SIGNAL:
            return  # an empty message (no channel) is skipped, as wsstream does
        if self.close_signal_size != 1:
            self.protocol_error(f"Single channel byte should follow stream close signal. "
                                f"Got {self.close_signal_size} bytes")
            return
        closed = self.close_signal[0]
        if closed >= channel.CHANNEL_COUNT:
            self.protocol_error(f"Close is targeted for a channel {closed} that is not valid, possible protocol error")
            return
        log.debug("{label}: the client closed channel {channel}", label=self.label, channel=closed)
        self._channel_closed(closed)

    def ws_closing(self, code: int | None, reason: str) -> None:
        self.teardown(f"the client closed the WebSocket ({code} {reason!r})")

    def ws_failed(self, close_code: int, message: str) -> None:
        self.teardown(f"a WebSocket protocol error ({close_code} {message})")

    def ws_lost(self, reason: Failure) -> None:
        self.teardown(f"the client connection ended ({reason.getErrorMessage()})")

    def protocol_error(self, message: str) -> None:
        log.warn("{label}: channel protocol error from the client: {message}; closing", label=self.label,
                 message=message)
        self.teardown("a channel protocol error")

    def _hold(self, number: int, data: bytes | None) -> None:
        self.pending.append((number, data))
        self.pending_size += len(data or b"")
        if self.pending_size > MAX_PENDING:
            log.warn("{label}: the client sent over {limit} bytes before the kubelet's streams were open",
                     label=self.label, limit=MAX_PENDING)
            self.fail("too much client data before the streams were open")
        elif self.pending_size > PAUSE_PENDING:
            self.client.gate.pause("setup")

    def _writable(self, kind: str) -> int | None:
        stream_id = self.stream_ids.get(kind)
        if stream_id is None:
            return None
        stream = self.session.streams.get(stream_id)
        if stream is None or stream.local_closed:
            return None
        return stream_id

    def _channel_data(self, number: int, data: bytes) -> None:
        if self.state != _STREAMING:
            if not self.finished:
                self._hold(number, data)
            return
        if number == channel.STDIN:
            stream_id = self._writable(channel.STREAM_TYPE_STDIN) if not self.stdin_closed else None
            if stream_id is not None:
                self.session.send_data(stream_id, data)
                self._flush()
        elif number == channel.RESIZE:
            self._resize(data)
        elif number >= channel.CHANNEL_COUNT:
            log.debug("{label}: a message for channel {channel}, which is not valid; dropped", label=self.label,
                      channel=number)
        # messages on the written channels (1, 2, 3) are dropped, as wsstream drops them

    def _resize(self, data: bytes) -> None:
        if not self.options.tty or self.resize_closed:
            return
        try:
            sizes = self.resize_decoder.feed(data)
        except channel.ChannelProtocolError as exc:
            log.warn("{label}: bad terminal size from the client ({error}); resizing stops", label=self.label,
                     error=exc)
            self.resize_closed = True
            return
        stream_id = self._writable(channel.STREAM_TYPE_RESIZE)
        if stream_id is None:
            return
        for size in sizes:
            self.session.send_data(stream_id, size.encode())
        self._flush()

    def _channel_closed(self, number: int) -> None:
        if self.state != _STREAMING:
            if not self.finished:
                self._hold(number, None)
            return
        if number == channel.STDIN:
            self._end_stdin()
        elif number == channel.RESIZE:
            self.resize_closed = True

    def _end_stdin(self) -> None:
        if self.stdin_closed:
            return
        self.stdin_closed = True
        stream_id = self._writable(channel.STREAM_TYPE_STDIN)
        if stream_id is not None:
            log.debug("{label}: stdin ended; half-closing the stdin stream", label=self.label)
            self.session.close_stream(stream_id)
            self._flush()

    # ---------------------------------------------------------------- the kubelet's frames

    def kubelet_bytes(self, data: bytes) -> None:
        if self.finished:
            return
        error: spdy.SpdyError | None = None
        try:
            events = self.session.receive(data)
        except spdy.SpdyError as exc:
            error, events = exc, exc.events
        for event in events:
            if self.finished:
                break
            self._kubelet_event(event)
        self._flush()
        if error is not None and not self.finished:
            log.warn("{label}: SPDY protocol error from the kubelet: {error}; dropping its connection",
                     label=self.label, error=error)
            self.kubelet.close()
            self._kubelet_gone("a SPDY protocol error from the kubelet")

    def _kubelet_event(self, event: spdy.SessionEvent) -> None:
        if isinstance(event, spdy.StreamData):
            kind = self.stream_kinds.get(event.stream_id)
            if kind == channel.STREAM_TYPE_STDOUT:
                self._to_client(channel.STDOUT, event.data)
            elif kind == channel.STREAM_TYPE_STDERR:
                self._to_client(channel.STDERR, event.data)
            elif kind == channel.STREAM_TYPE_ERROR:
                self.error_data += event.data
                if len(self.error_data) > MAX_ERROR_STREAM:
                    self.fail(f"the error stream is over {MAX_ERROR_STREAM} bytes")
            # data on stdin and resize streams is read and dropped, as client-go does
        elif isinstance(event, spdy.StreamReplied):
            if self.state == _CREATING and self.stream_kinds.get(event.stream_id) == self.awaited:
                self._cancel_creation_timer()
                self._open_next_stream()
        elif isinstance(event, (spdy.StreamEnded, spdy.StreamReset)):
            self._stream_ended(event)
        elif isinstance(event, spdy.PingAnswered):
            self._ping_waiting = False
        elif isinstance(event, spdy.GoAwayReceived):
            log.info("{label}: the kubelet sent GOAWAY (status {status})", label=self.label, status=event.status)
            if self.state == _CREATING:
                self.fail("connection to the kubelet ended while creating streams")
        elif isinstance(event, spdy.StreamOpened):
            log.warn("{label}: the kubelet opened stream {id}; refused", label=self.label, id=event.stream_id)
            self.session.reset_stream(event.stream_id, spdy.RstStatus.REFUSED_STREAM)

    def _stream_ended(self, event: spdy.StreamEnded | spdy.StreamReset) -> None:
        kind = self.stream_kinds.get(event.stream_id)
        if kind is None:
            return
        if self.state == _CREATING and kind == self.awaited:
            if isinstance(event, spdy.StreamReset) and not event.replied:
                log.warn("{label}: the kubelet refused the {kind} stream (RST_STREAM {status})",
                         label=self.label, kind=kind, status=event.status)
                self.fail("Stream reset")
                return
        self.ended.add(kind)
        if kind == channel.STREAM_TYPE_STDIN and self.state == _STREAMING:
            self._end_stdin()  # client-go closes stdin once the kubelet's side of it ends
        self._check_complete()

    def _to_client(self, number: int, data: bytes) -> None:
        self._last_activity = self.clock.seconds()
        self.client.send_binary(bytes([number]) + data)

    def _check_complete(self) -> None:
        if self.state != _STREAMING:
            return
        outputs = set()
        if self.options.stdout:
            outputs.add(channel.STREAM_TYPE_STDOUT)
        if self.options.stderr and not self.options.tty:
            outputs.add(channel.STREAM_TYPE_STDERR)
        error_ended = channel.STREAM_TYPE_ERROR in self.ended
        if self.version <= 1:
            # v1 returns on an error message at once, else when the outputs are done
            if error_ended and self.error_data:
                self._finish_with(channel.decode_error_stream(1, bytes(self.error_data)))
            elif outputs and outputs <= self.ended or not outputs and error_ended:
                self._finish_with(channel.CommandSucceeded())
            return
        if error_ended and outputs <= self.ended:
            self._finish_with(channel.decode_error_stream(self.version, bytes(self.error_data)))

    def _finish_with(self, outcome: channel.CommandOutcome) -> None:
        code = 500 if isinstance(outcome, channel.CommandFailed) else 200
        self.finish(channel.outcome_status(outcome), code)

    def kubelet_lost(self, reason: Failure) -> None:
        if self.finished:
            self._check_done()
            return
        log.info("{label}: the kubelet connection ended ({reason})", label=self.label,
                 reason=reason.getErrorMessage())
        self._kubelet_gone("connection to the kubelet ended while creating streams")

    def _kubelet_gone(self, while_creating: str) -> None:
        """The kubelet will send nothing more: every stream has ended."""
        if self.state in (_DIALING, _CREATING):
            self.fail(while_creating)
            return
        if self.state == _STREAMING:
            if channel.STREAM_TYPE_ERROR not in self.ended:
                log.warn("{label}: the kubelet connection ended before the error stream did", label=self.label)
            self.ended.update(self.stream_ids)
            self._check_complete()

    # ---------------------------------------------------------------- timers

    def _ping(self) -> None:
        self._ping_timer = None
        if self.finished:
            return
        if not self._ping_waiting:
            self._ping_waiting = True
            self.session.ping()
            self._flush()
        self._ping_timer = self.clock.callLater(SPDY_PING_PERIOD, self._ping)

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self.finished:
            return
        idle = self.clock.seconds() - self._last_activity
        if idle >= IDLE_TIMEOUT:
            self.teardown(f"no message for {IDLE_TIMEOUT:.0f} s")
            return
        self._idle_timer = self.clock.callLater(IDLE_TIMEOUT - idle, self._idle_check)

    # ---------------------------------------------------------------- the end

    def _flush(self) -> None:
        self.kubelet.write(self.session.data_to_send())

    def fail(self, message: str) -> None:
        """An error the client learns as an internal error Status."""
        self.finish(channel.internal_error_status(message), 500)

    def finish(self, status: dict, code: int) -> None:
        """Write ``status`` on the error channel, then close both connections."""
        if self.finished:
            return
        log.info("{label}: done: {status} {message}", label=self.label, status=status.get("status"),
                 message=status.get("message", ""))
        self.code = code
        self._stop()
        self.client.send_binary(bytes([channel.ERROR]) + channel.go_json(status))
        self.client.close(ws.CloseCode.NORMAL)
        self._check_done()

    def teardown(self, why: str) -> None:
        """Close both connections without a Status (the client is gone or broke the protocol)."""
        if self.finished:
            self._check_done()
            return
        log.info("{label}: {why}; closing the kubelet connection", label=self.label, why=why)
        self._stop()
        self.client.close(ws.CloseCode.NORMAL)
        self._check_done()

    def _stop(self) -> None:
        self.state = _FINISHED
        for timer in (self._creation_timer, self._ping_timer, self._idle_timer):
            if timer is not None and timer.active():
                timer.cancel()
        self._creation_timer = self._ping_timer = self._idle_timer = None
        if self._registered:
            self._registered = False
            if not self.client.lost:
                self.client.wire.unregisterProducer()
            if self.kubelet.connected and not self.kubelet.lost:
                self.kubelet.wire.unregisterProducer()
        if self._spdy_started and self.kubelet.connected and not self.kubelet.lost:
            self.session.close()
            self._flush()
        self.kubelet.close()

    def _check_done(self) -> None:
        if self.done.called or not self.client.lost:
            return
        if self.kubelet.connected and not self.kubelet.lost:
            return
        self.done.callback(self.code)


def serve_translated(client: HijackedConnection, request_headers: heads.HeaderList, options: StreamOptions,
                     dialer: UpgradeDialer, kubelet_path: bytes, kubelet_headers: heads.HeaderList, *,
                     method: bytes = b"GET", clock: IReactorTime | None = None) -> "defer.Deferred[int]":
    """Serve an exec/attach WebSocket client (``v5.channel.k8s.io``) through SPDY to the kubelet.

    ``request_headers``/``method``: the client's request (its WebSocket handshake);
    ``kubelet_path``: the kubelet's exec/attach path and query; ``kubelet_headers``:
    what the request to the kubelet carries besides the upgrade headers added here.
    Fires, once both connections are closed, with the code upstream's metrics record:
    the refused handshake's code, 200 for a command that ran (whatever its exit code),
    the Status's code on failures, 101 when the client left before a Status.
    """
    if clock is None:
        clock = default_clock()
    label = f"exec translator {kubelet_path.decode('latin-1')}"
    handshake = ws.handshake_as_wsstream(method, request_headers, [channel.STREAM_PROTOCOL_V5])
    if isinstance(handshake, ws.HandshakeRejected):
        log.info("{label}: WebSocket handshake refused ({code}): {reason}", label=label, code=handshake.code,
                 reason=handshake.reason)
        code = handshake.code
        return answers.answer_and_close(client, handshake.response).addCallback(lambda _: code)
    translator = _Translator(options, label, clock)
    client.attach(translator.client)
    translator.begin(handshake.response)
    if not translator.finished:
        # upstream's SPDY executor: a POST
        dialed = dialer.upgrade(kubelet_path, spdy_request_headers(kubelet_headers), translator.kubelet,
                                method=b"POST")
        dialed.addCallbacks(translator.dialed, translator.dial_failed)
    return translator.done

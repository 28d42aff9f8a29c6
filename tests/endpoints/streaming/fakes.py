"""In-memory stand-ins for the streaming relays' seams: a hijacked client connection, an upgrade
dialer, transports whose closing takes a reactor turn, a WebSocket client and a SPDY kubelet."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer, endpoints, reactor
from twisted.internet.error import ConnectionAborted, ConnectionDone
from twisted.internet.interfaces import IHalfCloseableProtocol, IProtocol, ITCPTransport
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from zope.interface import implementer

from kapiserver.endpoints.streaming.interfaces import UpgradeResponse
from kapiserver.machinery.httpstream import spdy
from kapiserver.machinery.httpstream import websocket as ws


class FakeTransport(StringTransport):
    """A StringTransport whose ``loseConnection`` ends the connection a reactor turn later
    (``clock.advance(0)``), as a socket's does, once its buffer is written."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.protocol: IProtocol | None = None
        self.aborted = False
        self.ended = False

    def loseConnection(self) -> None:
        if not self.disconnecting:
            self.disconnecting = True
            self.clock.callLater(0, self.end, Failure(ConnectionDone()))

    def abortConnection(self) -> None:
        self.aborted = True
        self.disconnecting = True
        self.clock.callLater(0, self.end, Failure(ConnectionAborted()))

    def end(self, reason: Failure | None = None) -> None:
        """The connection is gone (the peer closed it, or our close completed)."""
        if self.ended:
            return
        self.ended = True
        assert self.protocol is not None
        self.protocol.connectionLost(reason or Failure(ConnectionDone()))


@implementer(ITCPTransport)
class HalfCloseTransport(FakeTransport):
    """A TCP-like transport: ``loseWriteConnection`` is a half-close."""

    write_closed = False

    def loseWriteConnection(self) -> None:
        self.write_closed = True
        protocol = IHalfCloseableProtocol(self.protocol, None)
        if protocol is not None:
            self.clock.callLater(0, protocol.writeConnectionLost)

    def peer_half_closes(self) -> None:
        IHalfCloseableProtocol(self.protocol).readConnectionLost()


class FakeClient:
    """A hijacked client connection (``HijackedConnection``), and the test's view of its peer."""

    def __init__(self, clock: Clock, transport: FakeTransport | None = None, early: bytes = b"") -> None:
        self.transport = transport or FakeTransport(clock)
        self.early = early
        self.protocol: IProtocol | None = None
        self._read = 0
        self._head_read = False
        self.parser = ws.FrameParser(masked=False)
        self.assembler = ws.MessageAssembler(1 << 30)

    def attach(self, protocol: IProtocol) -> None:
        assert self.protocol is None, "attached twice"
        self.protocol = protocol
        self.transport.protocol = protocol
        protocol.makeConnection(self.transport)
        if self.early:
            protocol.dataReceived(self.early)

    # -- the client's writing

    def send(self, data: bytes) -> None:
        assert self.protocol is not None
        self.protocol.dataReceived(data)

    def send_message(self, payload: bytes, opcode: ws.Opcode = ws.Opcode.BINARY) -> None:
        self.send(ws.encode_client_frame(opcode, payload))

    # -- what the client got

    def new_bytes(self) -> bytes:
        data = self.transport.value()[self._read:]
        self._read += len(data)
        return data

    def head(self) -> bytes:
        """The HTTP head the server wrote (then frames are read after it)."""
        data = self.transport.value()
        end = data.index(b"\r\n\r\n") + 4
        if not self._head_read:
            self._read = end
            self._head_read = True
        return data[:end]

    def frames(self) -> list[Any]:
        """Whole messages ``(opcode, payload)`` and control events the server sent since the last call."""
        self.head()
        out: list[Any] = []
        for event in self.parser.feed(self.new_bytes()):
            message = self.assembler.add(event)
            if message is not None:
                out.append(message)
            elif isinstance(event, (ws.Ping, ws.Pong, ws.Close)):
                out.append(event)
        return out


@dataclass
class DialCall:
    path: bytes
    headers: list[tuple[bytes, bytes]]
    protocol: IProtocol
    deferred: defer.Deferred[UpgradeResponse]
    clock: Clock
    method: bytes
    transport: FakeTransport | None = None

    def header_values(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.headers if key.lower() == name.lower()]

    def upgrade(self, headers: list[tuple[bytes, bytes]] | None = None, after_head: bytes = b"",
                transport: FakeTransport | None = None) -> FakeTransport:
        """The kubelet answers 101: the protocol is connected, then the Deferred fires."""
        self.transport = transport or FakeTransport(self.clock)
        self.transport.protocol = self.protocol
        self.protocol.makeConnection(self.transport)
        if after_head:
            self.protocol.dataReceived(after_head)
        if headers is None:
            headers = [(b"Connection", b"Upgrade"), (b"Upgrade", b"SPDY/3.1")]
        self.deferred.callback(UpgradeResponse(101, b"Switching Protocols", headers))
        return self.transport

    def answer(self, code: int, phrase: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.deferred.callback(UpgradeResponse(code, phrase, headers, body))

    def fail(self, error: Exception) -> None:
        self.deferred.errback(Failure(error))


@dataclass
class FakeDialer:
    """An ``UpgradeDialer`` whose answers the test gives."""
    clock: Clock
    calls: list[DialCall] = field(default_factory=list)

    def upgrade(self, path: bytes, headers: list[tuple[bytes, bytes]], protocol: IProtocol, *,
                method: bytes) -> defer.Deferred[UpgradeResponse]:
        deferred: defer.Deferred[UpgradeResponse] = defer.Deferred()
        self.calls.append(DialCall(path, headers, protocol, deferred, self.clock, method))
        return deferred


class FakeKubelet:
    """The kubelet's end of an upgraded SPDY connection, as a server-side session."""

    def __init__(self, transport: FakeTransport) -> None:
        self.transport = transport
        self.session = spdy.SpdySession(client=False)
        self._read = 0
        self.streams: dict[str, int] = {}  # stream type -> id
        self.received: dict[str, bytes] = {}
        self.ended: set[str] = set()
        self.frames: list[spdy.Frame] = []
        self._raw_parser = spdy.FrameParser()

    def pump(self) -> list[spdy.SessionEvent]:
        """Read what the relay wrote, answer pings; returns the session's events."""
        data = self.transport.value()[self._read:]
        self._read += len(data)
        self.frames.extend(self._raw_parser.feed(data))
        events = self.session.receive(data)
        for event in events:
            if isinstance(event, spdy.StreamOpened):
                self.streams[event.headers["streamtype"][0]] = event.stream_id
            elif isinstance(event, spdy.StreamData):
                kind = self.kind(event.stream_id)
                self.received[kind] = self.received.get(kind, b"") + event.data
            elif isinstance(event, spdy.StreamEnded):
                self.ended.add(self.kind(event.stream_id))
        self.flush()
        return events

    def kind(self, stream_id: int) -> str:
        return next(kind for kind, known in self.streams.items() if known == stream_id)

    def flush(self) -> None:
        data = self.session.data_to_send()
        if data and not self.transport.ended:
            assert self.transport.protocol is not None
            self.transport.protocol.dataReceived(data)

    def reply_all(self) -> None:
        """Reply to every stream as it is opened (the relay opens them one by one)."""
        while True:
            events = self.pump()
            opened = [event for event in events if isinstance(event, spdy.StreamOpened)]
            if not opened:
                return
            for event in opened:
                self.session.reply(event.stream_id)
            self.flush()

    def send(self, kind: str, data: bytes, fin: bool = False) -> None:
        self.session.send_data(self.streams[kind], data, fin=fin)
        self.flush()


class HijackedTCP:
    """A served TCP connection handed to another protocol, as the HTTP channel's hijack does."""

    def __init__(self, transport: ITCPTransport) -> None:
        self.transport = transport

    def attach(self, protocol_: IProtocol) -> None:
        self.transport.protocol = protocol_  # type: ignore[attr-defined]
        protocol_.makeConnection(self.transport)


class TCPDialer:
    """Connects to a kubelet on loopback and says it upgraded (with ``headers``)."""

    def __init__(self, port: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.port = port
        self.headers = headers

    def upgrade(self, path: bytes, headers: list[tuple[bytes, bytes]], protocol_: IProtocol, *,
                method: bytes) -> defer.Deferred[UpgradeResponse]:
        endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", self.port)
        connected = endpoints.connectProtocol(endpoint, protocol_)
        return connected.addCallback(lambda _: UpgradeResponse(101, b"Switching Protocols", self.headers))

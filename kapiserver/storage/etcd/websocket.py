"""One WebSocket to etcd's gateway, the client side: ``WebSocketStream``.

A watch is a bidirectional gRPC stream.  The JSON gateway carries it two ways:
as a streaming POST, which delivers the request body once it has ended, so
only the first request ever reaches etcd; or as a WebSocket on the same path
(etcd's gateway wraps its handlers in a WebSocket proxy), one JSON message per
request or response, each way, for as long as the stream lives.  Watches use
the WebSocket so that a running watch can be asked for progress
(``{"progress_request": {}}``, kube-apiserver's RequestWatchProgress).

This is the part of RFC 6455 a client of that proxy needs: the upgrade, text
messages both ways (the client's masked), fragmented messages, ping and
close.  Each message from etcd is one ``{"result": WatchResponse}`` or
``{"error": ...}`` document.

With ``silence_timeout`` > 0 the stream aborts itself (and calls
``on_silence`` with the idle time) once no byte arrived for that long.  Data
only stamps the time; one timer checks the stamp, so a busy stream costs one
timer per timeout period, not one per message.
"""
from __future__ import annotations

import base64
import hashlib
import os
from typing import Callable, Optional, Union

import orjson
from twisted.internet import defer, error as net_error
from twisted.internet.interfaces import IDelayedCall
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.storage.interface import StorageError

log = Logger()

_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEAD = 64 * 1024

_CONTINUATION, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def accept_key(key: bytes) -> bytes:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``Sec-WebSocket-Key: key``."""
    return base64.b64encode(hashlib.sha1(key + _ACCEPT_GUID).digest())


def mask(payload: bytes, key: bytes) -> bytes:
    """``payload`` XORed with the 4-byte masking ``key`` repeated (RFC 6455 5.3)."""
    n = len(payload)
    if n == 0:
        return b""
    repeated = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(n, "big")


def frame(opcode: int, payload: bytes, key: Optional[bytes] = None) -> bytes:
    """One final frame; masked with ``key`` (a client's frames must be)."""
    n = len(payload)
    bit = 0x80 if key is not None else 0
    if n < 126:
        head = bytes((0x80 | opcode, bit | n))
    elif n < 1 << 16:
        head = bytes((0x80 | opcode, bit | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, bit | 127)) + n.to_bytes(8, "big")
    if key is None:
        return head + payload
    return head + key + mask(payload, key)


class WebSocketStream(Protocol):
    """The client end of one WebSocket to ``path`` on ``host``, carrying JSON documents.

    ``opened`` fires once the server accepted the upgrade, or fails with a
    :class:`StorageError` saying what it answered instead; ``ended`` fires when
    the connection is gone.  ``send`` writes one document as one message.
    """

    def __init__(self, host: bytes, path: str, on_message: Callable[[dict], None], clock=None,
                 silence_timeout: float = 0.0, on_silence: Optional[Callable[[float], None]] = None):
        self._host = host
        self._path = path.encode("ascii")
        self._on_message = on_message
        self._key = base64.b64encode(os.urandom(16))
        self._upgraded = False
        self._buffer = bytearray()
        self._fragments: list[bytes] = []
        self.received = False
        self.silent = False
        self.opened: defer.Deferred = defer.Deferred(lambda _: self.abort())
        self.ended: defer.Deferred = defer.Deferred()
        self._clock = clock
        self._silence_timeout = silence_timeout if clock is not None else 0.0
        self._on_silence = on_silence
        self._last_data = 0.0
        self._watchdog: Optional[IDelayedCall] = None

    # ------------------------------------------------------------ connection

    def connectionMade(self) -> None:
        self.transport.write(  # type: ignore[union-attr]
            b"GET " + self._path + b" HTTP/1.1\r\nHost: " + self._host +
            b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13"
            b"\r\nSec-WebSocket-Key: " + self._key + b"\r\n\r\n")
        if self._silence_timeout > 0:
            self._last_data = self._clock.seconds()
            self._watchdog = self._clock.callLater(self._silence_timeout, self._check_silence)

    def send(self, document: dict) -> None:
        """Send ``document`` as one text message (dropped when the connection is gone)."""
        if self.transport is not None and self._upgraded:
            self.transport.write(frame(_TEXT, orjson.dumps(document), os.urandom(4)))

    def abort(self) -> None:
        """Drop the connection now."""
        self._stop_watchdog()
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.abortConnection()  # type: ignore[attr-defined]

    def connectionLost(self, reason: Optional[Failure] = None) -> None:
        self.transport = None
        self._stop_watchdog()
        if not self.opened.called:
            self.opened.errback(reason if reason is not None else Failure(net_error.ConnectionDone()))
        if not self.ended.called:
            self.ended.callback(None)

    # ------------------------------------------------------------ silence

    def _check_silence(self) -> None:
        self._watchdog = None
        if self.transport is None:
            return
        idle = self._clock.seconds() - self._last_data
        remaining = self._silence_timeout - idle
        if remaining > 0.001:
            self._watchdog = self._clock.callLater(remaining, self._check_silence)
            return
        self.silent = True
        if self._on_silence is not None:
            self._on_silence(idle)
        self.abort()

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog.active():
            watchdog.cancel()

    # ------------------------------------------------------------ reading

    def dataReceived(self, data: bytes) -> None:
        self.received = True
        if self._watchdog is not None:
            self._last_data = self._clock.seconds()
        if self._upgraded and not self._buffer:
            # the frames read straight from ``data`` (what etcd sends: a watch response, each
            # read holding one or a few), not copied into the buffer first; a partial one waits there
            self._buffer += data[self._read_frames(data):]
            return
        self._buffer += data
        if not self._upgraded and not self._read_head():
            return
        del self._buffer[:self._read_frames(self._buffer)]

    def _read_head(self) -> bool:
        """Parse the answer to the upgrade; True once upgraded."""
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > _MAX_HEAD:
                self._refused(f"an answer head over {_MAX_HEAD} bytes")
            return False
        head = bytes(self._buffer[:end]).decode("latin-1")
        status, *lines = head.split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if status.split(" ", 2)[1:2] != ["101"]:
            body = bytes(self._buffer[end + 4:end + 4 + 200]).decode("utf-8", "replace")
            self._refused(f"{status!r} {body!r}")
            return False
        if headers.get("sec-websocket-accept", "").encode("ascii", "replace") != accept_key(self._key):
            self._refused("an upgrade with a wrong Sec-WebSocket-Accept")
            return False
        del self._buffer[:end + 4]
        self._upgraded = True
        self.opened.callback(None)
        return True

    def _refused(self, what: str) -> None:
        if not self.opened.called:
            self.opened.errback(StorageError(f"etcd did not open a WebSocket for {self._path.decode()}: "
                                             f"it answered {what}"))
        self.abort()

    def _read_frames(self, buffer: Union[bytes, bytearray]) -> int:
        """Handle the whole frames at the start of ``buffer``; how many bytes they took."""
        size = len(buffer)
        pos = 0
        while size - pos >= 2 and self.transport is not None:
            first, second = buffer[pos], buffer[pos + 1]
            length = second & 0x7F
            head = 2
            if length == 126:
                if size - pos < 4:
                    break
                length = int.from_bytes(buffer[pos + 2:pos + 4], "big")
                head = 4
            elif length == 127:
                if size - pos < 10:
                    break
                length = int.from_bytes(buffer[pos + 2:pos + 10], "big")
                head = 10
            key = None
            if second & 0x80:  # a server must not mask, but reading it costs nothing
                if size - pos < head + 4:
                    break
                key = bytes(buffer[pos + head:pos + head + 4])
                head += 4
            if size - pos < head + length:
                break
            payload = bytes(buffer[pos + head:pos + head + length])
            pos += head + length
            self._frame(bool(first & 0x80), first & 0x0F, mask(payload, key) if key else payload)
        return pos

    def _frame(self, final: bool, opcode: int, payload: bytes) -> None:
        if opcode in (_TEXT, _BINARY, _CONTINUATION):
            self._fragments.append(payload)
            if final:
                message = b"".join(self._fragments) if len(self._fragments) > 1 else payload
                self._fragments = []
                self._deliver(message)
        elif opcode == _PING:
            self.transport.write(frame(_PONG, payload, os.urandom(4)))  # type: ignore[union-attr]
        elif opcode == _CLOSE:
            self.transport.write(frame(_CLOSE, payload[:2], os.urandom(4)))  # type: ignore[union-attr]
            self.transport.loseConnection()  # type: ignore[union-attr]
            self.transport = None
        # a pong needs nothing

    def _deliver(self, message: bytes) -> None:
        try:
            document = orjson.loads(message)
        except orjson.JSONDecodeError:
            log.warn("undecodable message from etcd's WebSocket: {m!r}", m=message[:200])
            return
        self._on_message(document)

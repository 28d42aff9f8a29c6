"""WebSocket (RFC 6455), server side, without I/O: handshakes, an incremental frame parser, encoders.

Upstream serves WebSockets with two Go libraries, and a client sees their
differences only when something is wrong, so both handshakes are here:

* :func:`handshake_as_wsstream`: ``golang.org/x/net/websocket``'s server under
  ``wsstream.Conn`` (the exec/attach stream translator).  Its checks in order:
  ``GET`` (else 405 ``bad method``), ``Upgrade: websocket`` and ``Connection``
  containing ``upgrade`` (else 400 ``not websocket protocol``), a key (else 400
  ``mismatch challenge/response``), version 13 (else 400 with
  ``Sec-WebSocket-Version: 13``), then wsstream's subprotocol choice: the first
  protocol *in the client's order* the server supports, ``""`` standing for
  none asked; no match is a bare 403.  Refusals are written raw (status line,
  blank line, the error text) and the connection closes.
* :func:`handshake_as_gorilla`: ``gorilla/websocket``'s ``Upgrader`` (the
  port-forward tunnel): token lists for ``Connection``/``Upgrade``/version, 405
  for a method other than ``GET``, the subprotocol chosen in the *server's*
  order, refusals as ``http.Error`` with the status text and
  ``Sec-Websocket-Version: 13``.

:class:`FrameParser` reads client frames incrementally and hands out message
payloads as they arrive (``MessageStart``, ``MessageData``..., ``MessageEnd``),
so no message is ever held whole; control frames (at most 125 bytes) are.  It
enforces what RFC 6455 makes a protocol error (unmasked client frames, RSV
bits without an extension, unknown opcodes, fragmented or long control frames,
continuations out of place, invalid close codes), invalid UTF-8 in text
messages and close reasons (1007) and a maximum message size (1009); each
raises :class:`WebSocketProtocolError` with the close code to send.

Encoders write unmasked server frames (:func:`encode_frame`), and masked client
frames (:func:`encode_client_frame`) for tests and tools.
"""
from __future__ import annotations

import base64
import codecs
import hashlib
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Union

from kapiserver.machinery.httpstream import heads

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SUPPORTED_VERSION = b"13"
# golang.org/x/net/websocket's DefaultMaxPayloadBytes: the largest message it reads
DEFAULT_MAX_MESSAGE_SIZE = 32 << 20
MAX_CONTROL_PAYLOAD = 125


class Opcode(IntEnum):
    CONTINUATION = 0x0
    TEXT = 0x1
    BINARY = 0x2
    CLOSE = 0x8
    PING = 0x9
    PONG = 0xA


class CloseCode(IntEnum):
    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    UNSUPPORTED_DATA = 1003
    NO_STATUS = 1005  # never sent: a close frame without a code
    ABNORMAL = 1006  # never sent: the connection ended without a close frame
    INVALID_PAYLOAD = 1007
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    MANDATORY_EXTENSION = 1010
    INTERNAL_ERROR = 1011


# Codes a close frame may carry (RFC 6455 7.4.1, and the IANA registry's 1012-1014)
_SENDABLE_CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014})


def close_code_is_valid(code: int) -> bool:
    return code in _SENDABLE_CLOSE_CODES or 3000 <= code <= 4999


# ---------------------------------------------------------------- handshake


def accept_key(key: bytes) -> bytes:
    """``Sec-WebSocket-Accept`` for a ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


@dataclass(frozen=True)
class HandshakeAccepted:
    protocol: str  # the subprotocol chosen, "" for none
    response: bytes  # the 101 head to write

    @property
    def code(self) -> int:
        return 101


@dataclass(frozen=True)
class HandshakeRejected:
    code: int
    response: bytes  # the whole answer; the connection closes after it
    reason: str  # why, for the log


HandshakeResult = Union[HandshakeAccepted, HandshakeRejected]


def _accept_response(key: bytes, protocol: str) -> bytes:
    lines = [b"HTTP/1.1 101 Switching Protocols\r\n", b"Upgrade: websocket\r\n", b"Connection: Upgrade\r\n",
             b"Sec-WebSocket-Accept: " + accept_key(key) + b"\r\n"]
    if protocol:
        lines.append(b"Sec-WebSocket-Protocol: " + protocol.encode("latin-1") + b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def requested_protocols(headers: heads.HeaderList) -> list[str]:
    """The subprotocols of the first ``Sec-WebSocket-Protocol`` header, trimmed, in order
    (both libraries read only the first header)."""
    value = heads.header_get(headers, b"Sec-WebSocket-Protocol").decode("latin-1").strip()
    if not value:
        return []
    return [item.strip() for item in value.split(",")]


def handshake_as_wsstream(method: bytes, headers: heads.HeaderList, supported: Sequence[str]) -> HandshakeResult:
    """The handshake of ``wsstream.Conn.Open`` (golang.org/x/net/websocket's server with
    wsstream's protocol choice); ``supported`` are the subprotocols served ("" allows none)."""
    def refuse(code: int, text: str, extra: heads.HeaderList = ()) -> HandshakeRejected:
        return HandshakeRejected(code, heads.raw_rejection(code, text, extra), text)

    if method != b"GET":
        return refuse(405, "bad method")
    if (heads.header_get(headers, b"Upgrade").lower() != b"websocket"
            or b"upgrade" not in heads.header_get(headers, b"Connection").lower()):
        return refuse(400, "not websocket protocol")
    key = heads.header_get(headers, b"Sec-WebSocket-Key")
    if not key:
        return refuse(400, "mismatch challenge/response")
    if heads.header_get(headers, b"Sec-WebSocket-Version") != SUPPORTED_VERSION:
        return refuse(400, "missing or bad WebSocket Version", ((b"Sec-WebSocket-Version", SUPPORTED_VERSION),))
    requested = requested_protocols(headers)
    for protocol in requested or [""]:
        if protocol in supported:
            return HandshakeAccepted(protocol, _accept_response(key, protocol))
    # x/net answers a failed Handshake func with a bare 403; the reason is only logged
    reason = f"requested protocol(s) are not supported: {requested}; supports {list(supported)}"
    return HandshakeRejected(403, heads.raw_rejection(403, ""), reason)


def handshake_as_gorilla(method: bytes, headers: heads.HeaderList, supported: Sequence[str], *,
                         date: bytes | None = None, extra_headers: heads.HeaderList = ()) -> HandshakeResult:
    """The handshake of gorilla/websocket's ``Upgrader.Upgrade`` (origins not checked, as the
    tunnelling handler configures it); the subprotocol is the first of ``supported`` the
    client asked for, none if there is no match.  ``extra_headers`` go on a refusal."""
    bad = "websocket: the client is not using the websocket protocol: "

    def refuse(code: int, reason: str) -> HandshakeRejected:
        answer = heads.text_error(code, heads.reason_phrase(code).decode(),
                                  extra_headers=((b"Sec-Websocket-Version", SUPPORTED_VERSION), *extra_headers),
                                  date=date)
        return HandshakeRejected(code, answer, reason)

    if not heads.contains_token(headers, b"Connection", "upgrade"):
        return refuse(400, bad + "'upgrade' token not found in 'Connection' header")
    if not heads.contains_token(headers, b"Upgrade", "websocket"):
        return refuse(400, bad + "'websocket' token not found in 'Upgrade' header")
    if method != b"GET":
        return refuse(405, bad + "request method is not GET")
    if not heads.contains_token(headers, b"Sec-Websocket-Version", "13"):
        return refuse(400, "websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header")
    key = heads.header_get(headers, b"Sec-WebSocket-Key")
    if not key:
        return refuse(400, "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header is missing or blank")
    requested = requested_protocols(headers)
    chosen = next((protocol for protocol in supported if protocol in requested), "")
    return HandshakeAccepted(chosen, _accept_response(key, chosen))


# ---------------------------------------------------------------- frames


class WebSocketProtocolError(Exception):
    """The peer broke the protocol: close the connection with ``close_code``.  ``events``
    are what the same ``feed`` read before the error (to be handled first)."""

    def __init__(self, close_code: int, message: str) -> None:
        super().__init__(message)
        self.close_code = close_code
        self.message = message
        self.events: list["Event"] = []


@dataclass(frozen=True)
class MessageStart:
    opcode: Opcode  # TEXT or BINARY


@dataclass(frozen=True)
class MessageData:
    data: bytes  # a piece of the current message, unmasked


@dataclass(frozen=True)
class MessageEnd:
    pass


@dataclass(frozen=True)
class Ping:
    payload: bytes


@dataclass(frozen=True)
class Pong:
    payload: bytes


@dataclass(frozen=True)
class Close:
    code: int | None  # None: the frame had no code (1005)
    reason: str


Event = Union[MessageStart, MessageData, MessageEnd, Ping, Pong, Close]


def _xor(data: bytes, mask: bytes, offset: int) -> bytes:
    """``data`` XOR the 4-byte ``mask`` started ``offset`` bytes into the mask's cycle."""
    size = len(data)
    if not size:
        return data
    shift = offset % 4
    key = mask[shift:] + mask[:shift]
    stream = key * (size // 4 + 1)
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream[:size], "big")).to_bytes(size, "big")


_HEADER, _PAYLOAD, _CONTROL, _CLOSED = range(4)


class FrameParser:
    """Client frames in, events out; raises :class:`WebSocketProtocolError`.

    ``masked``: whether frames must be masked (True for a server reading its
    clients; False to read a server's frames in tests).  ``max_message_size``
    bounds a message's total payload (None: no bound).  After a ``Close`` event
    nothing more is read.
    """

    def __init__(self, *, masked: bool = True, max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self._masked = masked
        self._max_message_size = max_message_size
        self._buffer = bytearray()
        self._state = _HEADER
        # the frame being read
        self._opcode = Opcode.CONTINUATION
        self._fin = False
        self._mask = b""
        self._remaining = 0
        self._offset = 0  # payload bytes of this frame already read (the mask's position)
        # the message being read
        self._in_message = False
        self._message_opcode = Opcode.BINARY
        self._message_size = 0
        self._utf8: codecs.IncrementalDecoder | None = None

    @property
    def closed(self) -> bool:
        return self._state == _CLOSED

    def feed(self, data: bytes) -> list[Event]:
        if self._state == _CLOSED:
            return []
        self._buffer += data
        events: list[Event] = []
        position = 0
        buffer = self._buffer
        try:
            while self._state != _CLOSED:
                if self._state == _HEADER:
                    used = self._read_header(buffer, position, events)
                    if not used:
                        break
                    position += used
                elif self._state == _PAYLOAD:
                    available = len(buffer) - position
                    if not available and self._remaining:
                        break
                    take = min(available, self._remaining)
                    chunk = bytes(buffer[position:position + take])
                    position += take
                    self._data_piece(chunk, events)
                else:  # _CONTROL: the whole payload is needed
                    if len(buffer) - position < self._remaining:
                        break
                    payload = bytes(buffer[position:position + self._remaining])
                    position += self._remaining
                    self._control(payload, events)
        except WebSocketProtocolError as exc:
            self._state = _CLOSED  # nothing more is read from a connection being failed
            exc.events = events
            raise
        finally:
            del buffer[:position]
        return events

    def _read_header(self, buffer: bytearray, position: int, events: list[Event]) -> int:
        available = len(buffer) - position
        if available < 2:
            return 0
        first, second = buffer[position], buffer[position + 1]
        length = second & 0x7F
        size = 2
        if length == 126:
            size = 4
        elif length == 127:
            size = 10
        masked = bool(second & 0x80)
        if masked:
            size += 4
        if available < size:
            return 0
        if length == 126:
            (length,) = struct.unpack_from("!H", buffer, position + 2)
        elif length == 127:
            (length,) = struct.unpack_from("!Q", buffer, position + 2)
            if length >> 63:
                raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, "the most significant bit of a 64-bit length is set")
        if first & 0x70:
            raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, f"reserved bits 0x{first & 0x70:02x} set without an extension")
        try:
            opcode = Opcode(first & 0x0F)
        except ValueError:
            raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, f"unknown opcode {first & 0x0F}") from None
        if masked != self._masked:
            raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR,
                                         "an unmasked client frame" if self._masked else "a masked server frame")
        fin = bool(first & 0x80)
        self._mask = bytes(buffer[position + size - 4:position + size]) if masked else b""
        self._fin = fin
        self._opcode = opcode
        self._remaining = length
        self._offset = 0
        if opcode >= Opcode.CLOSE:
            if not fin:
                raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, f"a fragmented control frame ({opcode.name})")
            if length > MAX_CONTROL_PAYLOAD:
                raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR,
                                             f"a {opcode.name} frame of {length} bytes (at most {MAX_CONTROL_PAYLOAD})")
            self._state = _CONTROL
            return size
        if opcode == Opcode.CONTINUATION:
            if not self._in_message:
                raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, "a continuation frame outside a fragmented message")
        else:
            if self._in_message:
                raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR,
                                             f"a {opcode.name} frame inside a fragmented message")
            self._in_message = True
            self._message_opcode = opcode
            self._message_size = 0
            self._utf8 = codecs.getincrementaldecoder("utf-8")() if opcode == Opcode.TEXT else None
            events.append(MessageStart(opcode))
        self._message_size += length
        if self._max_message_size is not None and self._message_size > self._max_message_size:
            raise WebSocketProtocolError(CloseCode.MESSAGE_TOO_BIG,
                                         f"a message over {self._max_message_size} bytes")
        self._state = _PAYLOAD
        if length == 0:
            self._data_piece(b"", events)
        return size

    def _unmask(self, data: bytes) -> bytes:
        if self._mask:
            data = _xor(data, self._mask, self._offset)
        self._offset += len(data)
        return data

    def _data_piece(self, chunk: bytes, events: list[Event]) -> None:
        self._remaining -= len(chunk)
        if chunk:
            data = self._unmask(chunk)
            if self._utf8 is not None:
                self._check_utf8(data, final=False)
            events.append(MessageData(data))
        if self._remaining == 0:
            self._state = _HEADER
            if self._fin:
                if self._utf8 is not None:
                    self._check_utf8(b"", final=True)
                self._in_message = False
                self._utf8 = None
                events.append(MessageEnd())

    def _check_utf8(self, data: bytes, final: bool) -> None:
        assert self._utf8 is not None
        try:
            self._utf8.decode(data, final)
        except UnicodeDecodeError:
            raise WebSocketProtocolError(CloseCode.INVALID_PAYLOAD, "a text message that is not UTF-8") from None

    def _control(self, payload: bytes, events: list[Event]) -> None:
        payload = self._unmask(payload)
        self._state = _HEADER
        if self._opcode == Opcode.PING:
            events.append(Ping(payload))
        elif self._opcode == Opcode.PONG:
            events.append(Pong(payload))
        else:
            events.append(decode_close(payload))
            self._state = _CLOSED


def decode_close(payload: bytes) -> Close:
    """A close frame's payload; raises :class:`WebSocketProtocolError` when it is malformed."""
    if not payload:
        return Close(None, "")
    if len(payload) == 1:
        raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, "a close frame with a 1-byte payload")
    (code,) = struct.unpack_from("!H", payload)
    if not close_code_is_valid(code):
        raise WebSocketProtocolError(CloseCode.PROTOCOL_ERROR, f"a close frame with the invalid code {code}")
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise WebSocketProtocolError(CloseCode.INVALID_PAYLOAD, "a close reason that is not UTF-8") from None
    return Close(code, reason)


def encode_frame(opcode: Opcode, payload: bytes, *, fin: bool = True, mask: bytes | None = None) -> bytes:
    """One frame; unmasked (a server's) unless ``mask`` (4 bytes) is given."""
    first = (0x80 if fin else 0) | int(opcode)
    mask_bit = 0x80 if mask is not None else 0
    length = len(payload)
    if length <= 125:
        head = struct.pack("!BB", first, mask_bit | length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", first, mask_bit | 126, length)
    else:
        head = struct.pack("!BBQ", first, mask_bit | 127, length)
    if mask is None:
        return head + payload
    if len(mask) != 4:
        raise ValueError("a masking key has 4 bytes")
    return head + mask + _xor(payload, mask, 0)


def encode_client_frame(opcode: Opcode, payload: bytes, *, fin: bool = True, mask: bytes | None = None) -> bytes:
    """A masked (client) frame, with a random key unless one is given."""
    return encode_frame(opcode, payload, fin=fin, mask=os.urandom(4) if mask is None else mask)


def close_payload(code: int | None, reason: str = "") -> bytes:
    """A close frame's payload: nothing for no code, else the code and the UTF-8 reason
    (cut to fit the 125-byte limit)."""
    if code is None:
        return b""
    return struct.pack("!H", code) + reason.encode("utf-8")[:MAX_CONTROL_PAYLOAD - 2]


def encode_close(code: int | None, reason: str = "", *, mask: bytes | None = None) -> bytes:
    return encode_frame(Opcode.CLOSE, close_payload(code, reason), mask=mask)


class MessageAssembler:
    """Whole messages from a parser's events, each at most ``max_size`` bytes (for
    consumers that need them whole; the relays stream instead)."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._parts: list[bytes] = []
        self._size = 0
        self._opcode = Opcode.BINARY

    def add(self, event: Event) -> tuple[Opcode, bytes] | None:
        """The message ``event`` completes, if any; control events give None."""
        if isinstance(event, MessageStart):
            self._parts, self._size, self._opcode = [], 0, event.opcode
        elif isinstance(event, MessageData):
            self._size += len(event.data)
            if self._size > self._max_size:
                raise WebSocketProtocolError(CloseCode.MESSAGE_TOO_BIG, f"a message over {self._max_size} bytes")
            self._parts.append(event.data)
        elif isinstance(event, MessageEnd):
            message = b"".join(self._parts)
            self._parts, self._size = [], 0
            return self._opcode, message
        return None

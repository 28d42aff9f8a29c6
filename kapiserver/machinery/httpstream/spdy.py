"""SPDY/3.1 without I/O, as ``github.com/moby/spdystream`` speaks it (the kubelet's side).

Framing (spdystream's ``spdy`` package): an 8-byte head, control frames
(version 3, a type, flags, a 24-bit length) and DATA frames (a 31-bit stream
id, flags, a 24-bit length).  Header blocks (SYN_STREAM, SYN_REPLY, HEADERS)
are a count and length-prefixed lowercase names and values (several values
joined by NUL), compressed with zlib at its best level using the SPDY/3
dictionary, one compression context per direction for the whole connection,
each block ended by a sync flush.  The reader's checks are spdystream's:
stream id 0, a PING id 0, flags on PING/GOAWAY/WINDOW_UPDATE, GOAWAY and
WINDOW_UPDATE lengths, a RST_STREAM status 0, header counts and sizes,
uppercase or repeated header names, and a header block whose compressed size is
not the frame's.  Frame versions are not checked (spdystream does not).

Limits of this side: a control frame carries at most ``MAX_CONTROL_PAYLOAD``
bytes and a header block at most ``MAX_HEADER_BLOCK`` bytes once decompressed
(spdystream takes 16 MiB); DATA payloads are never held whole: the parser
hands them out as they arrive (``DataFrame`` pieces, ``fin`` on the last one).

:class:`SpdySession` is spdystream's ``Connection`` reduced to its frame
handling: odd stream ids for a client, even for a server; a stream is usable
once replied (data for a stream not yet replied to is dropped, as spdystream
drops it); the peer's PINGs are answered; after a GOAWAY nothing more is read
and every stream counts as closed by the peer; ``close()`` resets every open
stream and sends GOAWAY, as ``httpstream/spdy``'s ``connection.Close`` does.

Flow control: none.  spdystream never sends WINDOW_UPDATE and ignores it and
SETTINGS, writing every DATA frame at once; a sender that kept to SPDY/3.1's
64 KiB windows would stall after 64 KiB on a connection to a kubelet, which
never opens them.  So this session ignores windows too, and backpressure is
the transport's (TCP), as in spdystream, whose reader stops when a stream's
reader does.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Union

VERSION = 3
HEADER_SPDY31 = "SPDY/3.1"
MAX_DATA_LENGTH = (1 << 24) - 1
MAX_STREAM_ID = 0x7FFFFFFF
MAX_CONTROL_PAYLOAD = 1 << 20
MAX_HEADER_BLOCK = 1 << 20
MAX_HEADER_COUNT = 1000  # spdystream's defaultMaxHeaderCount
MAX_HEADER_FIELD = 1 << 20  # spdystream's defaultMaxHeaderFieldSize


class FrameType(IntEnum):
    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9


FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
FLAG_SETTINGS_CLEAR = 0x01


class RstStatus(IntEnum):
    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    UNSUPPORTED_VERSION = 4
    CANCEL = 5
    INTERNAL_ERROR = 6
    FLOW_CONTROL_ERROR = 7
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9
    INVALID_CREDENTIALS = 10
    FRAME_TOO_LARGE = 11


class GoAwayStatus(IntEnum):
    OK = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


# The SPDY/3 header dictionary (draft 3, 2.6.10.1): length-prefixed words, then a text.
_DICTIONARY_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin",
)
_DICTIONARY_TEXT = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
HEADER_DICTIONARY = b"".join(struct.pack("!I", len(word)) + word.encode() for word in _DICTIONARY_WORDS) \
    + _DICTIONARY_TEXT.encode()

# A header block: lowercase names, each with its values in order.
Headers = dict[str, list[str]]


def headers_from(items: Mapping[str, str | list[str]] | Iterable[tuple[str, str]]) -> Headers:
    """A header block from names and values (names lowercased, repeated names gathered)."""
    pairs = items.items() if isinstance(items, Mapping) else items
    block: Headers = {}
    for name, value in pairs:
        values = value if isinstance(value, list) else [value]
        block.setdefault(name.lower(), []).extend(values)
    return block


class SpdyError(Exception):
    """The peer broke the protocol (spdystream's ``spdy.Error``); the connection is done."""

    def __init__(self, message: str, stream_id: int = 0) -> None:
        super().__init__(message if not stream_id else f"{message} (stream {stream_id})")
        self.stream_id = stream_id
        self.frames: list["Frame"] = []  # what the same feed read before the error
        self.events: list["SessionEvent"] = []  # a session's events for those frames


# ---------------------------------------------------------------- frames


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    associated_to: int = 0
    priority: int = 0
    slot: int = 0
    fin: bool = False
    unidirectional: bool = False


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class Setting:
    id: int
    value: int
    flags: int = 0


@dataclass(frozen=True)
class Settings:
    settings: tuple[Setting, ...] = ()
    clear: bool = False


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: int = GoAwayStatus.OK


@dataclass(frozen=True)
class HeadersFrame:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True)
class DataFrame:
    """A DATA frame, or, from the parser, a piece of one (``fin`` only on its last piece)."""
    stream_id: int
    data: bytes
    fin: bool = False


Frame = Union[SynStream, SynReply, RstStream, Settings, Ping, GoAway, HeadersFrame, WindowUpdate, DataFrame]


def _control_head(frame_type: FrameType, flags: int, length: int) -> bytes:
    if length > MAX_DATA_LENGTH:
        raise ValueError(f"a control frame of {length} bytes")
    return struct.pack("!HHI", 0x8000 | VERSION, frame_type, (flags << 24) | length)


def encode_header_block(headers: Headers) -> bytes:
    """The uncompressed block: count, then each name and its NUL-joined values."""
    parts = [struct.pack("!I", len(headers))]
    for name, values in headers.items():
        encoded_name = name.lower().encode("utf-8")
        value = "\x00".join(values).encode("utf-8")
        parts.append(struct.pack("!I", len(encoded_name)) + encoded_name + struct.pack("!I", len(value)) + value)
    return b"".join(parts)


def parse_header_block(block: bytes, stream_id: int) -> Headers:
    """spdystream's ``parseHeaderValueBlock``, which must use the whole block."""
    view = memoryview(block)
    position = 0

    def take(size: int) -> bytes:
        nonlocal position
        if position + size > len(view):
            raise SpdyError("compressed payload size was incorrect", stream_id)  # the block ends early
        chunk = bytes(view[position:position + size])
        position += size
        return chunk

    (count,) = struct.unpack("!I", take(4))
    if count > MAX_HEADER_COUNT:
        raise SpdyError(f"invalid control frame: {count} headers", stream_id)
    headers: Headers = {}
    for _ in range(count):
        (length,) = struct.unpack("!I", take(4))
        if length > MAX_HEADER_FIELD:
            raise SpdyError("invalid control frame: a header name too long", stream_id)
        name = take(length).decode("utf-8", "replace")
        if name != name.lower():
            raise SpdyError(f"header was not lowercased: {name!r}", stream_id)
        if name in headers:
            raise SpdyError(f"multiple headers with same name: {name!r}", stream_id)
        (length,) = struct.unpack("!I", take(4))
        if length > MAX_HEADER_FIELD:
            raise SpdyError("invalid control frame: a header value too long", stream_id)
        headers[name] = take(length).decode("utf-8", "replace").split("\x00")
    if position != len(view):
        raise SpdyError("compressed payload size was incorrect", stream_id)
    return headers


class HeaderCompressor:
    """One direction's zlib context (best compression, the SPDY dictionary)."""

    def __init__(self) -> None:
        self._zlib = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY,
                                      HEADER_DICTIONARY)

    def compress(self, headers: Headers) -> bytes:
        return self._zlib.compress(encode_header_block(headers)) + self._zlib.flush(zlib.Z_SYNC_FLUSH)


class HeaderDecompressor:
    """The other direction's context: each block is decompressed with what came before."""

    def __init__(self, max_block: int = MAX_HEADER_BLOCK) -> None:
        self._zlib = zlib.decompressobj(15, HEADER_DICTIONARY)
        self._max_block = max_block

    def decompress(self, compressed: bytes, stream_id: int) -> Headers:
        try:
            block = self._zlib.decompress(compressed, self._max_block + 1)
        except zlib.error as exc:
            raise SpdyError(f"header block does not decompress: {exc}", stream_id) from None
        if len(block) > self._max_block or self._zlib.unconsumed_tail:
            raise SpdyError(f"header block over {self._max_block} bytes", stream_id)
        if self._zlib.eof:
            raise SpdyError("header block ended the compression stream", stream_id)
        return parse_header_block(block, stream_id)


class FrameEncoder:
    """Frames to bytes, with this direction's header compression context."""

    def __init__(self) -> None:
        self._compressor = HeaderCompressor()

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, DataFrame):
            return self.data(frame.stream_id, frame.data, frame.fin)
        if isinstance(frame, SynStream):
            _check_stream_id(frame.stream_id)
            block = self._compressor.compress(frame.headers)
            flags = (FLAG_FIN if frame.fin else 0) | (FLAG_UNIDIRECTIONAL if frame.unidirectional else 0)
            return (_control_head(FrameType.SYN_STREAM, flags, 10 + len(block))
                    + struct.pack("!IIBB", frame.stream_id, frame.associated_to, (frame.priority & 7) << 5, frame.slot)
                    + block)
        if isinstance(frame, (SynReply, HeadersFrame)):
            _check_stream_id(frame.stream_id)
            block = self._compressor.compress(frame.headers)
            frame_type = FrameType.SYN_REPLY if isinstance(frame, SynReply) else FrameType.HEADERS
            return (_control_head(frame_type, FLAG_FIN if frame.fin else 0, 4 + len(block))
                    + struct.pack("!I", frame.stream_id) + block)
        if isinstance(frame, RstStream):
            _check_stream_id(frame.stream_id)
            return _control_head(FrameType.RST_STREAM, 0, 8) + struct.pack("!II", frame.stream_id, frame.status)
        if isinstance(frame, Settings):
            body = b"".join(struct.pack("!II", (setting.flags << 24) | setting.id, setting.value)
                            for setting in frame.settings)
            return (_control_head(FrameType.SETTINGS, FLAG_SETTINGS_CLEAR if frame.clear else 0, 4 + len(body))
                    + struct.pack("!I", len(frame.settings)) + body)
        if isinstance(frame, Ping):
            return _control_head(FrameType.PING, 0, 4) + struct.pack("!I", frame.ping_id)
        if isinstance(frame, GoAway):
            return _control_head(FrameType.GOAWAY, 0, 8) + struct.pack("!II", frame.last_good_stream_id, frame.status)
        if isinstance(frame, WindowUpdate):
            return _control_head(FrameType.WINDOW_UPDATE, 0, 8) + struct.pack("!II", frame.stream_id, frame.delta)
        raise TypeError(f"not a SPDY frame: {frame!r}")

    @staticmethod
    def data(stream_id: int, data: bytes, fin: bool = False) -> bytes:
        """DATA frames carrying ``data`` (several when it is over a frame's 16 MiB)."""
        _check_stream_id(stream_id)
        frames = []
        view = memoryview(data)
        while True:
            piece = view[:MAX_DATA_LENGTH]
            view = view[MAX_DATA_LENGTH:]
            last = not view
            flags = FLAG_FIN if fin and last else 0
            frames.append(struct.pack("!II", stream_id, (flags << 24) | len(piece)) + piece)
            if last:
                return b"".join(frames)


def _check_stream_id(stream_id: int) -> None:
    if not 0 < stream_id <= MAX_STREAM_ID:
        raise ValueError(f"stream id {stream_id} is not in 1..2^31-1")


_HEAD, _DATA, _CONTROL, _DISCARD = range(4)


class FrameParser:
    """Bytes to frames, with the peer's header compression context; raises :class:`SpdyError`.

    DATA payloads come out in pieces as they arrive; a control frame once whole.
    """

    def __init__(self, max_control_payload: int = MAX_CONTROL_PAYLOAD, max_header_block: int = MAX_HEADER_BLOCK) -> None:
        self._buffer = bytearray()
        self._state = _HEAD
        self._max_control_payload = max_control_payload
        self._decompressor = HeaderDecompressor(max_header_block)
        self._remaining = 0
        self._stream_id = 0
        self._flags = 0
        self._frame_type = 0

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        buffer = self._buffer
        position = 0
        frames: list[Frame] = []
        try:
            while True:
                available = len(buffer) - position
                if self._state == _HEAD:
                    if available < 8:
                        break
                    first, flags_length = struct.unpack_from("!II", buffer, position)
                    position += 8
                    flags, length = flags_length >> 24, flags_length & 0xFFFFFF
                    self._flags, self._remaining = flags, length
                    if first & 0x80000000:
                        self._frame_type = first & 0xFFFF
                        if length > self._max_control_payload:
                            raise SpdyError(f"invalid control frame: {length} bytes (at most {self._max_control_payload})")
                        self._state = _CONTROL
                    else:
                        self._stream_id = first & 0x7FFFFFFF
                        if self._stream_id == 0:
                            raise SpdyError("stream id zero is disallowed")
                        self._state = _DATA
                        if length == 0:
                            frames.append(DataFrame(self._stream_id, b"", bool(flags & FLAG_FIN)))
                            self._state = _HEAD
                elif self._state == _DATA:
                    if not available:
                        break
                    take = min(available, self._remaining)
                    self._remaining -= take
                    last = self._remaining == 0
                    frames.append(DataFrame(self._stream_id, bytes(buffer[position:position + take]),
                                            last and bool(self._flags & FLAG_FIN)))
                    position += take
                    if last:
                        self._state = _HEAD
                else:
                    if available < self._remaining:
                        break
                    payload = bytes(buffer[position:position + self._remaining])
                    position += self._remaining
                    self._state = _HEAD
                    frames.append(self._control(self._frame_type, self._flags, payload))
        except SpdyError as exc:
            exc.frames = frames
            raise
        finally:
            del buffer[:position]
        return frames

    def _control(self, frame_type: int, flags: int, payload: bytes) -> Frame:
        length = len(payload)

        def need(size: int, what: str) -> None:
            if length < size:
                raise SpdyError(f"invalid control frame: {what} of {length} bytes")

        if frame_type == FrameType.SYN_STREAM:
            need(10, "SYN_STREAM")
            stream_id, associated, priority, slot = struct.unpack_from("!IIBB", payload)
            stream_id &= MAX_STREAM_ID
            headers = self._decompressor.decompress(payload[10:], stream_id)
            if stream_id == 0:
                raise SpdyError("stream id zero is disallowed")
            return SynStream(stream_id, headers, associated & MAX_STREAM_ID, priority >> 5, slot,
                             bool(flags & FLAG_FIN), bool(flags & FLAG_UNIDIRECTIONAL))
        if frame_type in (FrameType.SYN_REPLY, FrameType.HEADERS):
            need(4, FrameType(frame_type).name)
            (stream_id,) = struct.unpack_from("!I", payload)
            stream_id &= MAX_STREAM_ID
            headers = self._decompressor.decompress(payload[4:], stream_id)
            if stream_id == 0:
                raise SpdyError("stream id zero is disallowed")
            if frame_type == FrameType.SYN_REPLY:
                return SynReply(stream_id, headers, bool(flags & FLAG_FIN))
            return HeadersFrame(stream_id, headers, bool(flags & FLAG_FIN))
        if frame_type == FrameType.RST_STREAM:
            need(8, "RST_STREAM")
            stream_id, status = struct.unpack_from("!II", payload)
            stream_id &= MAX_STREAM_ID
            if status == 0:
                raise SpdyError("invalid control frame: RST_STREAM with status 0", stream_id)
            if stream_id == 0:
                raise SpdyError("stream id zero is disallowed")
            return RstStream(stream_id, status)
        if frame_type == FrameType.SETTINGS:
            need(4, "SETTINGS")
            (count,) = struct.unpack_from("!I", payload)
            if count > (length - 4) // 8:
                raise SpdyError(f"invalid control frame: SETTINGS with {count} entries in {length} bytes")
            entries = []
            for index in range(count):
                flag_id, value = struct.unpack_from("!II", payload, 4 + 8 * index)
                entries.append(Setting(flag_id & 0xFFFFFF, value, flag_id >> 24))
            return Settings(tuple(entries), bool(flags & FLAG_SETTINGS_CLEAR))
        if frame_type == FrameType.PING:
            need(4, "PING")
            (ping_id,) = struct.unpack_from("!I", payload)
            if ping_id == 0:
                raise SpdyError("stream id zero is disallowed: PING id 0")
            if flags:
                raise SpdyError(f"invalid control frame: PING with flags 0x{flags:02x}")
            return Ping(ping_id)
        if frame_type == FrameType.GOAWAY:
            if flags or length != 8:
                raise SpdyError(f"invalid control frame: GOAWAY with flags 0x{flags:02x}, {length} bytes")
            last_good, status = struct.unpack_from("!II", payload)
            return GoAway(last_good & MAX_STREAM_ID, status)
        if frame_type == FrameType.WINDOW_UPDATE:
            if flags or length != 8:
                raise SpdyError(f"invalid control frame: WINDOW_UPDATE with flags 0x{flags:02x}, {length} bytes")
            stream_id, delta = struct.unpack_from("!II", payload)
            return WindowUpdate(stream_id & MAX_STREAM_ID, delta & 0x7FFFFFFF)
        raise SpdyError(f"invalid control frame: unknown type {frame_type}")


# ---------------------------------------------------------------- the session


@dataclass(frozen=True)
class StreamOpened:
    """The peer opened a stream (a server's view); reply to it before it carries data."""
    stream_id: int
    headers: Headers
    fin: bool


@dataclass(frozen=True)
class StreamReplied:
    stream_id: int
    headers: Headers


@dataclass(frozen=True)
class StreamData:
    stream_id: int
    data: bytes


@dataclass(frozen=True)
class StreamEnded:
    """The peer will send nothing more on the stream (FIN, or the connection went away)."""
    stream_id: int


@dataclass(frozen=True)
class StreamReset:
    stream_id: int
    status: int
    replied: bool  # False: the peer refused a stream this side opened


@dataclass(frozen=True)
class HeadersReceived:
    stream_id: int
    headers: Headers


@dataclass(frozen=True)
class PingAnswered:
    ping_id: int


@dataclass(frozen=True)
class GoAwayReceived:
    last_good_stream_id: int
    status: int


SessionEvent = Union[StreamOpened, StreamReplied, StreamData, StreamEnded, StreamReset, HeadersReceived,
                     PingAnswered, GoAwayReceived]


@dataclass
class Stream:
    stream_id: int
    headers: Headers
    initiated_here: bool
    replied: bool = False
    local_closed: bool = False  # FIN or RST sent (spdystream's "finished")
    remote_closed: bool = False  # FIN or RST received, or the connection went away
    reply_headers: Headers = field(default_factory=dict)


class SpdyStateError(Exception):
    """This side asked for something its state does not allow (a programming error)."""


class SpdySession:
    """spdystream's ``Connection`` frame handling, without I/O.

    ``receive(data)`` returns events (raising :class:`SpdyError` when the peer
    breaks the protocol); every action queues bytes for ``data_to_send()``.
    """

    def __init__(self, *, client: bool, max_control_payload: int = MAX_CONTROL_PAYLOAD) -> None:
        self.client = client
        self._parser = FrameParser(max_control_payload)
        self._encoder = FrameEncoder()
        self._outgoing: list[bytes] = []
        self.streams: dict[int, Stream] = {}
        self._next_stream_id = 1 if client else 2
        self._next_peer_stream_id = 2 if client else 1  # spdystream's receivedStreamId
        self._next_ping_id = 1 if client else 2
        self._pings_waiting: set[int] = set()
        self.gone_away = False  # GOAWAY sent or received: no new streams
        self.peer_gone_away = False  # GOAWAY received: nothing more is read

    # -- output

    def data_to_send(self) -> bytes:
        data = b"".join(self._outgoing)
        self._outgoing.clear()
        return data

    def _send(self, frame: Frame) -> None:
        self._outgoing.append(self._encoder.encode(frame))

    # -- actions

    def open_stream(self, headers: Headers, *, fin: bool = False) -> int:
        """SYN_STREAM; the stream carries data once the peer has replied."""
        if self.gone_away:
            raise SpdyStateError("no new stream after GOAWAY")
        stream_id = self._next_stream_id
        if stream_id > MAX_STREAM_ID:
            raise SpdyStateError("Unable to get new stream id")
        self._next_stream_id += 2
        self.streams[stream_id] = Stream(stream_id, headers, initiated_here=True, local_closed=fin)
        self._send(SynStream(stream_id, headers, fin=fin))
        return stream_id

    def reply(self, stream_id: int, headers: Headers | None = None, *, fin: bool = False) -> None:
        """SYN_REPLY to a stream the peer opened (k8s replies with no headers)."""
        stream = self._stream(stream_id)
        if stream.initiated_here:
            raise SpdyStateError("cannot reply on initiated stream")
        if stream.replied:
            return
        stream.replied = True
        self._send(SynReply(stream_id, headers or {}, fin=fin))
        if fin:
            self._finish_locally(stream)

    def send_data(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        stream = self._stream(stream_id)
        if not stream.replied:
            raise SpdyStateError(f"stream {stream_id} has no reply yet")
        if stream.local_closed:
            raise SpdyStateError("Write on closed stream")
        self._outgoing.append(FrameEncoder.data(stream_id, data, fin))
        if fin:
            self._finish_locally(stream)

    def close_stream(self, stream_id: int) -> None:
        """This side's half-close: an empty DATA frame with FIN (``Stream.Close``)."""
        self.send_data(stream_id, b"", fin=True)

    def reset_stream(self, stream_id: int, status: int = RstStatus.CANCEL) -> None:
        """``Stream.Reset``: the stream is gone; RST_STREAM unless this side had finished it."""
        stream = self.streams.pop(stream_id, None)
        if stream is None:
            return
        stream.remote_closed = True
        if not stream.local_closed:
            stream.local_closed = True
            self._send(RstStream(stream_id, status))

    def ping(self) -> int:
        ping_id = self._next_ping_id
        self._next_ping_id = ping_id - 0x7FFFFFFE if ping_id > 0x7FFFFFFE else ping_id + 2
        self._pings_waiting.add(ping_id)
        self._send(Ping(ping_id))
        return ping_id

    def go_away(self, status: int = GoAwayStatus.OK) -> None:
        """GOAWAY naming the last stream the peer opened (spdystream's ``Close``); once."""
        if self.gone_away:
            return
        self.gone_away = True
        last = self._next_peer_stream_id - 2 if self._next_peer_stream_id > 2 else 0
        self._send(GoAway(last, status))

    def close(self) -> None:
        """``connection.Close`` of k8s' httpstream/spdy: reset every stream, then GOAWAY."""
        for stream_id in list(self.streams):
            self.reset_stream(stream_id)
        self.go_away()

    def _stream(self, stream_id: int) -> Stream:
        try:
            return self.streams[stream_id]
        except KeyError:
            raise SpdyStateError(f"no stream {stream_id}") from None

    def _finish_locally(self, stream: Stream) -> None:
        stream.local_closed = True
        if stream.remote_closed:
            self.streams.pop(stream.stream_id, None)

    def _finish_remotely(self, stream: Stream, events: list[SessionEvent]) -> None:
        if stream.remote_closed:
            return
        stream.remote_closed = True
        events.append(StreamEnded(stream.stream_id))
        if stream.local_closed:
            self.streams.pop(stream.stream_id, None)

    # -- input

    def receive(self, data: bytes) -> list[SessionEvent]:
        """Events for ``data``; on a protocol error, raises :class:`SpdyError` whose
        ``events`` are those of the frames before the bad one (spdystream handles them)."""
        if self.peer_gone_away:
            return []  # spdystream stops reading at GOAWAY
        events: list[SessionEvent] = []
        try:
            frames = self._parser.feed(data)
        except SpdyError as exc:
            self._handle_all(exc.frames, events)
            exc.events = events
            self.peer_gone_away = True  # the connection is done: nothing more is read
            raise
        self._handle_all(frames, events)
        return events

    def _handle_all(self, frames: list[Frame], events: list[SessionEvent]) -> None:
        for frame in frames:
            self._handle(frame, events)
            if self.peer_gone_away:
                return

    def _handle(self, frame: Frame, events: list[SessionEvent]) -> None:
        if isinstance(frame, DataFrame):
            stream = self.streams.get(frame.stream_id)
            # spdystream drops data for streams it does not know, has no reply for, or were closed
            if stream is None or not stream.replied or stream.remote_closed:
                return
            if frame.data:
                events.append(StreamData(frame.stream_id, frame.data))
            if frame.fin:
                self._finish_remotely(stream, events)
        elif isinstance(frame, SynStream):
            if self.gone_away:
                return
            if frame.stream_id < self._next_peer_stream_id:
                self._send(RstStream(frame.stream_id, RstStatus.PROTOCOL_ERROR))
                return
            self._next_peer_stream_id = frame.stream_id + 2
            stream = Stream(frame.stream_id, frame.headers, initiated_here=False,
                            local_closed=frame.unidirectional, remote_closed=frame.fin)
            self.streams[frame.stream_id] = stream
            events.append(StreamOpened(frame.stream_id, frame.headers, frame.fin))
        elif isinstance(frame, SynReply):
            stream = self.streams.get(frame.stream_id)
            if stream is None or stream.replied:
                return
            stream.replied = True
            stream.reply_headers = frame.headers
            events.append(StreamReplied(frame.stream_id, frame.headers))
            if frame.fin:
                self._finish_remotely(stream, events)
        elif isinstance(frame, RstStream):
            stream = self.streams.pop(frame.stream_id, None)
            if stream is None:
                return
            was_replied = stream.replied
            stream.replied = True
            stream.remote_closed = stream.local_closed = True
            events.append(StreamReset(frame.stream_id, frame.status, was_replied))
        elif isinstance(frame, HeadersFrame):
            stream = self.streams.get(frame.stream_id)
            if stream is None or not stream.replied or stream.remote_closed:
                return
            events.append(HeadersReceived(frame.stream_id, frame.headers))
            if frame.fin:
                self._finish_remotely(stream, events)
        elif isinstance(frame, Ping):
            if (frame.ping_id & 1) != (self._next_ping_id & 1):
                self._send(frame)  # the peer's ping: echo it
            elif frame.ping_id in self._pings_waiting:
                self._pings_waiting.discard(frame.ping_id)
                events.append(PingAnswered(frame.ping_id))
        elif isinstance(frame, GoAway):
            self.peer_gone_away = True
            self.gone_away = True
            events.append(GoAwayReceived(frame.last_good_stream_id, frame.status))
            for stream in list(self.streams.values()):
                self._finish_remotely(stream, events)
        # SETTINGS and WINDOW_UPDATE: spdystream ignores them, and so does this side

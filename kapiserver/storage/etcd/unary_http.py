"""HTTP/1.1 for the gateway's unary calls: ``UnaryHTTPClient``.

Every storage operation on etcd is one POST to the JSON gateway (a range, a
txn, a lease call), so what one POST costs this process is paid on every GET
and every write.  Through treq and Twisted's ``Agent`` a call cost about
250 µs of CPU (``bench/etcd_call_cost.py``): per request, treq builds a URL, a
cookie jar view and three wrapping agents; the Agent asks the pool for a
connection through an endpoint; ``_newclient`` parses the answer line by line
into ``Headers`` and hands the body through three protocols and a handful of
Deferreds.  The gateway needs none of that: the same few paths, one content
type, no cookies, no redirects, no compression.

So unary calls use this small client: persistent connections (one request at
a time each, kept in a per-endpoint idle list), the request written as one
pre-formatted head plus the body, and the answer parsed from a buffer (status
line, the two framing headers, a ``Content-Length`` or chunked body).  It
costs about a third of the Agent's CPU per call.  Watches, which are long streams,
still go through treq (:meth:`EtcdClient.open_stream`).

Failures say whether the request can have reached etcd: a connection that
cannot be made raises the endpoint's ``ConnectError`` (never sent), one that
breaks after the request was written raises :class:`ConnectionBroke`.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from twisted.internet import defer
from twisted.internet.endpoints import connectProtocol
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.client import URI
from twisted.web.iweb import IAgentEndpointFactory

log = Logger()

# The longest response head accepted (the gateway's are about 300 bytes).
MAX_HEAD = 64 * 1024
# The longest chunk-size or trailer line accepted.
MAX_LINE = 4096


class ConnectionBroke(Exception):
    """The connection ended (or the answer was malformed) after the request was written:
    etcd may or may not have carried it out."""


class _Response:
    """The state of one response being read: framing first, then the body."""

    __slots__ = ("code", "length", "chunked", "in_trailers", "close", "body", "received")

    def __init__(self) -> None:
        self.code = 0           # until the head is read
        self.length = -1        # Content-Length, or -1 (chunked, or up to the close)
        self.chunked = False
        self.in_trailers = False  # chunked: the last chunk is read, trailer lines follow
        self.close = False      # the server closes the connection after this response
        self.body: list[bytes] = []
        self.received = 0


class GatewayConnection(Protocol):
    """One persistent HTTP/1.1 connection; one request at a time.

    ``on_idle(self)`` is called when an answer is complete and the connection
    can carry the next request; ``on_gone(self)`` when it closes.
    """

    transport: Any  # a TCP or TLS transport (abortConnection), set by makeConnection

    def __init__(self, on_idle: Callable[["GatewayConnection"], None],
                 on_gone: Callable[["GatewayConnection"], None]) -> None:
        self._on_idle = on_idle
        self._on_gone = on_gone
        self._buffer = b""
        # a chunk still arriving: its pieces, their length, and how long the buffer must get
        # before parsing can go on (so a large chunk is joined once, not once per read)
        self._arriving: list[bytes] = []
        self._arriving_bytes = 0
        self._need = 0
        self._waiting: Optional[defer.Deferred] = None
        self._response: Optional[_Response] = None
        self.gone = False

    # ------------------------------------------------------------ requests

    def post(self, head: bytes, body: bytes) -> defer.Deferred:
        """Send one request (``head`` ends with the blank line); fires with ``(code, body)``."""
        assert self._waiting is None, "one request at a time"
        self._waiting = defer.Deferred(self._cancel)
        self._response = _Response()
        self.transport.writeSequence((head, body))
        return self._waiting

    def _cancel(self, _: defer.Deferred) -> None:
        # the answer of a cancelled request would be read as the next one's: the connection goes
        self._waiting = None
        self.transport.abortConnection()

    # ------------------------------------------------------------ answers

    def dataReceived(self, data: bytes) -> None:
        if self._waiting is None:  # nothing was asked: a gateway that talks out of turn is dropped
            self.transport.abortConnection()
            return
        if self._need:
            self._arriving.append(data)
            self._arriving_bytes += len(data)
            if self._arriving_bytes < self._need:
                return
            self._buffer = b"".join(self._arriving)
            self._arriving, self._arriving_bytes, self._need = [], 0, 0
        else:
            self._buffer = self._buffer + data if self._buffer else data
        try:
            self._parse()
        except ConnectionBroke as e:
            self._fail(e)
            self.transport.abortConnection()

    def _parse(self) -> None:
        response = self._response
        assert response is not None
        if not response.code:  # the head first
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > MAX_HEAD:
                    raise ConnectionBroke(f"etcd's response head is longer than {MAX_HEAD} bytes")
                return
            _read_head(self._buffer[:end], response)
            self._buffer = self._buffer[end + 4:]
        if response.chunked:
            done = self._read_chunks(response)
        elif response.length >= 0:
            done = self._read_length(response)
        else:  # the body runs to the end of the connection
            response.body.append(self._buffer)
            self._buffer = b""
            return
        if done:
            self._finish(response)

    def _read_length(self, response: _Response) -> bool:
        want = response.length - response.received
        if len(self._buffer) < want:
            response.body.append(self._buffer)
            response.received += len(self._buffer)
            self._buffer = b""
            return False
        response.body.append(self._buffer[:want])
        response.received = response.length
        if len(self._buffer) > want:
            raise ConnectionBroke("etcd sent more than the Content-Length it announced")
        self._buffer = b""
        return True

    def _read_chunks(self, response: _Response) -> bool:
        """Consume whole chunks from the buffer; True once the last chunk and trailers are read."""
        buffer, at = self._buffer, 0
        try:
            while True:
                eol = buffer.find(b"\r\n", at)
                if eol < 0:
                    if len(buffer) - at > MAX_LINE:
                        raise ConnectionBroke("etcd sent a chunk-size or trailer line that does not end")
                    return False
                if response.in_trailers:  # lines up to a blank one
                    blank = eol == at
                    at = eol + 2
                    if not blank:
                        continue
                    if at != len(buffer):
                        raise ConnectionBroke("etcd sent data after a complete response")
                    return True
                size_text = buffer[at:eol].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise ConnectionBroke(f"etcd sent a malformed chunk size {size_text[:40]!r}") from None
                if size < 0:
                    raise ConnectionBroke("etcd sent a negative chunk size")
                if size == 0:
                    response.in_trailers = True
                    at = eol + 2
                    continue
                start = eol + 2
                if len(buffer) < start + size + 2:
                    if size > MAX_LINE:  # a large chunk: gather its pieces until it is all here
                        self._arriving = [buffer[at:]]
                        self._arriving_bytes = len(buffer) - at
                        self._need = start + size + 2 - at
                        buffer, at = b"", 0
                    return False
                if buffer[start + size:start + size + 2] != b"\r\n":
                    raise ConnectionBroke("etcd sent a chunk without its line end")
                response.body.append(buffer[start:start + size])
                at = start + size + 2
        finally:
            self._buffer = buffer[at:]

    def _finish(self, response: _Response) -> None:
        waiting, self._waiting, self._response = self._waiting, None, None
        body = response.body[0] if len(response.body) == 1 else b"".join(response.body)
        if response.close:
            if not self.gone:
                self.transport.loseConnection()
        else:
            self._on_idle(self)
        assert waiting is not None
        waiting.callback((response.code, body))

    def _fail(self, reason: BaseException) -> None:
        waiting, self._waiting, self._response = self._waiting, None, None
        if waiting is not None:
            waiting.errback(Failure(reason))

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.gone = True
        response = self._response
        if response is not None and response.code and response.length == -1 and not response.chunked:
            self._finish(response)  # a body that runs to the close is complete now
        else:
            self._fail(ConnectionBroke(f"the connection to etcd ended before the whole answer came: "
                                       f"{reason.getErrorMessage() if reason is not None else 'closed'}"))
        self._on_gone(self)


def _read_head(head: bytes, response: _Response) -> None:
    """Fill ``response``'s status and framing from a response head (without its blank line)."""
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ", 2)
    if len(status) < 2 or not status[0].startswith(b"HTTP/1."):
        raise ConnectionBroke(f"etcd sent a malformed status line {lines[0][:80]!r}")
    try:
        code = int(status[1])
    except ValueError:
        code = 0
    if not 100 <= code <= 999:
        raise ConnectionBroke(f"etcd sent a malformed status line {lines[0][:80]!r}")
    response.code = code
    if status[0] == b"HTTP/1.0":
        response.close = True
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise ConnectionBroke(f"etcd sent a malformed header line {line[:80]!r}")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                response.length = int(value)
            except ValueError:
                raise ConnectionBroke(f"etcd sent a malformed Content-Length {value[:40]!r}") from None
            if response.length < 0:
                raise ConnectionBroke("etcd sent a negative Content-Length")
        elif name == b"transfer-encoding":
            response.chunked = value.strip().lower() == b"chunked"
            if not response.chunked:
                raise ConnectionBroke(f"etcd sent an unsupported Transfer-Encoding {value[:40]!r}")
        elif name == b"connection":
            response.close = b"close" in value.lower()
    if response.chunked:
        response.length = -1
    elif response.length < 0:
        response.close = True  # neither framing: the body ends with the connection


class UnaryHTTPClient:
    """POSTs to a few gateway endpoints over persistent connections.

    The caller bounds how many requests run at once (each takes a connection
    of its own while it runs); idle connections are kept for the next request.
    """

    def __init__(self, endpoint_factory: IAgentEndpointFactory) -> None:
        self._endpoint_factory = endpoint_factory
        self._endpoints: dict[str, tuple[IStreamClientEndpoint, bytes]] = {}
        self._idle: dict[str, list[GatewayConnection]] = {}
        self._open: set[GatewayConnection] = set()
        self._heads: dict[tuple[str, str], bytes] = {}
        self._closing: list[defer.Deferred] = []

    def resolve(self, endpoint: str) -> tuple[IStreamClientEndpoint, bytes]:
        """The client endpoint for an etcd URL and its ``Host`` header value (once per URL)."""
        known = self._endpoints.get(endpoint)
        if known is None:
            uri = URI.fromBytes(endpoint.encode("ascii"))
            host = uri.host + (b":%d" % uri.port)
            known = self._endpoints[endpoint] = (self._endpoint_factory.endpointForURI(uri), host)
        return known

    def _head(self, endpoint: str, path: str) -> bytes:
        """The request head up to the Content-Length value (formatted once per endpoint and path)."""
        head = self._heads.get((endpoint, path))
        if head is None:
            _, host = self.resolve(endpoint)
            head = self._heads[(endpoint, path)] = (
                b"POST " + path.encode("ascii") + b" HTTP/1.1\r\nHost: " + host +
                b"\r\nContent-Type: application/json\r\nContent-Length: ")
        return head

    async def post(self, endpoint: str, path: str, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` (JSON) to ``path`` at ``endpoint``; the status code and the whole body."""
        head = self._head(endpoint, path) + b"%d\r\n\r\n" % len(body)
        idle = self._idle.get(endpoint)
        connection = idle.pop() if idle else None
        if connection is None:
            where, _ = self.resolve(endpoint)
            connection = GatewayConnection(lambda c: self._idle.setdefault(endpoint, []).append(c),
                                           lambda c: self._gone(endpoint, c))
            await connectProtocol(where, connection)
            self._open.add(connection)
        return await connection.post(head, body)

    def _gone(self, endpoint: str, connection: GatewayConnection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(endpoint)
        if idle and connection in idle:
            idle.remove(connection)
        if not self._open:
            closing, self._closing = self._closing, []
            for d in closing:
                d.callback(None)

    def close(self) -> defer.Deferred:
        """Close every connection; fires when they are all closed."""
        self._idle.clear()
        if not self._open:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._closing.append(d)
        for connection in list(self._open):
            connection.transport.loseConnection()
        return d

"""Upgrade requests to a backend over HTTP/1.1 (upstream's ``UpgradeAwareHandler.tryUpgrade`` dial).

:class:`HTTPUpgradeDialer` opens a TCP (or TLS) connection, writes one
request (``GET`` or ``POST``) carrying the upgrade headers and reads the answer's head.  On ``101
Switching Protocols`` the connection is handed to the caller's protocol with
whatever followed the head; any other answer is read whole (bounded) and the
connection closed, so the caller can echo it to the client as upstream does.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer, protocol
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.interfaces import (IOpenSSLClientConnectionCreator, IProtocol, IReactorTCP, IStreamClientEndpoint,
                                         ITCPTransport)
from twisted.internet import error as net_error
from twisted.internet.error import ConnectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.endpoints.streaming.interfaces import Dial, UpgradeResponse

log = Logger()

MAX_HEAD_BYTES = 64 * 1024
# a refusal's body is echoed to the client; more than this of it is dropped
MAX_BODY_BYTES = 1024 * 1024


class UpgradeHeadError(Exception):
    """The backend's answer was no HTTP/1.1 response head we can read."""


class DialError(Exception):
    """The backend could not be reached; ``str()`` is Go's ``*net.OpError`` text, as kube-apiserver
    reports it (``dial tcp 10.200.0.2:10250: connect: connection refused``)."""


def dial_error_text(host: str, port: int, error: BaseException) -> Optional[str]:
    """Go's text for a failed TCP connect to ``host``:``port``; None when ``error`` is not one."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(error, net_error.ConnectionRefusedError):
        return f"dial tcp {address}: connect: connection refused"
    if isinstance(error, net_error.NoRouteError):
        return f"dial tcp {address}: connect: no route to host"
    if isinstance(error, (net_error.TimeoutError, net_error.TCPTimedOutError)):
        return f"dial tcp {address}: i/o timeout"
    if isinstance(error, net_error.DNSLookupError):
        return f"dial tcp: lookup {host}: no such host"
    if isinstance(error, net_error.ConnectError):
        return f"dial tcp {address}: connect: {error.osError or error}"
    return None


def format_request(method: bytes, path: bytes, host: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    lines = [method + b" " + path + b" HTTP/1.1", b"Host: " + host]
    for name, value in headers:
        if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value:
            raise ValueError("header with a line break")
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def parse_head(head: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise UpgradeHeadError(f"malformed HTTP response {lines[0][:100]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            raise UpgradeHeadError(f"malformed HTTP header line {line[:100]!r}")
        headers.append((name.strip(), value.strip()))
    return int(parts[1]), parts[2] if len(parts) > 2 else b"", headers


class _UpgradeClient(protocol.Protocol):
    """Sends the request, reads the head; then either forwards to ``target`` or reads the refusal."""

    transport: ITCPTransport

    def __init__(self, request: bytes, target: IProtocol, answered: "defer.Deferred[UpgradeResponse]") -> None:
        self.request = request
        self.target = target
        self.answered = answered
        self.buffer = b""
        self.response: Optional[UpgradeResponse] = None
        self.upgraded = False
        self.body_length: Optional[int] = None
        self.chunked = False

    def connectionMade(self) -> None:
        self.transport.write(self.request)

    def dataReceived(self, data: bytes) -> None:
        if self.upgraded:
            self.target.dataReceived(data)
            return
        self.buffer += data
        if self.response is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    self._fail(UpgradeHeadError("the response head is too large"))
                return
            raw_head, self.buffer = self.buffer[:end + 4], self.buffer[end + 4:]
            try:
                code, phrase, headers = parse_head(raw_head[:-4])
            except UpgradeHeadError as e:
                self._fail(e)
                return
            self.response = UpgradeResponse(code, phrase, headers, raw_head=raw_head)
            if code == 101:
                self._upgrade()
                return
            length = self.response.header(b"content-length")
            self.chunked = b"chunked" in self.response.header(b"transfer-encoding").lower()
            self.body_length = int(length) if length.isdigit() else None
        self._read_refusal()

    def _upgrade(self) -> None:
        assert self.response is not None
        self.upgraded = True
        rest, self.buffer = self.buffer, b""
        self.target.makeConnection(self.transport)
        answered, self.answered = self.answered, None  # type: ignore[assignment]
        answered.callback(self.response)
        if rest:
            self.target.dataReceived(rest)

    def _read_refusal(self) -> None:
        body = self.buffer
        if self.chunked:
            decoded = _dechunk(body)
            if decoded is None and len(body) < MAX_BODY_BYTES:
                return
            body = decoded if decoded is not None else body
        elif self.body_length is not None:
            if len(body) < self.body_length and len(body) < MAX_BODY_BYTES:
                return
            body = body[:self.body_length]
        elif len(body) < MAX_BODY_BYTES:
            return  # delimited by the connection's end
        self._refused(body[:MAX_BODY_BYTES])

    def _refused(self, body: bytes) -> None:
        if self.answered is None or self.response is None:
            return
        self.response.body = body
        answered, self.answered = self.answered, None  # type: ignore[assignment]
        self.transport.loseConnection()
        answered.callback(self.response)

    def _fail(self, error: Exception) -> None:
        if self.answered is None:
            return
        answered, self.answered = self.answered, None  # type: ignore[assignment]
        self.transport.abortConnection()
        answered.errback(Failure(error))

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if self.upgraded:
            self.target.connectionLost(reason)
            return
        if self.response is not None:  # a refusal delimited by the end of the connection
            self._refused(self.buffer[:MAX_BODY_BYTES])
        elif self.answered is not None:
            answered, self.answered = self.answered, None  # type: ignore[assignment]
            answered.errback(reason if not reason.check(ConnectionDone) else
                             Failure(UpgradeHeadError("the backend closed the connection without an answer")))


def _dechunk(data: bytes) -> Optional[bytes]:
    """A complete chunked body decoded, or None while it is incomplete."""
    out: list[bytes] = []
    pos = 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return None
        try:
            size = int(data[pos:end].split(b";")[0], 16)
        except ValueError:
            return b"".join(out)
        if size == 0:
            return b"".join(out)
        start = end + 2
        if len(data) < start + size + 2:
            return None
        out.append(data[start:start + size])
        pos = start + size + 2


class HTTPUpgradeDialer:
    """Upgrade requests to one ``host``:``port``, over TLS when ``tls`` is given."""

    def __init__(self, reactor: IReactorTCP, host: str, port: int, tls: Optional[IOpenSSLClientConnectionCreator],
                 timeout_seconds: float, dial: Optional[Dial] = None) -> None:
        self.reactor = reactor
        self.host = host
        self.port = port
        self.tls = tls
        self.timeout_seconds = timeout_seconds
        self.dial: Dial = dial if dial is not None else tcp_dial(reactor)

    @property
    def netloc(self) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}".encode()

    def upgrade(self, path: bytes, headers: list[tuple[bytes, bytes]], protocol: IProtocol, *,
                method: bytes) -> "defer.Deferred[UpgradeResponse]":
        request = format_request(method, path, self.netloc, headers)
        endpoint = self.dial(self.host, self.port, self.timeout_seconds)
        if self.tls is not None:
            endpoint = wrapClientTLS(self.tls, endpoint)
        answered: defer.Deferred[UpgradeResponse] = defer.Deferred()
        client = _UpgradeClient(request, protocol, answered)
        connecting = endpoint.connect(_OneProtocol(client))
        connecting.addErrback(self._connect_failed, answered)
        return answered

    def _connect_failed(self, failure: Failure, answered: "defer.Deferred[UpgradeResponse]") -> None:
        if answered.called:
            return
        text = dial_error_text(self.host, self.port, failure.value) if failure.value is not None else None
        answered.errback(Failure(DialError(text)) if text is not None else failure)


def tcp_dial(reactor: IReactorTCP) -> Dial:
    """The default :class:`Dial`: TCP to the address (a name is resolved by the reactor)."""
    def dial(host: str, port: int, timeout: float) -> IStreamClientEndpoint:
        return HostnameEndpoint(reactor, host, port, timeout=timeout)
    return dial


class _OneProtocol(protocol.Factory):
    def __init__(self, proto: protocol.Protocol) -> None:
        self.proto = proto

    def buildProtocol(self, addr: object) -> protocol.Protocol:
        return self.proto


"""An in-process TCP proxy for fault tests: forward, cut, or black-hole connections.

Sits between a client under test and a real server (etcd, say), on
127.0.0.1 with an ephemeral port, inside the test's reactor.  Two faults:

* :meth:`TCPProxy.cut` drops every open connection with a RST, as a crashed
  peer or a killed process would, so the client sees the break at once;
* :meth:`TCPProxy.black_hole` simulates a network partition that the client
  cannot see: every connection stays open (no FIN, no RST) but no byte moves
  any more in either direction, and new connections are accepted and then
  ignored.  A client that only waits for the stream to end waits forever.

Connections black-holed once stay dead (their byte streams have a hole);
:meth:`TCPProxy.restore` makes *new* connections forward again.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer, protocol
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IListeningPort, ITCPTransport


class _Side(protocol.Protocol):
    """One TCP connection of the proxy; ``lost`` fires when it is closed."""

    def __init__(self) -> None:
        self.closed = False
        self.lost: defer.Deferred = defer.Deferred()

    def connectionLost(self, reason=None) -> None:
        self.closed = True
        self.lost.callback(None)

    def send(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def close(self, abort: bool = False) -> None:
        if not self.closed and self.transport is not None:
            if abort:
                ITCPTransport(self.transport).abortConnection()
            else:
                self.transport.loseConnection()


class _Upstream(_Side):
    """The proxy's connection to the target, paired with one client connection."""

    def __init__(self, peer: "_Downstream"):
        super().__init__()
        self.peer = peer

    def dataReceived(self, data: bytes) -> None:
        if not self.peer.dead:
            self.peer.send(data)

    def connectionLost(self, reason=None) -> None:
        super().connectionLost(reason)
        if not self.peer.dead:
            self.peer.close()


class _Downstream(_Side):
    """One client connection accepted by the proxy."""

    def __init__(self, proxy: "TCPProxy"):
        super().__init__()
        self.proxy = proxy
        self.dead = proxy.black_holed
        self.upstream: Optional[_Upstream] = None
        self._queued: list[bytes] = []
        self._connecting: Optional[defer.Deferred] = None

    def connectionMade(self) -> None:
        self.proxy.connections.add(self)
        self.proxy.accepted += 1
        if self.dead:
            return  # accepted, and then nothing: a black hole
        upstream = _Upstream(self)
        self._connecting = connectProtocol(TCP4ClientEndpoint(self.proxy.reactor, self.proxy.target_host,
                                                              self.proxy.target_port), upstream)
        self._connecting.addCallbacks(self._upstream_ready, lambda _: self.close())

    def _upstream_ready(self, upstream: _Upstream) -> None:
        self._connecting = None
        self.upstream = upstream
        if self.closed:
            upstream.close()
            return
        for data in self._queued:
            upstream.send(data)
        self._queued = []

    def dataReceived(self, data: bytes) -> None:
        if self.dead:
            return
        if self.upstream is None:
            self._queued.append(data)
        else:
            self.upstream.send(data)

    def connectionLost(self, reason=None) -> None:
        super().connectionLost(reason)
        # A black-holed peer never learns that the client went away: the
        # upstream side stays open until the proxy stops.
        if not self.dead:
            self.proxy.connections.discard(self)
            if self.upstream is not None:
                self.upstream.close()

    def kill(self) -> defer.Deferred:
        """Drop both sides at once (RST); fires when both are closed."""
        self.dead = True
        waits = [self.lost]
        self.close(abort=True)
        if self._connecting is not None:
            self._connecting.cancel()
        if self.upstream is not None:
            self.upstream.close(abort=True)
            waits.append(self.upstream.lost)
        self.proxy.connections.discard(self)
        return defer.gatherResults(waits)


class TCPProxy:
    """A proxy ``127.0.0.1:<port>`` → ``target_host:target_port`` (call :meth:`start` first)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1", reactor=None):
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self.target_host = target_host
        self.target_port = target_port
        self.black_holed = False
        self.connections: set[_Downstream] = set()
        self.accepted = 0  # connections accepted so far, black-holed ones included
        self._listener: Optional[IListeningPort] = None

    def start(self) -> "TCPProxy":
        """Listen on an ephemeral port of 127.0.0.1."""
        factory = protocol.Factory.forProtocol(lambda: _Downstream(self))
        self._listener = self.reactor.listenTCP(0, factory, interface="127.0.0.1")
        return self

    @property
    def port(self) -> int:
        assert self._listener is not None  # (listening)
        address = self._listener.getHost()
        assert isinstance(address, (IPv4Address, IPv6Address))
        return address.port

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``, for clients that take URLs."""
        return f"http://127.0.0.1:{self.port}"

    def black_hole(self) -> None:
        """Stop forwarding on every connection, open and future, without closing any."""
        self.black_holed = True
        for conn in self.connections:
            conn.dead = True

    def restore(self) -> None:
        """Forward again on connections accepted from now on."""
        self.black_holed = False

    async def cut(self) -> None:
        """Abort every open connection (the client sees a reset)."""
        await defer.gatherResults([conn.kill() for conn in list(self.connections)])

    async def stop(self) -> None:
        """Stop listening and close everything, black-holed connections included."""
        listener, self._listener = self._listener, None
        stopped = listener.stopListening() if listener is not None else None
        if stopped is not None:
            await stopped
        await self.cut()

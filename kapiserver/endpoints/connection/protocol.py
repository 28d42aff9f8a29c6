"""One accepted connection, and the set of them that a graceful shutdown drains.

:class:`APIConnection` is the protocol the TLS layer wraps (Twisted's
``_GenericHTTPChannelProtocol`` in its place).  From the moment the connection
is accepted the TLS handshake has ``tls_handshake_timeout`` to finish; then
ALPN's choice decides the channel: :class:`APIHTTPChannel` (HTTP/1.1) or
:class:`APIH2Connection` (HTTP/2).  Over plain TCP (the in-process test
server) HTTP/1.1 starts at once.  Every close goes through :meth:`close`,
which the connection guard (``limits.py``) bounds in time.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol

from twisted.internet import protocol
from twisted.internet.interfaces import IHalfCloseableProtocol, IHandshakeListener, INegotiated, ITCPTransport
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import alsoProvides, implementer

from kapiserver.endpoints.connection.http1 import APIHTTPChannel
from kapiserver.endpoints.connection.http2 import APIH2Connection

log = Logger()


class ConnectionGuard(Protocol):
    """The TCP side below TLS that bounds a closing connection in time (``limits.py``)."""

    def half_close(self, linger: bool) -> None:
        """FIN once the pending data is written, then bound the wait for the client's."""


class OpenConnections:
    """The site's open connections: counted, drained on shutdown, waited for."""

    def __init__(self) -> None:
        self.connections: set["APIConnection"] = set()
        self.draining = False

    def __len__(self) -> int:
        return len(self.connections)

    def add(self, connection: "APIConnection") -> None:
        self.connections.add(connection)

    def discard(self, connection: "APIConnection") -> None:
        self.connections.discard(connection)

    def drain(self) -> None:
        """No new request on any connection: idle ones close now, busy ones after their answers
        (HTTP/1.1 ``Connection: close``, HTTP/2 GOAWAY)."""
        self.draining = True
        for connection in list(self.connections):
            connection.drain()

    def unfinished(self) -> int:
        """Connections that still have something to send (or a request to answer)."""
        return sum(1 for c in self.connections if not c.write_closed)

    def abort_unfinished(self) -> None:
        """Cut what did not finish; half-closed connections keep their sent bytes (a reset would
        discard what the kernel has not delivered yet)."""
        for connection in list(self.connections):
            if not connection.write_closed:
                connection.abort()


@implementer(IHandshakeListener)
class APIConnection(protocol.Protocol):
    transport: Any

    def __init__(self, site: Any) -> None:
        self.site = site
        self.policy = site.policy
        self.reactor = site.reactor
        self.channel: Any = None
        self.guard: Optional[ConnectionGuard] = None  # set by the guard below TLS, if any
        self.closing = False
        self.lost = False
        # everything was written and the TCP write side closed (FIN): nothing is left to send
        self.write_closed = False
        self._handshake_call: Any = None
        self._close_call: Any = None
        self._linger = False

    @property
    def draining(self) -> bool:
        return bool(self.site.connections.draining)

    @property
    def peer(self) -> str:
        try:
            return str(self.transport.getPeer().host)
        except Exception:
            return "?"

    def connectionMade(self) -> None:
        self.site.connections.add(self)
        if INegotiated.providedBy(self.transport):  # TLS: ALPN decides once the handshake is done
            self._handshake_call = self.reactor.callLater(self.policy.tls_handshake_timeout,
                                                          self._handshake_timed_out)
        else:
            self._start(b"http/1.1")

    def _handshake_timed_out(self) -> None:
        self._handshake_call = None
        log.debug("closing {peer}: TLS handshake not finished in time", peer=self.peer)
        self.abort()

    def handshakeCompleted(self) -> None:
        if self._handshake_call is not None and self._handshake_call.active():
            self._handshake_call.cancel()
        self._handshake_call = None
        if self.closing or self.lost:
            return
        negotiated = INegotiated(self.transport, None)
        self._start((negotiated.negotiatedProtocol if negotiated is not None else None) or b"http/1.1")
        if self.draining:  # accepted before the listener closed: one request, then closed
            self.channel.drain()

    def _start(self, alpn: bytes) -> None:
        channel: Any = APIH2Connection(self) if alpn == b"h2" else APIHTTPChannel(self)
        channel.site = self.site
        channel.factory = self.site
        channel.requestFactory = self.site.requestFactory
        channel.callLater = self.reactor.callLater
        self.channel = channel
        channel.makeConnection(self.transport)
        if alpn == b"h2":  # HTTPChannel registers itself; H2Connection leaves it to its wrapper
            self.transport.registerProducer(channel, True)

    def dataReceived(self, data: bytes) -> None:
        if self.channel is not None and not self.closing:  # after close only the peer's close is awaited
            self.channel.dataReceived(data)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.lost = True
        if self._handshake_call is not None and self._handshake_call.active():
            self._handshake_call.cancel()
        self._handshake_call = None
        if self._close_call is not None and self._close_call.active():
            self._close_call.cancel()
        self._close_call = None
        self.site.connections.discard(self)
        if self.channel is not None:
            self.channel.connectionLost(reason)

    # ------------------------------------------------------------ ending

    def drain(self) -> None:
        if self.lost or self.closing:
            return
        if self.channel is not None:
            self.channel.drain()
        elif self._handshake_call is not None and self._handshake_call.active():
            # still in the TLS handshake: its first request may be on the way (the channel
            # drains when it starts), but it gets no more than the grace of new connections
            remaining = self._handshake_call.getTime() - self.reactor.seconds()
            if remaining > self.policy.new_connection_grace:
                self._handshake_call.reset(self.policy.new_connection_grace)

    def close(self, linger: bool = False) -> None:
        """Close after what was written: TLS close_notify, then a TCP half-close (FIN) once the
        data is sent, so the peer reads all of it; the peer then closes its side, and one that
        does not is aborted ``close_timeout`` after the FIN.  ``linger``: the peer may still be
        sending a body that is not read (reading stays paused), so it gets ``linger_seconds``
        to read the answer before the reset (Go's closeWriteAndWait)."""
        if self.closing or self.lost:
            return
        self.closing = True
        self._linger = linger
        transport = self.transport
        try:
            transport.unregisterProducer()
        except Exception:
            pass
        if INegotiated.providedBy(transport):
            transport.loseConnection()  # close_notify after the pending data
            if self.guard is not None:
                self.guard.half_close(linger)
            else:  # TLS without the guard (not the server's listener): bounded from now
                self.write_closed = True
                self._close_call = self.reactor.callLater(self._close_seconds(), self.abort)
        elif ITCPTransport.providedBy(transport):  # plain TCP (the in-process test server)
            alsoProvides(self, IHalfCloseableProtocol)
            transport.loseWriteConnection()
        else:
            transport.loseConnection()

    def _close_seconds(self) -> float:
        return self.policy.linger_seconds if self._linger else self.policy.close_timeout

    # IHalfCloseableProtocol, provided while closing over plain TCP
    def writeConnectionLost(self) -> None:
        self.write_closed = True
        self._close_call = self.reactor.callLater(self._close_seconds(), self.abort)

    def readConnectionLost(self) -> None:
        self.transport.loseConnection()

    def abort(self) -> None:
        if self.lost:
            return
        self.closing = True
        self.transport.abortConnection()

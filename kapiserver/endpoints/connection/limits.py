"""Connections counted at accept, before TLS: a cap in total and per client address.

The listener's factory is :class:`ConnectionLimiter` around the TLS factory
around the site.  A connection over either cap is closed as it is accepted,
before any TLS work or buffer is spent on it, so a flood of slow connections
cannot take every file descriptor: whoever else connects (a load balancer's
``/readyz`` probe, kubelets) still gets in.  The total cap is also kept below
the process's descriptor limit (raised to its hard limit first, as Go's
runtime does for kube-apiserver), with room for storage and logs.

Each accepted connection is a :class:`GuardedConnection`: TCP keep-alive as
upstream's listener sets it (3 minutes), and the TCP side of a close: a
half-close once the data is out, then a bounded wait for the peer.
"""
from __future__ import annotations

import resource
import socket
from typing import Any, Callable, Optional

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IAddress, IHalfCloseableProtocol, IReactorTime
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.protocols import policies
from twisted.python.failure import Failure
from zope.interface import alsoProvides

from kapiserver.endpoints.connection.policy import ConnectionPolicy
from kapiserver.endpoints.connection.protocol import APIConnection

log = Logger()

# upstream's tcpKeepAliveListener period (defaultKeepAlivePeriod)
KEEPALIVE_SECONDS = 180
# descriptors kept free of client connections: storage (SQLite files and readers, etcd
# connections), logs, the reactor's own
RESERVED_DESCRIPTORS = 256
REFUSAL_LOG_INTERVAL = 10.0


def descriptor_budget(requested: int) -> int:
    """``requested`` connections, or fewer if the descriptor limit could not hold them.

    The soft limit is raised to the hard one first, as Go's runtime does at start.
    """
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            target = hard if hard != resource.RLIM_INFINITY else max(soft, requested + RESERVED_DESCRIPTORS)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    except (OSError, ValueError):
        return requested
    if soft == resource.RLIM_INFINITY:
        return requested
    available = max(1, soft - RESERVED_DESCRIPTORS)
    if available < requested:
        log.warn("connections.max_connections lowered from {requested} to {available}: the descriptor "
                 "limit is {limit}", requested=requested, available=available, limit=soft)
        return available
    return requested


def _host_of(address: IAddress) -> str:
    """The IP of a TCP peer ("" for other addresses)."""
    return address.host if isinstance(address, (IPv4Address, IPv6Address)) else ""


class GuardedConnection(policies.ProtocolWrapper):
    """The TCP side of one accepted connection (under TLS)."""

    transport: Any

    def __init__(self, factory: "ConnectionLimiter", wrappedProtocol: Any) -> None:
        super().__init__(factory, wrappedProtocol)  # type: ignore[arg-type]
        self.limiter = factory
        self.host = ""
        self._linger = False
        self._abort_call: Any = None
        self.api_connection: Any = None

    def makeConnection(self, transport: Any) -> None:
        self.host = _host_of(transport.getPeer())
        try:
            transport.setTcpKeepAlive(True)
            # as Go's net package sets on every TCP connection: an answer written in more than
            # one segment must not wait for the client's delayed ACK (40 ms per request)
            transport.setTcpNoDelay(True)
            handle = transport.getHandle()
            if hasattr(socket, "TCP_KEEPIDLE"):
                handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_SECONDS)
                handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_SECONDS)
        except (AttributeError, OSError):
            pass
        super().makeConnection(transport)
        # the HTTP protocol under TLS closes through us (half_close)
        tls = self.wrappedProtocol
        inner = tls.wrappedProtocol if isinstance(tls, policies.ProtocolWrapper) else None
        if isinstance(inner, APIConnection):
            inner.guard = self
            self.api_connection = inner

    def half_close(self, linger: bool) -> None:
        """FIN once the pending data is written; then ``writeConnectionLost`` bounds the wait."""
        self._linger = linger
        alsoProvides(self, IHalfCloseableProtocol)
        self.transport.loseWriteConnection()

    # IHalfCloseableProtocol, provided once half_close was called
    def writeConnectionLost(self) -> None:
        if self.api_connection is not None:
            self.api_connection.write_closed = True
        policy = self.limiter.policy
        seconds = policy.linger_seconds if self._linger else policy.close_timeout
        self._abort_call = self.limiter.reactor.callLater(seconds, self.transport.abortConnection)

    def readConnectionLost(self) -> None:
        self.transport.loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._abort_call is not None and self._abort_call.active():
            self._abort_call.cancel()
        self._abort_call = None
        super().connectionLost(reason)


class ConnectionLimiter(policies.WrappingFactory):
    """Accepts a connection only within ``max_connections`` and ``max_connections_per_address``."""

    protocol = GuardedConnection
    noisy = False

    def __init__(self, wrappedFactory: Any, policy: ConnectionPolicy, reactor: IReactorTime,
                 max_connections: Optional[int] = None) -> None:
        super().__init__(wrappedFactory)
        wrappedFactory.noisy = False
        self.policy = policy
        self.reactor = reactor
        self.max_connections = max_connections if max_connections is not None else policy.max_connections
        self.open = 0
        self.per_address: dict[str, int] = {}
        self.refused_total = 0
        # called with the number of open connections whenever it changes (workers' accept balance)
        self.on_count_change: Optional[Callable[[int], None]] = None
        self._refused_since_log = 0
        self._last_log = 0.0

    def buildProtocol(self, addr: Any) -> Any:
        host = _host_of(addr)
        if self.open >= self.max_connections:
            self._refused(host, f"{self.max_connections} connections open")
            return None
        if self.per_address.get(host, 0) >= self.policy.max_connections_per_address:
            self._refused(host, f"{self.policy.max_connections_per_address} connections open from {host}")
            return None
        return super().buildProtocol(addr)

    def registerProtocol(self, p: Any) -> None:
        super().registerProtocol(p)
        self.open += 1
        self.per_address[p.host] = self.per_address.get(p.host, 0) + 1
        if self.on_count_change is not None:
            self.on_count_change(self.open)

    def unregisterProtocol(self, p: Any) -> None:
        super().unregisterProtocol(p)
        self.open -= 1
        if self.on_count_change is not None:
            self.on_count_change(self.open)
        left = self.per_address.get(p.host, 1) - 1
        if left > 0:
            self.per_address[p.host] = left
        else:
            self.per_address.pop(p.host, None)

    def _refused(self, host: str, why: str) -> None:
        """Count, and log at most every REFUSAL_LOG_INTERVAL (a flood must not flood the log)."""
        self.refused_total += 1
        self._refused_since_log += 1
        now = self.reactor.seconds()
        if now - self._last_log >= REFUSAL_LOG_INTERVAL:
            log.warn("closed {n} new connections at accept (latest from {host}: {why})",
                     n=self._refused_since_log, host=host, why=why)
            self._refused_since_log = 0
            self._last_log = now

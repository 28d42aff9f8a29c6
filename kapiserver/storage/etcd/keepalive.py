"""TCP keepalive on every connection to etcd (and its writes sent at once: :mod:`kapiserver.machinery.eager_tcp`).

Upstream's etcd client pings over gRPC so that a peer that vanished without
closing the connection (power loss, a partition dropping packets) is noticed.
We talk HTTP/1.1, so the kernel does the pinging: each socket gets
SO_KEEPALIVE with short probe timings, and a dead peer turns into a
connection error that the client's failover and the watch's resume handle.

Keepalive cannot see a peer that is alive at the TCP level but sends nothing
(a hung gateway); the watch's silence timeout covers that case
(:mod:`kapiserver.storage.etcd.watch`).
"""
from __future__ import annotations

import socket
from typing import Optional

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.interfaces import IProtocol, IProtocolFactory, IStreamClientEndpoint, ISystemHandle
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.web.client import URI, BrowserLikePolicyForHTTPS
from twisted.web.error import SchemeNotSupported
from twisted.web.iweb import IAgentEndpointFactory, IPolicyForHTTPS
from zope.interface import implementer

from kapiserver.machinery.eager_tcp import write_at_once

log = Logger()

# Probe after 30 s idle, every 10 s, give up after 3 misses: a dead peer is
# detected within about a minute (kube-apiserver's gRPC keepalive: 30 s + 10 s).
KEEPALIVE_IDLE = 30
KEEPALIVE_INTERVAL = 10
KEEPALIVE_COUNT = 3


def set_keepalive(sock: socket.socket, idle: int = KEEPALIVE_IDLE, interval: int = KEEPALIVE_INTERVAL,
                  count: int = KEEPALIVE_COUNT) -> None:
    """Turn on TCP keepalive with the given timings (the timings only where the OS has them)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


@implementer(IStreamClientEndpoint)
class _KeepAliveTCPEndpoint:
    """A TCP client endpoint whose connected sockets have keepalive on."""

    def __init__(self, inner: IStreamClientEndpoint):
        self._inner = inner

    def connect(self, factory: IProtocolFactory) -> Deferred:
        return self._inner.connect(factory).addCallback(self._configure)

    @staticmethod
    def _configure(protocol: IProtocol) -> IProtocol:
        transport = protocol.transport if isinstance(protocol, Protocol) else None
        write_at_once(transport)  # a call or a watch request is one write: no reactor turn before it leaves
        system = ISystemHandle(transport, None)
        handle = system.getHandle() if system is not None else None
        if isinstance(handle, socket.socket):
            try:
                set_keepalive(handle)
            except OSError as e:  # never fail a connection over a socket option
                log.warn("cannot enable TCP keepalive to etcd: {e}", e=e)
        return protocol


@implementer(IAgentEndpointFactory)
class KeepAliveEndpointFactory:
    """Endpoints for twisted.web's Agent: TCP (or TLS over TCP for https) with keepalive.

    Use with ``Agent.usingEndpointFactory``; ``policy`` verifies https
    endpoints (default: the system's trust roots, as a plain Agent does).
    """

    def __init__(self, reactor, policy: Optional[IPolicyForHTTPS] = None, connect_timeout: float = 5):
        self._reactor = reactor
        self._policy = policy if policy is not None else BrowserLikePolicyForHTTPS()
        self._connect_timeout = connect_timeout
        # The Agent asks for an endpoint on every request, even when a pooled connection
        # answers it; building one (IDNA-encoding the host) is a measurable share of an etcd call.
        self._endpoints: dict[tuple[bytes, bytes, int], IStreamClientEndpoint] = {}

    def endpointForURI(self, uri: URI) -> IStreamClientEndpoint:
        where = (uri.scheme, uri.host, uri.port)
        endpoint = self._endpoints.get(where)
        if endpoint is None:
            endpoint = self._endpoints[where] = self._endpoint(uri)
        return endpoint

    def _endpoint(self, uri: URI) -> IStreamClientEndpoint:
        host = uri.host.decode("ascii")
        tcp = _KeepAliveTCPEndpoint(HostnameEndpoint(self._reactor, host, uri.port, timeout=self._connect_timeout))
        if uri.scheme == b"http":
            return tcp
        if uri.scheme == b"https":
            return wrapClientTLS(self._policy.creatorForNetloc(uri.host, uri.port), tcp)
        raise SchemeNotSupported(f"unsupported scheme for etcd: {uri.scheme!r}")

"""The seams of the streaming code: an upgraded client connection and an upgrade dialer.

An upgrade (SPDY/3.1 or WebSocket) leaves HTTP behind: after ``101 Switching
Protocols`` the connection carries another protocol.  The client's side is a
:class:`HijackedConnection` taken from the HTTP/1.1 channel once the request
has passed the handler chain; the kubelet's side is opened by an
:class:`UpgradeDialer`.  Both hand their bytes to ordinary Twisted protocols
(``IProtocol``), whose transports are push producers and consumers, so every
relay applies backpressure the Twisted way: each side's transport is
registered as the producer of the other's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from twisted.internet import defer
from twisted.internet.interfaces import IProtocol, IStreamClientEndpoint
from twisted.web.server import Request
from zope.interface import Interface

from kapiserver.registry.subresources import Location


class HijackedConnection(Protocol):
    """A client connection the HTTP channel has let go of (after the request's headers and body).

    ``attach(protocol)`` connects ``protocol`` to it: ``protocol.makeConnection(transport)``
    at once (the transport is an ``ITCPTransport``-like object that is also an
    ``IPushProducer`` and ``IConsumer``), then every byte that arrived after the request,
    and every later one, goes to ``protocol.dataReceived``; its end to
    ``protocol.connectionLost``.  Nothing has been written to the client yet: whoever
    attaches writes the ``101`` (or any other answer) itself.
    """

    def attach(self, protocol: IProtocol) -> None: ...


class IHijackableChannel(Interface):
    """An HTTP channel that can give its connection up to another protocol (HTTP/1.1 only:
    an HTTP/2 stream cannot be upgraded)."""

    def hijack(request: Request) -> HijackedConnection:
        """Take the connection of ``request`` (its only request, nothing written yet) out of
        HTTP.  The request is finished (for the handler chain's bookkeeping: audit, metrics,
        priority and fairness seats) once the hijacked connection is lost."""


@dataclass
class UpgradeResponse:
    """The head of the answer to an upgrade request.  On 101 the dialer has already
    connected the caller's protocol to the upgraded connection; otherwise ``body`` holds
    the answer (bounded) and the connection is closed."""

    code: int
    phrase: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    # the head as the backend sent it, status line to blank line (passed through on 101)
    raw_head: bytes = b""

    def header(self, name: bytes) -> bytes:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return b""


class UpgradeDialer(Protocol):
    """Opens connections to one backend (a kubelet) and sends upgrade requests there."""

    def upgrade(self, path: bytes, headers: list[tuple[bytes, bytes]], protocol: IProtocol, *,
                method: bytes) -> "defer.Deferred[UpgradeResponse]":
        """``method path`` (path and query; upstream sends the client's method when it passes
        an upgrade through, ``POST`` when it makes a SPDY request of its own) with ``headers``
        (which carry the ``Connection: Upgrade`` and ``Upgrade`` headers).  On ``101`` the upgraded connection is given
        to ``protocol`` (``makeConnection``, then any bytes after the head) before the
        Deferred fires.  Fails (``DialError``, with Go's text) when the backend
        cannot be reached."""
        ...


class Dial(Protocol):
    """How connections to backends are made (upstream's proxy transport dials through the
    egress selector's dialer; here, a TCP endpoint): an endpoint for ``host``:``port`` that
    gives up connecting after ``timeout`` seconds.  TLS, when the backend speaks it, is
    wrapped around it by the caller."""

    def __call__(self, host: str, port: int, timeout: float) -> IStreamClientEndpoint: ...


# any served resource's Store by (group, version, plural): a connect subresource reads Nodes
StoreGetter = Callable[[str, str, str], Any]


class ConnectStreams(Protocol):
    """Serves a connect subresource's :class:`Location` (logs, exec, attach, port-forward, the
    proxies) on the client's request: the streaming package's ``StreamConnector``, or
    ``on_first_use.StreamsOnFirstUse``, which loads it with the first such request."""

    async def serve(self, request: Request, location: Location, stores: StoreGetter) -> None: ...

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
from typing import Protocol

from twisted.internet import defer
from twisted.internet.interfaces import IProtocol


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


@dataclass
class UpgradeResponse:
    """The head of the answer to an upgrade request.  On 101 the dialer has already
    connected the caller's protocol to the upgraded connection; otherwise ``body`` holds
    the answer (bounded) and the connection is closed."""

    code: int
    phrase: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: bytes) -> bytes:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return b""


class UpgradeDialer(Protocol):
    """Opens connections to one backend (a kubelet) and sends upgrade requests there."""

    def upgrade(self, path: bytes, headers: list[tuple[bytes, bytes]],
                protocol: IProtocol) -> "defer.Deferred[UpgradeResponse]":
        """``GET path`` (path and query) with ``headers`` (which carry the ``Connection:
        Upgrade`` and ``Upgrade`` headers).  On ``101`` the upgraded connection is given
        to ``protocol`` (``makeConnection``, then any bytes after the head) before the
        Deferred fires.  Fails (``ConnectError``, ``TimeoutError``) when the backend
        cannot be reached."""
        ...

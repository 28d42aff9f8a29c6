"""What an HTTP/1.1 or HTTP/2 channel needs of the connection it runs on.

``protocol.py``'s :class:`~kapiserver.endpoints.connection.protocol.APIConnection`
is that connection: it chooses the channel (ALPN) and builds it, so the channels
(``http1.py``, ``http2.py``) know it only by this contract.
"""
from __future__ import annotations

from typing import Protocol

from twisted.internet.interfaces import IReactorTime

from kapiserver.endpoints.connection.policy import ConnectionPolicy


class ChannelConnection(Protocol):
    # the limits of the ``connections`` section
    policy: ConnectionPolicy
    # the clock of every deadline
    reactor: IReactorTime

    @property
    def draining(self) -> bool:
        """The server is shutting down: the channel answers what it has and closes."""

    @property
    def peer(self) -> str:
        """The client's address, for logs."""

    def close(self, linger: bool = False) -> None:
        """Close once everything is written; ``linger`` gives the client time to read a last answer."""

    def abort(self) -> None:
        """Drop the connection now."""

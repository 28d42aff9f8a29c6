"""TCP whose writes go to the socket at once when nothing waits before them.

Twisted's TCP transport never sends from ``write``: it queues the bytes,
registers the socket for writability (an ``epoll_ctl``), and sends on the
next reactor turn, then unregisters it (another ``epoll_ctl``).  For a
request answered in one write, or a call sent in one, that is two system
calls and a reactor turn more than needed.  An eager transport sends a write
at once when it holds nothing unsent (so order is kept), and queues only
what the socket did not take; that remainder, and every write behind it,
takes Twisted's path, with its flow control (producers paused while the
buffer is full).

The serving port's connections are ``EagerWriteServer``\ s
(:func:`send_writes_at_once`); the connections to etcd become
``EagerWriteClient``\ s once connected (:func:`write_at_once`).
"""
from __future__ import annotations

from typing import Any, Iterable

from twisted.internet import tcp

_JOIN_AT_MOST = 64 * 1024


class _EagerWrite:
    """The write of a ``tcp.Connection`` subclass, sent at once while nothing is queued."""

    def write(self, data: bytes) -> None:
        if (self._tempDataLen or self.offset != len(self.dataBuffer) or not self.connected  # type: ignore[attr-defined]
                or self._writeDisconnected or self._aborting or type(data) is not bytes  # type: ignore[attr-defined]
                or not data):
            super().write(data)  # type: ignore[misc]
            return
        try:
            sent = self.socket.send(data)  # type: ignore[attr-defined]
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # the reactor's write path finds the error again and reports it
            sent = 0
        if sent < len(data):
            super().write(data[sent:])  # type: ignore[misc]

    def writeSequence(self, iovec: Iterable[bytes]) -> None:
        # a request's head and body, say: one send; what is big is not copied into one piece
        iovec = list(iovec)
        if sum(map(len, iovec)) <= _JOIN_AT_MOST:
            self.write(b"".join(iovec))
        else:
            super().writeSequence(iovec)  # type: ignore[misc]


class EagerWriteServer(_EagerWrite, tcp.Server):
    """``tcp.Server`` whose writes are sent at once while nothing is queued."""


class EagerWriteClient(_EagerWrite, tcp.Client):
    """``tcp.Client`` whose writes are sent at once while nothing is queued."""


def write_at_once(transport: Any) -> None:
    """Make a connected ``tcp.Client`` an :class:`EagerWriteClient` (any other transport is left as it is).

    Twisted's client endpoints build their transports themselves; the class adds only a
    method, so switching it on the connected object is safe.
    """
    if type(transport) is tcp.Client:
        transport.__class__ = EagerWriteClient


def send_writes_at_once(port: Any) -> None:
    """Make the connections ``port`` accepts from now on :class:`EagerWriteServer`\\ s."""
    port.transport = EagerWriteServer

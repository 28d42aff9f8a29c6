"""TCP for the serving port: a write goes to the socket at once when nothing waits before it.

Twisted's TCP transport never sends from ``write``: it queues the bytes,
registers the socket for writability (an ``epoll_ctl``), and sends on the
next reactor turn, then unregisters it (another ``epoll_ctl``).  For a
request answered in one write, that is two system calls and a reactor turn
more than needed.  ``EagerWriteServer`` sends a write at once when the
transport holds nothing unsent (so order is kept), and queues only what the
socket did not take; that remainder, and every write behind it, takes
Twisted's path, with its flow control (producers paused while the buffer is
full).
"""
from __future__ import annotations

from typing import Any

from twisted.internet import tcp


class EagerWriteServer(tcp.Server):
    """``tcp.Server`` whose writes are sent at once while nothing is queued."""

    def write(self, data: bytes) -> None:  # type: ignore[override]
        if (self._tempDataLen or self.offset != len(self.dataBuffer) or not self.connected
                or self._writeDisconnected or self._aborting or type(data) is not bytes or not data):
            super().write(data)
            return
        try:
            sent = self.socket.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # the reactor's write path finds the error again and reports it
            sent = 0
        if sent < len(data):
            super().write(data[sent:])


def send_writes_at_once(port: Any) -> None:
    """Make the connections ``port`` accepts from now on :class:`EagerWriteServer`\\ s."""
    port.transport = EagerWriteServer

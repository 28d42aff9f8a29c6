"""Spreading new connections evenly over the workers (``workers: N``).

Every worker accepts from the one shared socket.  Left alone, whichever is
woken first takes a whole burst (Twisted accepts up to 100 connections per
wakeup), and four keep-alive clients end up three on one worker and one on
the other, leaving a core idle.  So each worker publishes how many
connections it holds in a table every worker maps (a memfd the supervisor
creates), accepts one connection per wakeup, and after a connection that puts
it ahead of the least loaded worker it steps aside for ``STEP_ASIDE_SECONDS``:
long enough for an idle peer (woken by the same connection) to take the next
one, short enough that a busy peer never leaves a connection waiting for long.
"""
from __future__ import annotations

import mmap
import struct
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

log = Logger()

STEP_ASIDE_SECONDS = 0.005
_SLOT = struct.Struct("<q")


class ConnectionTable:
    """How many connections each worker holds, in memory shared by all of them."""

    def __init__(self, fd: int, slots: int) -> None:
        self.slots = slots
        self._map = mmap.mmap(fd, _SLOT.size * slots)

    @staticmethod
    def size(slots: int) -> int:
        return _SLOT.size * slots

    def set(self, index: int, count: int) -> None:
        _SLOT.pack_into(self._map, index * _SLOT.size, count)

    def counts(self) -> list[int]:
        return [_SLOT.unpack_from(self._map, i * _SLOT.size)[0] for i in range(self.slots)]


class AcceptBalancer:
    """Paces one worker's accepting by the table (``connections_changed`` is the limiter's hook)."""

    def __init__(self, port: Any, table: ConnectionTable, index: int, reactor: IReactorTime) -> None:
        self.port = port
        self.table = table
        self.index = index
        self.reactor = reactor
        self._resume: Any = None
        self._accept = port.doRead
        port.doRead = self._accept_one  # one accept per wakeup, whatever Twisted's adaptive batch
        table.set(index, 0)

    def _accept_one(self) -> Any:
        self.port.numberAccepts = 1
        return self._accept()

    def connections_changed(self, open_connections: int) -> None:
        self.table.set(self.index, open_connections)
        counts = self.table.counts()
        least = min(c for i, c in enumerate(counts) if i != self.index)
        if open_connections > least and self._resume is None and self.port.connected:
            self.port.stopReading()
            self._resume = self.reactor.callLater(STEP_ASIDE_SECONDS, self._step_back)

    def _step_back(self) -> None:
        self._resume = None
        if self.port.connected:
            self.port.startReading()

    def stop(self) -> None:
        if self._resume is not None and self._resume.active():
            self._resume.cancel()
        self._resume = None
        self.table.set(self.index, 0)

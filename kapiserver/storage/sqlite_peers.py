"""What processes sharing one SQLite file tell each other (``workers: N``).

Every process commits its own writes (SQLite's write lock serialises them
across processes, and the revision counter lives in the database), so the
others must learn of those writes to feed their watchers and watch caches:

* :class:`SharedRevision`: the newest revision any process has assigned, in
  an 8-byte memory-mapped file beside the database (``<db>-rev``).  A writer
  stores it *inside* its transaction, while it holds the write lock, so the
  value only grows and is set before any write it covers is acknowledged:
  a reader that sees N knows every acknowledged write is at or below N,
  without a round trip (consistent reads from memory, as with one process).
  The same file is the writers' lock (``flock``), taken around each write
  transaction: a writer then waits in the kernel and is woken the moment the
  other commits, not in SQLite's busy handler, which sleeps 1, 2, 5, 10...
  ms between tries (with two writers it made every tenth create take 25 ms).
* :class:`CommitBell`: after each commit the writer rings every other
  process (one datagram each, on Linux abstract unix sockets, so nothing is
  left on disk by a killed process); the rung process reads the new rows
  from the database.  Its peers are listed in the database's ``peers``
  table, read inside the writer's transaction, so a process that joins is
  rung from the next commit on.  A lost datagram (a full socket buffer) only
  delays: every process also looks at :class:`SharedRevision` periodically.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import mmap
import os
import socket
import sqlite3
import struct
from typing import Callable, Iterator, Optional

from twisted.internet.protocol import DatagramProtocol
from twisted.logger import Logger

from kapiserver.machinery import private_files

log = Logger()

PEERS_SCHEMA = "CREATE TABLE IF NOT EXISTS peers (name TEXT PRIMARY KEY);"
_REVISION = struct.Struct("<q")


class SharedRevision:
    """The newest assigned revision of a shared database, readable by every process at once."""

    def __init__(self, path: str) -> None:
        private_files.ensure_private_file(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        if os.fstat(self._fd).st_size < 8:
            os.ftruncate(self._fd, 8)
        self._map = mmap.mmap(self._fd, 8)
        # an aligned 8-byte store and load: never torn on the 64-bit platforms we run on
        self._value = ctypes.c_int64.from_buffer(self._map)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the writers' lock (writer thread, around one write transaction)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def get(self) -> int:
        return self._value.value

    def advance(self, revision: int) -> None:
        """Raise the value to ``revision`` (callers hold the database's write lock)."""
        if revision > self._value.value:
            self._value.value = revision

    def close(self) -> None:
        del self._value  # the mmap refuses to close while a ctypes view exists
        self._map.close()
        os.close(self._fd)


class _BellProtocol(DatagramProtocol):
    noisy = False

    def __init__(self, on_ring: Callable[[int], None]) -> None:
        self.on_ring = on_ring

    def datagramReceived(self, data: bytes, addr) -> None:
        if len(data) == _REVISION.size:
            self.on_ring(_REVISION.unpack(data)[0])


class CommitBell:
    """Rings the other processes of a shared database after each commit, and hears them ring."""

    def __init__(self, reactor, on_ring: Callable[[int], None]) -> None:
        self._reactor = reactor
        self._on_ring = on_ring
        self.name = f"kapiserver-sqlite-{os.getpid()}-{os.urandom(8).hex()}"
        self._port = None
        self._sock: Optional[socket.socket] = None

    def listen(self) -> None:
        """Bind this process's name (on the reactor thread)."""
        self._port = self._reactor.listenUNIXDatagram("\0" + self.name, _BellProtocol(self._on_ring))
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.setblocking(False)

    def join(self, conn: sqlite3.Connection) -> None:
        """Writer thread: list this process as a peer, and forget peers that are gone."""
        conn.executescript(PEERS_SCHEMA)
        for (name,) in conn.execute("SELECT name FROM peers").fetchall():
            if not self._send(name, 0):
                conn.execute("DELETE FROM peers WHERE name = ?", (name,))
        conn.execute("INSERT OR IGNORE INTO peers VALUES (?)", (self.name,))

    def leave(self, conn: sqlite3.Connection) -> None:
        """Writer thread: stop being rung."""
        conn.execute("DELETE FROM peers WHERE name = ?", (self.name,))

    def peers(self, conn: sqlite3.Connection) -> list[str]:
        """Writer thread, inside the write transaction: the names to ring after it commits."""
        return [name for (name,) in conn.execute("SELECT name FROM peers") if name != self.name]

    def ring(self, peers: list[str], revision: int) -> None:
        """Writer thread, after the commit: tell each peer ``revision`` is committed."""
        for name in peers:
            self._send(name, revision)

    def _send(self, name: str, revision: int) -> bool:
        """False if nobody listens on ``name`` any more (its process is gone)."""
        sock = self._sock
        if sock is None:
            return True
        try:
            sock.sendto(_REVISION.pack(revision), "\0" + name)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            pass  # a full buffer: the peer's periodic look at SharedRevision catches up
        return True

    def close(self) -> None:
        if self._port is not None:
            self._port.stopListening()
            self._port = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

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
  left on disk by a killed process).  The datagram carries the batch's
  events (:func:`encode_batch`) when they fit in :data:`MAX_BATCH_DATAGRAM`:
  the rung process publishes them as they are, without reading them back;
  otherwise it carries the new revision only, and the rung process reads the
  new rows from the database (reading them back cost every other process a
  thread hop and a query per commit, about half as much again as the write).
  Its peers are listed in the database's ``peers`` table, read inside the
  writer's transaction, so a process that joins is rung from the next commit
  on.  A lost datagram (a full socket buffer) only delays: the next one, or
  a periodic look at :class:`SharedRevision`, makes the process read what it
  missed.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
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
from kapiserver.storage.interface import DELETE, PUT, Event, KeyValue

log = Logger()

PEERS_SCHEMA = "CREATE TABLE IF NOT EXISTS peers (name TEXT PRIMARY KEY);"
_REVISION = struct.Struct("<q")
# a batch that does not fit goes as its revision only (the peers read it back)
MAX_BATCH_DATAGRAM = 64 * 1024

# a batch: (start, end, events); an event: flags, create and mod revision, lease, key and
# value lengths, then the key, the value and, with a previous value, that value's
# create and mod revision, lease and length, then the value (its key is the event's)
_BATCH = struct.Struct("<qqI")
_EVENT = struct.Struct("<BqqqII")
_PREV = struct.Struct("<qqqI")
_DELETED, _WITH_PREV = 1, 2


def encode_batch(start: int, end: int, events: list[Event]) -> Optional[bytes]:
    """One commit's events for the peers' bell, or None when they do not fit a datagram."""
    parts = [_BATCH.pack(start, end, len(events))]
    size = _BATCH.size
    for event in events:
        kv, prev = event.kv, event.prev_kv
        key = kv.key.encode()
        flags = (_DELETED if event.type == DELETE else 0) | (_WITH_PREV if prev is not None else 0)
        parts += [_EVENT.pack(flags, kv.create_revision, kv.mod_revision, kv.lease, len(key), len(kv.value)),
                  key, kv.value]
        size += _EVENT.size + len(key) + len(kv.value)
        if prev is not None:
            parts += [_PREV.pack(prev.create_revision, prev.mod_revision, prev.lease, len(prev.value)), prev.value]
            size += _PREV.size + len(prev.value)
        if size > MAX_BATCH_DATAGRAM:
            return None
    return b"".join(parts)


def decode_batch(data: bytes) -> tuple[int, int, list[Event]]:
    """What :func:`encode_batch` encoded (struct.error or ValueError when it is not that)."""
    start, end, count = _BATCH.unpack_from(data, 0)
    at = _BATCH.size
    events = []
    for _ in range(count):
        flags, create, mod, lease, key_len, value_len = _EVENT.unpack_from(data, at)
        at += _EVENT.size
        key = data[at:at + key_len].decode()
        at += key_len
        kv = KeyValue(key, data[at:at + value_len], create, mod, lease)
        at += value_len
        prev = None
        if flags & _WITH_PREV:
            p_create, p_mod, p_lease, p_len = _PREV.unpack_from(data, at)
            at += _PREV.size
            prev = KeyValue(key, data[at:at + p_len], p_create, p_mod, p_lease)
            at += p_len
        events.append(Event(DELETE if flags & _DELETED else PUT, kv, prev, mod))
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes after the batch's events")
    return start, end, events


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

    def __init__(self, on_ring: Callable[[int], None],
                 on_batch: Optional[Callable[[int, int, list[Event]], None]]) -> None:
        self.on_ring = on_ring
        self.on_batch = on_batch

    def datagramReceived(self, data: bytes, addr) -> None:
        if len(data) == _REVISION.size:
            self.on_ring(_REVISION.unpack(data)[0])
            return
        try:
            start, end, events = decode_batch(data)
        except (struct.error, ValueError, UnicodeDecodeError) as e:
            log.warn("ignoring a malformed commit datagram ({err}); the periodic look catches up", err=e)
            return
        if self.on_batch is not None:
            self.on_batch(start, end, events)
        else:
            self.on_ring(end)


class CommitBell:
    """Rings the other processes of a shared database after each commit, and hears them ring."""

    def __init__(self, reactor, on_ring: Callable[[int], None],
                 on_batch: Optional[Callable[[int, int, list[Event]], None]] = None) -> None:
        self._reactor = reactor
        self._on_ring = on_ring
        self._on_batch = on_batch
        self.name = f"kapiserver-sqlite-{os.getpid()}-{os.urandom(8).hex()}"
        self._port = None
        self._sock: Optional[socket.socket] = None

    def listen(self) -> None:
        """Bind this process's name (on the reactor thread)."""
        bell = _BellProtocol(self._on_ring, self._on_batch)
        self._port = self._reactor.listenUNIXDatagram("\0" + self.name, bell, maxPacketSize=MAX_BATCH_DATAGRAM + 1024)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.setblocking(False)

    def join(self, conn: sqlite3.Connection) -> None:
        """Writer thread: list this process as a peer, and forget peers that are gone."""
        conn.executescript(PEERS_SCHEMA)
        for (name,) in conn.execute("SELECT name FROM peers").fetchall():
            if self._send(name, _REVISION.pack(0)) is False:
                conn.execute("DELETE FROM peers WHERE name = ?", (name,))
        conn.execute("INSERT OR IGNORE INTO peers VALUES (?)", (self.name,))

    def leave(self, conn: sqlite3.Connection) -> None:
        """Writer thread: stop being rung."""
        conn.execute("DELETE FROM peers WHERE name = ?", (self.name,))

    def peers(self, conn: sqlite3.Connection) -> list[str]:
        """Writer thread, inside the write transaction: the names to ring after it commits."""
        return [name for (name,) in conn.execute("SELECT name FROM peers") if name != self.name]

    def ring(self, peers: list[str], revision: int, batch: Optional[bytes] = None) -> None:
        """Writer thread, after the commit: tell each peer ``revision`` is committed, with
        the commit's events when they are given (:func:`encode_batch`)."""
        bell = _REVISION.pack(revision)
        for name in peers:
            if batch is None or self._send(name, batch) is None:
                self._send(name, bell)

    def _send(self, name: str, datagram: bytes) -> Optional[bool]:
        """False if nobody listens on ``name`` any more (its process is gone); None when the
        datagram is bigger than this socket may send (the caller sends the revision alone)."""
        sock = self._sock
        if sock is None:
            return True
        try:
            sock.sendto(datagram, "\0" + name)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError as e:
            if e.errno == errno.EMSGSIZE:
                return None
            # a full buffer: the next datagram, or the peer's periodic look at
            # SharedRevision, has it catch up
        return True

    def close(self) -> None:
        if self._port is not None:
            self._port.stopListening()
            self._port = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

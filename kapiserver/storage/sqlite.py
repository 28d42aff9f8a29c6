"""The embedded storage backend: etcd-like MVCC on one SQLite file.

Layout (see ``SCHEMA``): every write appends one row to ``kv`` whose primary
key *is* the revision, so history, watch replay and reads at a past revision
are range scans; a delete appends a tombstone row carrying the last value.
``latest`` maps each live key to its newest row, for fast reads at the latest
revision.  ``meta`` keeps the current and compacted revisions (they survive
restart even when compaction removed the rows that carried them).

Threads: all writes run on one dedicated worker thread with its own connection,
which serialises them (the revision counter lives there).  Writes queued while
a batch commits are committed together in the next transaction (group commit:
one fsync for many writes).  Reads at a file path run on a small pool of reader
threads, each with its own connection; WAL gives every read transaction a
consistent snapshot that never waits on the writer.  Watchers are fed on the
reactor thread right after each commit (:mod:`kapiserver.storage.sqlite_watch`).

Shared (``shared=True``, for ``workers: N``): several processes open the same
file, each with its own writer.  A lock file (``flock``, beside SQLite's own
write lock) serialises their transactions; each batch reads the revision from
``meta`` under it, so revisions stay one sequence.  A process learns of the
others' commits from :mod:`kapiserver.storage.sqlite_peers`, whose datagram
carries each commit's events when they fit, and publishes every revision to
its watchers exactly once and in order: batches whose events it knows (its
own, and those the datagrams carried) directly when they follow on from what
it has published, anything else read back from the database ("catching up").
Only the process with ``maintenance=True`` runs compaction and lease expiry.

Snapshots (per-test isolation, :class:`~kapiserver.storage.interface.Snapshots`): ``snapshot``
copies the live keys into the ``snapshot`` table; ``restore`` is one write op that deletes, rewrites
and re-creates keys to match it, at new revisions with their events, so it reaches every
process's watchers as any batch does.
"""
from __future__ import annotations

import builtins
import collections
import contextlib
import os
import sqlite3
import threading
import time
from typing import Any, Callable, ContextManager, Optional

from twisted.internet import defer, task, threads
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from kapiserver.machinery import private_files
from kapiserver.storage.interface import (
    DELETE, PUT, CompactedError, ConflictError, ErrorHandler, Event, EventHandler, FutureRevisionError,
    KeyExistsError, KeyNotFoundError, KeyValue, ListResult, NoSnapshotError, ProgressHandler, RestoreResult, Snapshots,
    Storage, StorageError, UnavailableError, Watch)
from kapiserver.storage.sqlite_peers import CommitBell, SharedRevision, encode_batch
from kapiserver.storage.sqlite_watch import HISTORY_PAGE, WatchHub

log = Logger()

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    rev INTEGER PRIMARY KEY,        -- the revision of this write
    key BLOB NOT NULL,              -- UTF-8 bytes: BLOB compares in byte order
    value BLOB NOT NULL,            -- for a tombstone: the last value
    create_rev INTEGER NOT NULL,
    prev_rev INTEGER NOT NULL,      -- the key's previous row (0 for a create)
    deleted INTEGER NOT NULL,       -- 1 for a tombstone
    lease INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS kv_key_rev ON kv (key, rev);
CREATE TABLE IF NOT EXISTS latest (
    key BLOB PRIMARY KEY,
    rev INTEGER NOT NULL,
    lease INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS latest_lease ON latest (lease) WHERE lease != 0;
CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY,
    ttl INTEGER NOT NULL,
    expires REAL NOT NULL           -- wall-clock seconds, so expiry survives restart
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot (  -- the live keys when snapshot() ran ('snapshot' in meta: its revision)
    key BLOB PRIMARY KEY,
    value BLOB NOT NULL,
    rev INTEGER NOT NULL,           -- the key's mod revision then: unchanged while latest.rev is the same
    lease INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta VALUES ('revision', 0), ('compacted', 0);
"""

# Writes committed in one transaction at most (bounds the latency of a batch).
MAX_BATCH = 500
# A write waiting for the writer thread: the op, its arguments, and whom to tell.
QueuedWrite = tuple[Callable, tuple, defer.Deferred]
# Shared: how often a process checks for commits it was not rung about (a lost datagram).
SHARED_POLL_INTERVAL = 0.5
# Rows removed per compaction transaction, so writes interleave with a big compaction.
COMPACT_STEP = 20000
READ_THREADS = 2

_LATEST_COLS = "k.key, k.value, k.create_rev, k.rev, k.lease"


def _prefix_end(prefix: bytes) -> Optional[bytes]:
    """The first key after every key starting with ``prefix`` (None: no bound)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def _range(prefix: str, start_key: str = "", col: str = "key") -> tuple[str, list[Any]]:
    """SQL condition and parameters on column ``col`` for a prefix range."""
    low = prefix.encode()
    if start_key and start_key.encode() > low:
        low = start_key.encode()
    end = _prefix_end(prefix.encode())
    if end is None:
        return f"{col} >= ?", [low]
    return f"{col} >= ? AND {col} < ?", [low, end]


def _kv(row: tuple) -> KeyValue:
    return KeyValue(row[0].decode(), bytes(row[1]), row[2], row[3], row[4])


def _history(conn: sqlite3.Connection, compacted: int, prefix: str, after: int, bound: int,
             limit: int) -> list[Event]:
    """Up to ``limit`` events under ``prefix`` with after < revision <= bound, in order."""
    if after + 1 < compacted:
        raise CompactedError(after, compacted)
    cond, params = _range(prefix, col="k.key")
    rows = conn.execute(
        "SELECT k.key, k.value, k.create_rev, k.rev, k.lease, k.deleted, "
        "p.key, p.value, p.create_rev, p.rev, p.lease FROM kv k LEFT JOIN kv p ON p.rev = k.prev_rev "
        f"WHERE k.rev > ? AND k.rev <= ? AND {cond} ORDER BY k.rev LIMIT ?",
        [after, bound] + params + [limit]).fetchall()
    events = []
    for r in rows:
        kv = _kv(r[:5])
        prev = _kv(r[6:]) if r[6] is not None else None
        events.append(Event(DELETE if r[5] else PUT, kv, prev, kv.mod_revision))
    return events


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


class _ReaderConnection(threading.local):
    """A read thread's own connection (None until the thread first reads)."""

    conn: Optional[sqlite3.Connection] = None


class SQLiteStorage(Storage):
    """:class:`kapiserver.storage.interface.Storage` on an embedded SQLite file."""

    def __init__(self, path: str, compaction_interval: float = 300.0, compaction_retain: int = 0,
                 lease_sweep_interval: float = 1.0, reactor=None, read_threads: int = READ_THREADS,
                 shared: bool = False, maintenance: bool = True) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.path = path
        self.compaction_interval = compaction_interval
        self.compaction_retain = compaction_retain
        self.lease_sweep_interval = lease_sweep_interval
        self._reactor = reactor
        self._memory = path == ":memory:"
        if shared and self._memory:
            raise ValueError("an in-memory SQLite database cannot be shared between processes")
        self.shared = shared
        self.maintenance = maintenance
        self._writer = ThreadPool(1, 1, name="sqlite-writer")
        # read_threads=0 runs reads on the writer thread (one connection in all).
        self._reads_on_writer = self._memory or read_threads <= 0
        self._readers = self._writer if self._reads_on_writer else ThreadPool(1, read_threads, name="sqlite-reader")
        self._wconn: Optional[sqlite3.Connection] = None
        self._w_rev = 0  # current revision, owned by the writer thread
        self._local = _ReaderConnection()
        self._rconns: list[sqlite3.Connection] = []
        self._rconns_lock = threading.Lock()
        # writes waiting for the writer thread: appended on the reactor, taken on the writer
        self._queue: collections.deque[QueuedWrite] = collections.deque()
        self._batch: Optional[defer.Deferred] = None
        self._revision = 0
        self._compacted = 0
        self._seen_revision = 0  # the revision at the previous periodic compaction
        self._leases: dict[int, float] = {}  # lease id -> expiry (wall clock)
        self._sweeping = False
        self._compactions: set[defer.Deferred] = set()
        self._loops: list[task.LoopingCall] = []
        self._running = False
        self._hub = WatchHub(self._read_history, reactor)
        # shared: the others' commits (see sqlite_peers) and the catch-up state
        self._bell: Optional[CommitBell] = None
        self._shared_revision: Optional[SharedRevision] = None
        self._catch_up_target = 0
        self._catching_up = False
        # batches whose events are known without a read: ours, and the others' that their
        # commit datagram carried: (start, end, events)
        self._known_batches: list[tuple[int, int, builtins.list[Event]]] = []

    # ------------------------------------------------------------ lifecycle

    def start(self) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self._start())

    async def _start(self) -> None:
        self._writer.start()
        if self._readers is not self._writer:
            self._readers.start()
        if self.shared:
            self._bell = CommitBell(self._reactor, self._catch_up, self._committed_elsewhere)
            self._bell.listen()
        try:
            self._revision, self._compacted, leases = await self._on_writer(self._open)
        except BaseException:
            self._release_shared()
            self._stop_threads()  # threads left running would keep the process from exiting
            raise
        self._leases = dict(leases)
        self._hub.published = self._revision
        self._running = True
        loops: builtins.list[tuple[float, Callable[[], Any]]] = []
        if self.shared:
            loops.append((SHARED_POLL_INTERVAL, self._poll_shared))
        if self.maintenance:
            loops += [(self.lease_sweep_interval, self._sweep_leases),
                      (self.compaction_interval, self._periodic_compact)]
        for interval, fn in loops:
            if interval and interval > 0:
                loop = task.LoopingCall(fn)
                loop.clock = self._reactor
                loop.start(interval, now=False).addErrback(
                    lambda f: log.failure("storage maintenance loop failed", f))
                self._loops.append(loop)

    def stop(self) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self._stop())

    async def _stop(self) -> None:
        if not self._running:
            return
        self._running = False
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        self._hub.close()
        for d in list(self._compactions):
            try:
                await d
            except Exception:
                pass  # already reported to whoever asked for it
        while self._batch is not None or self._queue:
            # Let acknowledged-to-be work finish: queued writes still commit.
            if self._batch is None:
                self._kick()
            if self._batch is not None:
                await self._batch
        await self._on_writer(self._close_writer)
        self._release_shared()
        self._stop_threads()

    def _release_shared(self) -> None:
        if self._bell is not None:
            self._bell.close()
        if self._shared_revision is not None:
            self._shared_revision.close()

    def _stop_threads(self) -> None:
        if self._readers is not self._writer:
            # stop() lets in-flight reads finish (joining idle threads is
            # quick); only then are their connections closed.
            self._readers.stop()
            self._close_reader_conns()
        self._writer.stop()

    def _open(self) -> tuple[int, int, list[tuple[int, float]]]:
        if not self._memory:
            # 0600 whatever the umask; SQLite gives its -wal and -shm files the database's mode
            private_files.ensure_private_file(self.path)
        if self._bell is not None:
            self._shared_revision = SharedRevision(self.path + "-rev")
        # Processes opening a new file at once take turns: setting up the journal and the
        # tables upgrades a read lock to a write lock, which SQLite refuses at once (no
        # busy wait: it could deadlock) while another process does the same.
        with self._exclusive():
            conn = _connect(self.path)
            try:
                return self._open_locked(conn)
            except BaseException:
                self._wconn = None
                conn.close()
                raise

    def _open_locked(self, conn: sqlite3.Connection) -> tuple[int, int, list[tuple[int, float]]]:
        # auto_vacuum must be chosen before the first table exists; INCREMENTAL
        # lets compaction hand freed pages back to the file system.
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        if not self._memory:
            conn.execute("PRAGMA journal_mode = WAL")
        # synchronous=FULL: every commit fsyncs the WAL, so an acknowledged
        # write survives not only kill -9 (NORMAL would suffice for that, the
        # WAL is in the OS page cache before COMMIT returns) but also power
        # loss or a kernel crash, as etcd's fsync-per-commit does.  Group
        # commit (see _kick) amortises the fsync over every queued write.
        conn.execute("PRAGMA synchronous = FULL")
        # Keep the WAL file from staying large after a burst.
        conn.execute("PRAGMA journal_size_limit = 8388608")
        conn.executescript(SCHEMA)
        if not self._memory:
            for suffix in ("-wal", "-shm"):  # made by an older version, or under an older umask
                private_files.tighten(self.path + suffix)
        self._wconn = conn
        if self._bell is not None:
            self._bell.join(conn)
        meta = dict(conn.execute("SELECT name, value FROM meta"))
        top = conn.execute("SELECT max(rev) FROM kv").fetchone()[0] or 0
        self._w_rev = max(meta["revision"], top)
        leases = conn.execute("SELECT id, expires FROM leases").fetchall()
        return self._w_rev, meta["compacted"], leases

    def _close_writer(self) -> None:
        if self._wconn is not None:
            if self._bell is not None:
                self._bell.leave(self._wconn)
            if not self._memory:
                try:
                    self._wconn.execute(f"PRAGMA wal_checkpoint({self._checkpoint_mode})")
                except sqlite3.Error:
                    pass
            self._wconn.close()
            self._wconn = None

    def _close_reader_conns(self) -> None:
        with self._rconns_lock:
            for conn in self._rconns:
                conn.close()
            self._rconns = []

    @property
    def _checkpoint_mode(self) -> str:
        # TRUNCATE waits for every reader; other processes' readers must not hold up this one
        return "PASSIVE" if self.shared else "TRUNCATE"

    def _on_writer(self, fn: Callable, *args: Any) -> defer.Deferred:
        return threads.deferToThreadPool(self._reactor, self._writer, fn, *args)

    def _on_readers(self, fn: Callable, *args: Any) -> defer.Deferred:
        return threads.deferToThreadPool(self._reactor, self._readers, fn, *args)

    # ------------------------------------------------------------ reads

    def _rconn(self) -> sqlite3.Connection:
        """This thread's read connection (the writer's for an in-memory store)."""
        if self._reads_on_writer:
            assert self._wconn is not None
            return self._wconn
        conn = self._local.conn
        if conn is None:
            conn = _connect(self.path)
            conn.execute("PRAGMA query_only = 1")
            self._local.conn = conn
            with self._rconns_lock:
                self._rconns.append(conn)
        return conn

    def _read(self, fn: Callable, *args: Any) -> defer.Deferred:
        """Run ``fn(conn, revision, compacted, *args)`` in one read snapshot."""
        if not self._running:
            return defer.fail(UnavailableError("the sqlite storage is not running"))

        def run() -> Any:
            conn = self._rconn()
            conn.execute("BEGIN")
            try:
                meta = dict(conn.execute("SELECT name, value FROM meta"))
                return fn(conn, meta["revision"], meta["compacted"], *args)
            finally:
                conn.execute("COMMIT")
        return self._on_readers(run)

    @staticmethod
    def _at(revision: int, current: int, compacted: int) -> int:
        """The revision to read at, or raise as etcd does."""
        if revision <= 0:
            return current
        if revision > current:
            raise FutureRevisionError(revision, current)
        if revision < compacted:
            raise CompactedError(revision, compacted)
        return revision

    def current_revision(self) -> defer.Deferred:
        return defer.succeed(self.local_revision())

    def flush_progress(self) -> None:
        """Watchers learn now that they have everything published (see sqlite_watch)."""
        self._hub.flush_progress()

    def local_revision(self) -> int:
        """The latest committed revision, known without a round trip (see the Storage contract):
        this process commits every write, or, shared, every process advertises its own in
        :class:`SharedRevision` before acknowledging them."""
        if self._shared_revision is not None:
            return max(self._revision, self._shared_revision.get())
        return self._revision

    def compacted_revision(self) -> defer.Deferred:
        if self.shared:  # another process may have compacted
            return self._read(lambda conn, current, compacted: compacted)
        return defer.succeed(self._compacted)

    def get(self, key: str, revision: int = 0) -> defer.Deferred:
        return self._read(self._get, key, revision)

    def _get(self, conn: sqlite3.Connection, current: int, compacted: int, key: str,
             revision: int) -> Optional[KeyValue]:
        at = self._at(revision, current, compacted)
        if at == current:
            row = conn.execute(f"SELECT {_LATEST_COLS} FROM latest l JOIN kv k ON k.rev = l.rev "
                               "WHERE l.key = ?", (key.encode(),)).fetchone()
            return _kv(row) if row else None
        row = conn.execute("SELECT key, value, create_rev, rev, lease, deleted FROM kv "
                           "WHERE key = ? AND rev <= ? ORDER BY rev DESC LIMIT 1",
                           (key.encode(), at)).fetchone()
        return _kv(row) if row and not row[5] else None

    def list(self, prefix: str, revision: int = 0, limit: int = 0, start_key: str = "") -> defer.Deferred:
        return self._read(self._list, prefix, revision, limit, start_key)

    def _list(self, conn: sqlite3.Connection, current: int, compacted: int, prefix: str, revision: int,
              limit: int, start_key: str) -> ListResult:
        at = self._at(revision, current, compacted)
        cond, params = _range(prefix, start_key)
        if at == current:
            source = (f"SELECT {_LATEST_COLS} FROM latest l JOIN kv k ON k.rev = l.rev "
                      f"WHERE {_range(prefix, start_key, 'l.key')[0]}")
            counted = f"SELECT count(*) FROM latest WHERE {cond}"
        else:
            # The newest row of each key at or below the revision, unless a tombstone.
            source = ("SELECT key, value, create_rev, rev, lease FROM ("
                      "SELECT key, value, create_rev, max(rev) AS rev, lease, deleted FROM kv "
                      f"WHERE {cond} AND rev <= ? GROUP BY key) WHERE deleted = 0")
            counted = f"SELECT count(*) FROM ({source})"
            params = params + [at]
        sql = source + " ORDER BY 1"
        if limit > 0:
            rows = conn.execute(sql + " LIMIT ?", params + [limit + 1]).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            count = conn.execute(counted, params).fetchone()[0] if more else len(rows)
        else:
            rows = conn.execute(sql, params).fetchall()
            more, count = False, len(rows)
        return ListResult([_kv(r) for r in rows], at, more, count)

    def count(self, prefix: str) -> defer.Deferred:
        def run(conn: sqlite3.Connection, current: int, compacted: int) -> int:
            cond, params = _range(prefix)
            return conn.execute(f"SELECT count(*) FROM latest WHERE {cond}", params).fetchone()[0]
        return self._read(run)

    def _read_history(self, prefix: str, after: int, bound: int, limit: int) -> defer.Deferred:
        """Events under ``prefix`` with after < revision <= bound (for watch replay)."""
        def run(conn: sqlite3.Connection, current: int, compacted: int) -> list[Event]:
            return _history(conn, compacted, prefix, after, bound, limit)
        return self._read(run)

    # ------------------------------------------------------------ writes

    def _write(self, op: Callable, *args: Any) -> defer.Deferred:
        """Queue a write; it commits with whatever else is queued (group commit)."""
        if not self._running:
            return defer.fail(UnavailableError("the sqlite storage is not running"))
        d: defer.Deferred = defer.Deferred()
        self._queue.append((op, args, d))
        self._kick()
        return d

    def _kick(self) -> None:
        if self._batch is not None or not self._queue:
            return
        self._batch = self._on_writer(self._commit_queued)
        self._batch.addCallback(self._batch_done)

    def _batch_done(self, done: tuple[builtins.list[QueuedWrite], Any]) -> None:
        self._batch = None
        # The writes queued meanwhile commit on the writer thread while this batch's events
        # and requests are carried on here: kicked after them, a burst's writes waited for
        # every answer of the batch before (tens of ms on a busy reactor) besides its fsync.
        # Publication stays in commit order: the next batch's outcome is handled on this
        # thread, after this call.
        self._kick()
        batch, outcome = done
        if isinstance(outcome, BaseException):
            err = outcome if isinstance(outcome, StorageError) else UnavailableError(f"sqlite: {outcome}")
            for _, _, d in batch:
                d.errback(err)
        else:
            start, revision, results = outcome
            events = [e for ok, _, evs in results if ok for e in evs]
            if self.shared:
                self._committed_here(start, revision, events)
            else:
                self._revision = max(self._revision, revision)
                self._hub.publish(events, self._revision)
            for (_, _, d), (ok, value, _) in zip(batch, results):
                if ok:
                    d.callback(value)
                else:
                    d.errback(value)
        self._kick()  # (writes the answers queued, when the batch kicked above was empty)

    def _exclusive(self) -> ContextManager[None]:
        """Writer thread: the cross-process writers' lock when shared (see sqlite_peers)."""
        if self._shared_revision is not None:
            return self._shared_revision.writing()
        return contextlib.nullcontext()

    def _commit_queued(self) -> tuple[builtins.list[QueuedWrite], Any]:
        """Writer thread: commit the queued writes in one transaction (one fsync for all).

        The batch is taken once the writers' lock is held, so writes that queued while
        another process committed join it (taken before the wait, with two workers nearly
        every commit held one write, and every write paid an fsync).  Returns the batch
        and, for the batch, the revision before and after it and each op's outcome, or the
        error that failed them all.
        """
        batch: builtins.list[QueuedWrite] = []
        try:
            with self._exclusive():
                batch = self._take_queued()
                return batch, self._commit_batch([(op, args) for op, args, _ in batch])
        except Exception as err:  # the lock or the transaction failed: so do the writes
            return batch or self._take_queued(), err

    def _take_queued(self) -> builtins.list[QueuedWrite]:
        """Writer thread: the next batch (the reactor appends meanwhile, as deques allow)."""
        queue = self._queue
        return [queue.popleft() for _ in range(min(len(queue), MAX_BATCH))]

    def _commit_batch(self, ops: builtins.list[tuple[Callable, tuple]]) -> tuple[int, int, builtins.list]:
        """Writer thread, holding the writers' lock: run every op in one transaction.

        Returns the revision before and after the batch, and each op's outcome.
        """
        conn = self._wconn
        assert conn is not None
        results = []
        peers: builtins.list[str] = []
        conn.execute("BEGIN IMMEDIATE")
        start = self._w_rev
        try:
            if self.shared:  # another process may have written since our last batch
                self._w_rev = start = conn.execute("SELECT value FROM meta WHERE name = 'revision'").fetchone()[0]
            for op, args in ops:
                try:
                    value, events = op(conn, *args)
                    results.append((True, value, events))
                except StorageError as err:  # raised before the op wrote anything
                    results.append((False, err, []))
            if self._w_rev != start:
                conn.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (self._w_rev,))
                if self._bell is not None and self._shared_revision is not None:
                    self._shared_revision.advance(self._w_rev)  # under the write lock: it only grows
                    peers = self._bell.peers(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._w_rev = start
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if peers and self._bell is not None:
            events = [e for ok, _, evs in results if ok for e in evs]
            self._bell.ring(peers, self._w_rev, encode_batch(start, self._w_rev, events))
        return start, self._w_rev, results

    # Each op runs on the writer thread inside the batch transaction, checks
    # its preconditions before writing, and returns (result, events).

    def _current(self, conn: sqlite3.Connection, key: bytes) -> Optional[KeyValue]:
        row = conn.execute(f"SELECT {_LATEST_COLS} FROM latest l JOIN kv k ON k.rev = l.rev "
                           "WHERE l.key = ?", (key,)).fetchone()
        return _kv(row) if row else None

    def _append(self, conn: sqlite3.Connection, key: bytes, value: bytes, create_rev: int, prev_rev: int,
                deleted: bool, lease: int) -> int:
        self._w_rev += 1
        conn.execute("INSERT INTO kv VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (self._w_rev, key, value, create_rev or self._w_rev, prev_rev, int(deleted), lease))
        return self._w_rev

    def _op_create(self, conn: sqlite3.Connection, key: str, value: bytes, lease: int) -> tuple:
        k = key.encode()
        if conn.execute("SELECT 1 FROM latest WHERE key = ?", (k,)).fetchone():
            raise KeyExistsError(key)
        if lease and not conn.execute("SELECT 1 FROM leases WHERE id = ?", (lease,)).fetchone():
            raise StorageError(f"requested lease not found: {lease}")
        rev = self._append(conn, k, value, 0, 0, False, lease)
        conn.execute("INSERT INTO latest VALUES (?, ?, ?)", (k, rev, lease))
        kv = KeyValue(key, value, rev, rev, lease)
        return kv, [Event(PUT, kv, None, rev)]

    def _guard(self, conn: sqlite3.Connection, key: str, expected: int) -> KeyValue:
        cur = self._current(conn, key.encode())
        if cur is None:
            raise KeyNotFoundError(key)
        if expected and cur.mod_revision != expected:
            raise ConflictError(key, cur)
        return cur

    def _op_update(self, conn: sqlite3.Connection, key: str, value: bytes, expected: int,
                   lease: Optional[int] = None) -> tuple:
        cur = self._guard(conn, key, expected)
        # Without a lease the key keeps its own: updates of leased objects (Events) still expire.
        if lease is None:
            lease = cur.lease
        elif lease and not conn.execute("SELECT 1 FROM leases WHERE id = ?", (lease,)).fetchone():
            raise StorageError(f"requested lease not found: {lease}")
        rev = self._append(conn, key.encode(), value, cur.create_revision, cur.mod_revision, False, lease)
        conn.execute("UPDATE latest SET rev = ?, lease = ? WHERE key = ?", (rev, lease, key.encode()))
        kv = KeyValue(key, value, cur.create_revision, rev, lease)
        return kv, [Event(PUT, kv, cur, rev)]

    def _op_delete(self, conn: sqlite3.Connection, key: str, expected: int) -> tuple:
        cur = self._guard(conn, key, expected)
        rev = self._append(conn, key.encode(), cur.value, cur.create_revision, cur.mod_revision, True, cur.lease)
        conn.execute("DELETE FROM latest WHERE key = ?", (key.encode(),))
        kv = KeyValue(key, cur.value, cur.create_revision, rev, cur.lease)
        return kv, [Event(DELETE, kv, cur, rev)]

    def _op_grant(self, conn: sqlite3.Connection, ttl: int, expires: float) -> tuple:
        cursor = conn.execute("INSERT INTO leases (ttl, expires) VALUES (?, ?)", (ttl, expires))
        return cursor.lastrowid, []

    def _op_expire(self, conn: sqlite3.Connection, now: float) -> tuple:
        expired = [r[0] for r in conn.execute("SELECT id FROM leases WHERE expires <= ?", (now,))]
        events: list[Event] = []
        for lease in expired:
            keys = [r[0].decode() for r in conn.execute("SELECT key FROM latest WHERE lease = ?", (lease,))]
            for key in keys:
                events.extend(self._op_delete(conn, key, 0)[1])
            conn.execute("DELETE FROM leases WHERE id = ?", (lease,))
        return expired, events

    def create(self, key: str, value: bytes, lease: int = 0) -> defer.Deferred:
        return self._write(self._op_create, key, value, lease)

    def update(self, key: str, value: bytes, expected_mod_revision: int = 0,
               lease: Optional[int] = None) -> defer.Deferred:
        return self._write(self._op_update, key, value, expected_mod_revision, lease)

    def delete(self, key: str, expected_mod_revision: int = 0) -> defer.Deferred:
        return self._write(self._op_delete, key, expected_mod_revision)

    # ------------------------------------------------------------ snapshots

    def snapshots(self) -> Snapshots:
        return self

    def snapshot(self) -> defer.Deferred:
        return self._write(self._op_snapshot)

    def restore(self) -> defer.Deferred:
        return self._write(self._op_restore)

    def _op_snapshot(self, conn: sqlite3.Connection) -> tuple:
        conn.execute("DELETE FROM snapshot")
        conn.execute("INSERT INTO snapshot SELECT l.key, k.value, l.rev, l.lease "
                     "FROM latest l JOIN kv k ON k.rev = l.rev")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (self._w_rev,))
        return self._w_rev, []

    def _op_restore(self, conn: sqlite3.Connection) -> tuple:
        """Delete keys written since the snapshot, rewrite changed ones, re-create deleted ones.

        A key whose saved lease has expired since stays deleted (its lease would have deleted
        it); a rewritten key keeps its current lease then.  It writes the rows the single-key
        ops would, but each kind of change is read with one query and written with one
        ``executemany`` (undoing a thousand changes then takes a few milliseconds).
        """
        if conn.execute("SELECT 1 FROM meta WHERE name = 'snapshot'").fetchone() is None:
            raise NoSnapshotError()
        alive = {0} | {r[0] for r in conn.execute("SELECT id FROM leases")}
        rows: list[tuple] = []  # new kv rows, in revision order
        events: list[Event] = []

        def append(key: bytes, value: bytes, create_rev: int, prev: Optional[KeyValue], deleted: bool,
                   lease: int) -> KeyValue:
            self._w_rev += 1
            rev = self._w_rev
            rows.append((rev, key, value, create_rev or rev, prev.mod_revision if prev else 0, int(deleted), lease))
            kv = KeyValue(key.decode(), value, create_rev or rev, rev, lease)
            events.append(Event(DELETE if deleted else PUT, kv, prev, rev))
            return kv

        written = conn.execute(f"SELECT {_LATEST_COLS} FROM latest l JOIN kv k ON k.rev = l.rev WHERE NOT EXISTS "
                               "(SELECT 1 FROM snapshot s WHERE s.key = l.key) ORDER BY l.key").fetchall()
        for row in written:
            cur = _kv(row)
            append(row[0], cur.value, cur.create_revision, cur, True, cur.lease)
        changed = conn.execute(f"SELECT s.value, s.lease, {_LATEST_COLS} FROM snapshot s "
                               "JOIN latest l ON l.key = s.key JOIN kv k ON k.rev = l.rev "
                               "WHERE l.rev != s.rev ORDER BY s.key").fetchall()
        rewritten: list[KeyValue] = []
        for value, lease, *row in changed:
            cur = _kv(tuple(row))
            if value == cur.value and lease == cur.lease:
                continue  # changed and changed back: the content is the snapshot's
            rewritten.append(append(row[0], bytes(value), cur.create_revision, cur, False,
                                    lease if lease in alive else cur.lease))
        missing = conn.execute("SELECT key, value, lease FROM snapshot s WHERE NOT EXISTS "
                               "(SELECT 1 FROM latest l WHERE l.key = s.key) ORDER BY key").fetchall()
        recreated = [append(key, bytes(value), 0, None, False, lease)
                     for key, value, lease in missing if lease in alive]
        conn.executemany("INSERT INTO kv VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("DELETE FROM latest WHERE key = ?", [(row[0],) for row in written])
        conn.executemany("UPDATE latest SET rev = ?, lease = ? WHERE key = ?",
                         [(kv.mod_revision, kv.lease, kv.key.encode()) for kv in rewritten])
        conn.executemany("INSERT INTO latest VALUES (?, ?, ?)",
                         [(kv.key.encode(), kv.mod_revision, kv.lease) for kv in recreated])
        return RestoreResult(len(written), len(rewritten), len(recreated), self._w_rev), events

    # ------------------------------------------------------------ watch

    def watch(self, prefix: str, after_revision: int, on_event: EventHandler, on_error: ErrorHandler,
              on_progress: Optional[ProgressHandler] = None) -> Watch:
        if not self._running:
            w = self._hub.watch(prefix, self._revision, on_event, on_error, on_progress)
            w.cancel()
            self._reactor.callLater(0, on_error, UnavailableError("the sqlite storage is not running"))
            return w
        return self._hub.watch(prefix, after_revision, on_event, on_error, on_progress,
                               compacted=self._compacted)

    # ------------------------------------------------------------ leases

    def grant_lease(self, ttl_seconds: int) -> defer.Deferred:
        expires = time.time() + ttl_seconds

        def granted(lease: int) -> int:
            self._leases[lease] = expires
            return lease
        return self._write(self._op_grant, ttl_seconds, expires).addCallback(granted)

    def _sweep_leases(self) -> Optional[defer.Deferred]:
        """Delete the keys of expired leases through the normal delete path."""
        now = time.time()
        if self._sweeping or not self._running:
            return None
        if not self.shared and not any(t <= now for t in self._leases.values()):
            return None  # (shared, leases granted by other processes are only in the database)
        self._sweeping = True

        def swept(expired: list[int]) -> None:
            for lease in expired:
                self._leases.pop(lease, None)

        def done(result: Any) -> None:
            self._sweeping = False
            if isinstance(result, Failure):
                log.failure("lease sweep failed", result)
        d = self._write(self._op_expire, now).addCallback(swept)
        d.addBoth(done)
        return None  # the loop keeps ticking; a slow sweep is skipped, not stacked

    # ------------------------------------------------------------ compaction

    def compact(self, revision: int) -> defer.Deferred:
        if not self._running:
            return defer.fail(UnavailableError("the sqlite storage is not running"))
        d = defer.Deferred.fromCoroutine(self._compact(revision))
        self._compactions.add(d)

        def finished(result: Any) -> Any:
            self._compactions.discard(d)
            return result
        return d.addBoth(finished)

    async def _compact(self, revision: int) -> None:
        current = self.local_revision()
        if revision > current:
            raise FutureRevisionError(revision, current)
        if revision <= self._compacted:
            if revision < self._compacted:
                raise CompactedError(revision, self._compacted)
            return
        # Publish the new floor first in its own commit, so from here on reads
        # and watch replays below it fail rather than see half-removed history.
        await self._on_writer(self._mark_compacted, revision)
        self._compacted = revision
        low = 0
        while low < revision:
            high = min(low + COMPACT_STEP, revision)
            await self._on_writer(self._compact_step, low, high, revision)
            low = high
        await self._on_writer(self._reclaim)

    def _mark_compacted(self, revision: int) -> None:
        conn = self._wconn
        assert conn is not None
        conn.execute("UPDATE meta SET value = ? WHERE name = 'compacted' AND value < ?", (revision, revision))

    def _compact_step(self, low: int, high: int, revision: int) -> None:
        """Remove history rows in [low, high) that no read at >= ``revision`` needs.

        Kept: every row at or after ``revision``, and each key's newest row
        below it unless that row is a tombstone (it is the key's value at
        ``revision``, and the prev_kv of the key's next event).
        """
        conn = self._wconn
        assert conn is not None
        with self._exclusive():
            self._compact_step_locked(conn, low, high, revision)

    @staticmethod
    def _compact_step_locked(conn: sqlite3.Connection, low: int, high: int, revision: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "DELETE FROM kv WHERE rev >= ? AND rev < ? AND (deleted = 1 OR rev < "
                "(SELECT max(n.rev) FROM kv n WHERE n.key = kv.key AND n.rev < ?))",
                (low, high, revision))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _reclaim(self) -> None:
        """Give freed pages back to the file system and trim the WAL."""
        conn = self._wconn
        assert conn is not None
        # The pragma frees one page per step and returns no row, so execute()
        # would stop after one page; executescript() steps it to the end.
        conn.executescript("PRAGMA incremental_vacuum;")
        if not self._memory:
            conn.execute(f"PRAGMA wal_checkpoint({self._checkpoint_mode})")

    def _periodic_compact(self) -> Optional[defer.Deferred]:
        """kube-apiserver's compaction schedule: every interval, compact to the revision seen one
        interval earlier (keeping at least ``compaction_retain`` revisions), so every reader of an
        old revision (a watch catching up, a continue token) has one to two intervals before it
        is compacted away, whether or not anything was written since."""
        current = self.local_revision()
        seen, self._seen_revision = self._seen_revision, current
        target = min(seen, current - self.compaction_retain)
        if target <= self._compacted or not self._running:
            return None
        d = self.compact(target)
        d.addErrback(lambda f: log.failure("periodic compaction to {rev} failed", f, rev=target))
        return d

    # ------------------------------------------------------------ shared: the others' commits

    def _committed_here(self, start: int, end: int, events: builtins.list[Event]) -> None:
        """Publish a batch of ours, in order with the other processes' writes."""
        if end <= start:
            return
        self._known_batches.append((start, end, events))
        self._catch_up(end)

    def _committed_elsewhere(self, start: int, end: int, events: builtins.list[Event]) -> None:
        """Another process's batch, carried by its commit datagram: published as ours are
        (when it follows on from what is published; a gap before it is read first)."""
        if end <= start or end <= self._hub.published:
            return
        self._known_batches.append((start, end, events))
        self._catch_up(end)

    def _poll_shared(self) -> None:
        """The safety net for a lost ring."""
        if self._shared_revision is not None:
            self._catch_up(self._shared_revision.get())

    def _catch_up(self, revision: int) -> None:
        """Publish every revision up to ``revision`` (reactor thread; one catch-up at a time)."""
        self._catch_up_target = max(self._catch_up_target, revision)
        if self._catching_up or not self._running or self._catch_up_target <= self._hub.published:
            return
        self._catching_up = True
        d = defer.Deferred.fromCoroutine(self._catch_up_loop())
        d.addErrback(lambda f: log.failure("catching up with the shared database failed", f))

    async def _catch_up_loop(self) -> None:
        try:
            while self._running and self._catch_up_target > self._hub.published:
                if self._publish_known_batch():
                    continue
                # read only what is not known: up to where a known batch starts, if one is waiting
                published = self._hub.published
                bound = min((start for start, _, _ in self._known_batches if start > published), default=0)
                try:
                    events, upto, compacted = await self._read(self._read_tail, published, bound)
                except CompactedError as err:
                    await self._skip_compacted(err)
                    continue
                self._compacted = max(self._compacted, compacted)
                self._revision = max(self._revision, upto)
                self._hub.publish(events, upto)
        except UnavailableError:
            pass  # stopping
        finally:
            self._catching_up = False
            self._known_batches = [b for b in self._known_batches if b[1] > self._hub.published]

    def _publish_known_batch(self) -> bool:
        """Publish a known batch that follows on from what is published (no read needed)."""
        published = self._hub.published
        self._known_batches = [b for b in self._known_batches if b[1] > published]
        for batch in self._known_batches:
            start, end, events = batch
            if start == published:
                self._known_batches.remove(batch)
                self._revision = max(self._revision, end)
                self._hub.publish(events, end)
                return True
        return False

    @staticmethod
    def _read_tail(conn: sqlite3.Connection, current: int, compacted: int, after: int,
                   bound: int) -> tuple[builtins.list[Event], int, int]:
        """Reader thread: the next page of events after ``after`` (up to ``bound``, if not 0),
        and the revision it reaches."""
        last = min(bound, current) if bound else current
        events = _history(conn, compacted, "", after, last, HISTORY_PAGE)
        upto = last if len(events) < HISTORY_PAGE else events[-1].revision
        return events, upto, compacted

    async def _skip_compacted(self, err: CompactedError) -> None:
        """Our watchers fell behind a compaction made elsewhere: they end (clients relist).

        The current revision is read first, and the watches end as the published revision
        jumps to it, in one reactor turn: a watch made meanwhile (a watch cache rebuilt from
        a list) would otherwise be told it had everything up to a revision whose events it
        never got."""
        current = await self._read(lambda conn, current, compacted: current)
        log.warn("the shared database was compacted past revision {rev}; ending watches", rev=self._hub.published)
        self._hub.end_all(err)
        self._revision = max(self._revision, current)
        self._hub.published = max(self._hub.published, current)

    # ------------------------------------------------------------ introspection

    def file_size(self) -> int:
        """Bytes on disk (database + WAL), for tests and metrics."""
        if self._memory:
            return 0
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))

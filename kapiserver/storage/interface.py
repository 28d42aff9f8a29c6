"""The storage contract every backend honours (DESIGN.md, "Storage").

It is modelled on etcd v3's MVCC key-value store, so the etcd backend is a thin
translation and the embedded SQLite backend reproduces the same semantics:

* one global revision, strictly increasing, bumped by every successful write
  (create, update, delete; one revision per write);
* every key carries ``create_revision`` and ``mod_revision`` (the revision of
  its last write); the registry exposes ``mod_revision`` as the object's
  ``resourceVersion``;
* reads at the latest or at a past revision; ``compact(R)`` forgets history
  older than ``R``: reading at a revision < R, or watching from a revision
  whose next event is < R, fails with :class:`CompactedError`;
* watches deliver, for a key prefix, every event with revision greater than
  the start revision, in revision order, exactly once.

Keys are ``str`` paths below the backend's own prefix (the backend adds its
prefix, e.g. ``/registry``, itself); values are ``bytes``.

Every method that does I/O returns a ``Deferred``; callers ``await`` them from
``async def`` code.  No method blocks the reactor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional, Protocol, Sequence, Union, runtime_checkable

from twisted.internet.defer import Deferred, succeed


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int = 0
    # Read through a key or encryption provider that is not the current one
    # (storage/encrypted.py): an update must write even an unchanged object.
    stale: bool = field(default=False, compare=False)
    # Encodings of the object this value holds, filled by whoever encodes it
    # (registry/encoded.py).  A KeyValue never changes, so an encoding stays
    # right for as long as the value lives; the watch cache hands the same
    # KeyValue to every read of an unchanged object, so every LIST of it (and
    # every watch-list) reuses the bytes instead of decoding and encoding again.
    encodings: Optional[dict] = field(default=None, init=False, compare=False, repr=False, hash=False)


class _SharedEmptyMemo(dict):
    """An empty memo shared by many values, which refuses to be written into: a write meant
    for one value's memo would give every other value that encoding."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a shared memo: replace it with a dict of the value's own, never write into it")

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _refuse  # type: ignore[assignment]


# ``KeyValue.encodings`` of a value known to decode (it was decoded once: for an index of the watch
# cache, a GET) while nothing is encoded of it yet, so a list need not decode it once more to check.
# Shared by every such value (the first encoding replaces it with a dict of the value's own).
DECODES: dict = _SharedEmptyMemo()


PUT = "PUT"
DELETE = "DELETE"


@dataclass(frozen=True)
class Event:
    """One change to one key.

    ``type`` is :data:`PUT` (create or update; a create has
    ``kv.create_revision == kv.mod_revision``) or :data:`DELETE`.  For a
    DELETE, ``kv`` holds the key's last value with ``mod_revision`` set to the
    revision of the delete.  ``prev_kv`` is the value before the change
    (``None`` for a create).  ``revision`` is the revision of the change.
    """

    type: str
    kv: KeyValue
    prev_kv: Optional[KeyValue]
    revision: int
    # A per-event memo for consumers (e.g. the encoded watch frame per content
    # type): the watch cache hands the same Event object to every watcher of a
    # prefix, so an event is decoded/encoded once however many watch it.
    cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @property
    def is_create(self) -> bool:
        return self.type == PUT and self.prev_kv is None


@dataclass(frozen=True)
class ListResult:
    """A page of a prefix range.

    ``revision`` is the store revision the page was read at (use it for the
    next page so pages are consistent).  ``more`` says whether keys follow the
    last one returned; ``count`` is the total number of keys in the whole
    requested range from ``start_key`` (before ``limit``), so callers can
    compute ``remainingItemCount``.

    ``memo`` (the watch cache's pages only) is shared by every read of this
    very page while nothing under it changes, so what a reader derives from the
    whole page is kept there and reused: the registry notes that every value
    decodes, the list encoders keep the encoded run of items per form.
    """

    items: list[KeyValue]
    revision: int
    more: bool
    count: int
    memo: Optional[dict] = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- errors


class StorageError(Exception):
    """Base of all storage failures.

    ``client_message``, when set, is what a client may be told when the failure reaches it unconverted
    (upstream answers 500 with its storage client's error text, e.g. ``etcdserver: request timed out``):
    the backend's own words, without what only the operator should see (endpoint addresses, paths).
    Without it the client gets the generic 500 and the log the whole message.
    """

    def __init__(self, message: str, client_message: Optional[str] = None) -> None:
        super().__init__(message)
        self.client_message = client_message


class KeyExistsError(StorageError):
    """create() of a key that exists."""

    def __init__(self, key: str):
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFoundError(StorageError):
    """update()/delete()/get_required of a key that does not exist."""

    def __init__(self, key: str):
        super().__init__(f"key not found: {key}")
        self.key = key


class ConflictError(StorageError):
    """A compare-and-swap precondition (expected mod revision) failed.

    ``current`` is the key's current value, so a retry loop can start again
    without another read.
    """

    def __init__(self, key: str, current: Optional[KeyValue]):
        super().__init__(f"mod revision mismatch: {key}")
        self.key = key
        self.current = current


class CompactedError(StorageError):
    """A read or watch asked for history older than the compacted revision."""

    def __init__(self, requested: int, compacted: int):
        super().__init__(f"required revision {requested} has been compacted (compacted revision {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(StorageError):
    """A read at a revision the store has not reached yet."""

    def __init__(self, requested: int, current: int):
        super().__init__(f"required revision {requested} is a future revision (current {current})")
        self.requested = requested
        self.current = current


class UnavailableError(StorageError):
    """The backend cannot be reached (etcd down, database closed)."""


# ---------------------------------------------------------------- watch


EventHandler = Callable[[Event], None]
ErrorHandler = Callable[[Exception], None]
ProgressHandler = Callable[[int], None]


class Watch(Protocol):
    """A running watch; ``cancel()`` stops delivery (idempotent)."""

    def cancel(self) -> None: ...

    def request_progress(self) -> Deferred:
        """Fire with a revision R once every event up to R was delivered, R being the
        backend's latest revision at some moment after the call (upstream's
        RequestWatchProgress).  Only a backend whose ``watch_progress`` is true vouches for
        the answer; a watch that cannot answer fails with :class:`StorageError`."""
        ...


# ---------------------------------------------------------------- backend


@runtime_checkable
class Storage(Protocol):
    """The storage contract.  See the module docstring for the semantics.

    Backends subclass it (so they inherit the capability defaults below)."""

    def start(self) -> Deferred:
        """Open/connect; fires when the store can serve."""

    def stop(self) -> Deferred:
        """Close; cancels all watches (their on_error is *not* called)."""

    def current_revision(self) -> Deferred:
        """Fire with the current (latest committed) revision."""

    def compacted_revision(self) -> Deferred:
        """Fire with the revision of the last compaction (0 if never)."""

    def get(self, key: str, revision: int = 0) -> Deferred:
        """Fire with the :class:`KeyValue` at ``revision`` (0 = latest), or ``None``."""

    def list(self, prefix: str, revision: int = 0, limit: int = 0, start_key: str = "") -> Deferred:
        """Fire with a :class:`ListResult` of keys beginning with ``prefix``.

        Keys are in byte order; ``start_key`` (inclusive, within the prefix)
        continues a paginated list; ``limit`` 0 means no limit; ``revision`` 0
        means latest.  Raises CompactedError / FutureRevisionError.
        """

    def count(self, prefix: str) -> Deferred:
        """Fire with the number of keys under ``prefix`` at the latest revision."""

    def create(self, key: str, value: bytes, lease: int = 0) -> Deferred:
        """Create-if-absent; fire with the new KeyValue or fail KeyExistsError."""

    def update(self, key: str, value: bytes, expected_mod_revision: int = 0,
               lease: Optional[int] = None) -> Deferred:
        """Compare-and-swap update; fire with the new KeyValue.

        ``expected_mod_revision`` 0 = unconditional (the key must still exist).
        ``lease`` None keeps the key's lease (an updated Event still expires);
        a lease id attaches that lease instead (a renewed TTL), 0 detaches.
        Fails KeyNotFoundError, ConflictError (carrying the current value).
        """

    def delete(self, key: str, expected_mod_revision: int = 0) -> Deferred:
        """Guarded delete; fire with the deleted KeyValue whose ``mod_revision``
        is the revision of the delete.  Fails KeyNotFoundError, ConflictError."""

    def watch(self, prefix: str, after_revision: int, on_event: EventHandler,
              on_error: ErrorHandler, on_progress: Optional[ProgressHandler] = None) -> Watch:
        """Deliver every change under ``prefix`` with revision > ``after_revision``.

        Events arrive in revision order with no gap and no duplicate, on the
        reactor thread.  If history after ``after_revision`` was compacted,
        ``on_error(CompactedError)`` is called (asynchronously) and the watch
        ends.  ``on_progress(revision)``, when given, is called now and then
        with a revision up to which the watcher has seen everything (etcd
        progress notifications); backends may call it after every event batch.
        """

    def compact(self, revision: int) -> Deferred:
        """Forget history older than ``revision``."""

    def grant_lease(self, ttl_seconds: int) -> Deferred:
        """Fire with a lease id; keys created with it are deleted (with DELETE
        events) once the TTL passes.  Backends without leases fire 0."""

    # ------------------------------------------------------------ capabilities
    #
    # Declared here, with the answer of a backend that lacks the capability as the
    # default body: a backend subclasses Storage and overrides what it can do, a
    # wrapper (storage/encrypted.py) forwards each of them, and no caller probes
    # a backend for them.

    @property
    def watch_progress(self) -> bool:
        """True when the backend's watches answer :meth:`Watch.request_progress` and the
        answers can be trusted: every write acknowledged before the request is at or
        below the revision answered (etcd with one member of a release that answers in
        order, see EtcdStorage).  The watch cache then serves consistent reads from
        memory after such an answer."""
        return False

    async def check_health(self) -> None:
        """Raise unless the backend can serve now (upstream's ReadinessCheck, /readyz/etcd)."""
        await self.current_revision()

    def local_revision(self) -> Optional[int]:
        """The latest committed revision when the backend knows it without a round trip
        (the embedded store, whose process commits every write), else None.  The watch
        cache then serves consistent single-key reads from memory."""
        return None

    def flush_progress(self) -> None:
        """Deliver pending progress notifications now (a backend that defers them)."""
        return None  # (none deferred)

    def unchanged_since(self, prefix: str, since: int, at: int, count: int) -> Deferred:
        """Fire True when, at revision ``at``, ``prefix`` holds ``count`` keys none of which
        was written after ``since``; False when that is not so or the backend cannot tell."""
        return succeed(False)

    # Reads with resourceVersion=0 semantics ("any recent state"), which the watch cache
    # answers from memory; a store without one answers them with a read at the latest.

    def list_cached(self, prefix: str, limit: int = 0, start_key: str = "") -> Deferred:
        """A :class:`ListResult` of any recent state of ``prefix``."""
        return self.list(prefix, 0, limit, start_key)

    def get_cached(self, key: str) -> Deferred:
        """Any recent :class:`KeyValue` of ``key`` (or None)."""
        return self.get(key)

    def peek(self, key: str) -> Optional[KeyValue]:
        """What a ready cache holds for ``key`` now, without I/O (None: no such copy)."""
        return None

    def cached_count(self, prefix: str) -> Optional[int]:
        """How many keys under ``prefix`` a ready cache holds now (None: no cache for it)."""
        return None

    def list_indexed(self, prefix: str, index: str, value_of: "IndexValue", values: frozenset[str],
                     revision: int = 0, start_key: str = "", any_state: bool = False) -> Deferred:
        """Fire with a :class:`ListResult` of every key under ``prefix`` from ``start_key`` whose
        ``value_of`` is in ``values`` (the whole range: ``more`` is false), in key order, from an
        index (the watch cache's: storage/cacher_index.py); or with None when no index can answer,
        and the caller lists the prefix instead (a store without a cache always does).

        ``index`` names ``value_of`` (the same name, the same function).  ``revision`` 0 is a
        consistent read, another revision must be exact; ``any_state``: any recent state
        (``resourceVersion=0``).  The index may hold more keys than match: callers still apply
        their selectors to what they get.
        """
        return succeed(None)

    def snapshots(self) -> Optional["Snapshots"]:
        """The backend's snapshots for per-test isolation (the embedded store keeps them),
        or None when it cannot take them."""
        return None

    def prepare(self, prefix: str, indexes: "Sequence[tuple[str, IndexValue]]" = ()) -> Deferred:
        """Fire once what serves reads of ``prefix`` from memory is built, with the named
        ``indexes`` (as :meth:`list_indexed` names them): the watch cache of ``prefix``, which
        otherwise the first read of it builds (the server waits for it before it is ready, as
        upstream's watch caches are built before kube-apiserver is).  A store without a cache has
        nothing to build."""
        return succeed(None)

# ---------------------------------------------------------------- snapshots (tests)


class RestoreResult(NamedTuple):
    """What :meth:`Snapshots.restore` changed: keys deleted (written since the snapshot), rewritten
    (changed since) and re-created (deleted since), and the revision after it."""

    deleted: int
    rewritten: int
    recreated: int
    revision: int


class Snapshots(Protocol):
    """A backend that can go back to a saved state without a restart (per-test isolation).

    Going back writes forward: the restore is one transaction of ordinary deletes, updates
    and creates at new revisions, with their watch events, so revisions never go backwards
    and every watcher (the watch cache, a client's informer) follows it as it follows any
    write.
    """

    def snapshot(self) -> Deferred:
        """Save the keys and values of the latest revision; fire with that revision."""

    def restore(self) -> Deferred:
        """Make the latest revision hold what the snapshot saved; fire with a
        :class:`RestoreResult`, or fail :class:`NoSnapshotError`."""


class NoSnapshotError(StorageError):
    """restore() before any snapshot()."""

    def __init__(self) -> None:
        super().__init__("no snapshot was taken")


# ---------------------------------------------------------------- secondary indexes

# The value of a stored object a secondary index is by (None: the object has none; a tuple: the
# object is found under each of these values, as an index of all labels finds it under each label).
IndexValue = Callable[[KeyValue], Union[None, str, tuple[str, ...]]]

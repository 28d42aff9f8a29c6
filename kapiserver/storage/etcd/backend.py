"""EtcdStorage: the storage contract (kapiserver.storage.interface) on etcd v3.

The contract is modelled on etcd, so this is mostly a translation: keys live
at ``<prefix><key>`` (``/registry/configmaps/ns/name``, as kube-apiserver lays
them out), revisions are etcd's, create/update/delete are single txns guarded
on create_revision / mod_revision that return the current value when the
guard fails, and leases are etcd leases.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.storage.etcd.client import Compare, EtcdClient, EtcdKV, Op, RangeResponse, prefix_end
from kapiserver.storage.etcd.read_batch import LatestReads
from kapiserver.storage.etcd.tls import EtcdTLS
from kapiserver.storage.etcd.watch import EtcdWatch
from kapiserver.storage.interface import (CompactedError, ConflictError, ErrorHandler, EventHandler,
                                          FutureRevisionError, KeyExistsError, KeyNotFoundError, KeyValue,
                                          ListResult, ProgressHandler, Storage, StorageError, UnavailableError,
                                          Watch)

log = Logger()


def _deferred(coro) -> defer.Deferred:
    return defer.Deferred.fromCoroutine(coro)


def _created(answer: tuple[bool, int], key: str, value: bytes, lease: int) -> KeyValue:
    succeeded, revision = answer
    if not succeeded:
        raise KeyExistsError(key)
    return KeyValue(key, value, revision, revision, lease)


# etcd releases whose answer to a progress request waits until the stream sent every event
# before the revision it names (kubernetes/kubernetes#123192); kube-apiserver
# requests watch progress from the same ones.
_RELIABLE_PROGRESS_SINCE = ((3, 4, 31), (3, 5, 13))


def answers_progress_in_order(version: str) -> bool:
    """Whether an etcd of this version (``3.5.16``) answers a progress request only after the
    events it covers."""
    try:
        release = tuple(int(part) for part in version.split("-")[0].split(".")[:3])
    except ValueError:
        return False
    if release < (3, 5):
        return release >= _RELIABLE_PROGRESS_SINCE[0]
    return release >= _RELIABLE_PROGRESS_SINCE[1]


class EtcdStorage(Storage):
    """The etcd backend.  ``endpoints`` are client URLs (``http(s)://host:port``).

    ``watch_silence_timeout`` (seconds, 0 = off): a watch stream that brings
    nothing, not even a progress notification, for that long is reconnected.

    ``watch_progress`` says whether the watch cache may take a watch's answer
    to a progress request (:meth:`EtcdWatch.request_progress`) as proof that
    it holds every write committed before a read began, and so serve
    consistent reads from memory.  ``None`` (the default) decides at
    :meth:`start`: yes when etcd is a single member of a release that answers
    progress requests in order.  With several members a watch may be served
    by one that has not yet applied a write another acknowledged, so reads go
    to etcd's quorum, as before.
    """

    def __init__(self, endpoints: list[str], prefix: str = "/registry", tls: Optional[EtcdTLS] = None,
                 request_timeout: float = 10.0, reactor=None, watch_silence_timeout: float = 0.0,
                 watch_progress: Optional[bool] = None):
        self.client = EtcdClient(endpoints, tls=tls, request_timeout=request_timeout, reactor=reactor)
        self._watch_progress_setting = watch_progress
        self._watch_progress = bool(watch_progress)
        # reads of one key at the latest revision, sharing round trips under load
        self._latest = LatestReads(self.client)
        self.watch_silence_timeout = watch_silence_timeout
        self.reactor = self.client.reactor
        self.prefix = prefix.rstrip("/")
        self._prefix_bytes = self.prefix.encode("utf-8")
        self._watches: set[EtcdWatch] = set()
        # The highest compaction this process knows of; a floor for searches.
        self._known_compacted = 0

    # ------------------------------------------------------------ keys

    def _key(self, key: str) -> bytes:
        return self._prefix_bytes + key.encode("utf-8")

    def _unkey(self, raw: bytes) -> str:
        if raw.startswith(self._prefix_bytes):
            raw = raw[len(self._prefix_bytes):]
        return raw.decode("utf-8", "surrogateescape")

    def _kv(self, kv: EtcdKV) -> KeyValue:
        return KeyValue(self._unkey(kv.key), kv.value, kv.create_revision, kv.mod_revision, kv.lease)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> defer.Deferred:
        """Fire once etcd answers (UnavailableError otherwise)."""
        return _deferred(self._start())

    async def _start(self) -> None:
        status = await self.client.status()
        if self._watch_progress_setting is None:
            version = str(status.get("version", ""))
            try:
                members = len((await self.client.call("/v3/cluster/member/list", {})).get("members", ()))
            except StorageError as e:  # e.g. etcd's own RBAC refuses it: assume more than one
                log.warn("cannot list etcd's members ({error}); consistent reads go to etcd", error=e)
                members = 0
            self._watch_progress = members == 1 and answers_progress_in_order(version)
            log.info("etcd {version}, {members} member(s): consistent reads are served {where}",
                     version=version, members=members,
                     where="from the watch cache after a progress request" if self._watch_progress
                     else "by etcd")

    @property
    def watch_progress(self) -> bool:
        return self._watch_progress

    def stop(self) -> defer.Deferred:
        """Cancel every watch (without on_error) and close connections."""
        for w in list(self._watches):
            w.cancel()
        self._watches.clear()
        return self.client.close()

    async def check_health(self) -> None:
        """Raise UnavailableError unless etcd answers a status call (for /readyz/etcd)."""
        await self.client.status()

    # ------------------------------------------------------------ revisions

    def current_revision(self) -> defer.Deferred:
        return _deferred(self._current_revision())

    async def _current_revision(self) -> int:
        # A keys-only range of one unlikely key is the cheapest linearizable read.
        r = await self.client.range(self._prefix_bytes + b"\0", keys_only=True)
        return r.revision

    def compacted_revision(self) -> defer.Deferred:
        return _deferred(self._compacted_revision())

    async def _compacted_revision(self) -> int:
        """Find etcd's compacted revision by bisection (etcd does not report it directly).

        A read at revision R fails as compacted iff R < compacted revision, so
        the smallest readable revision is the compacted one.  This takes
        log2(current) cheap count-only reads and never writes.
        """
        probe = self._prefix_bytes + b"\0"

        async def readable(rev: int) -> bool:
            try:
                await self.client.range(probe, revision=rev, count_only=True)
                return True
            except CompactedError:
                return False

        lo = max(1, self._known_compacted)
        if await readable(lo):
            found = lo
        else:
            hi = await self._current_revision()  # the current revision is always readable
            while lo + 1 < hi:
                mid = (lo + hi) // 2
                if await readable(mid):
                    hi = mid
                else:
                    lo = mid
            found = hi
        found = 0 if found <= 1 else found
        self._known_compacted = max(self._known_compacted, found)
        return found

    async def _compacted(self, e: CompactedError) -> CompactedError:
        return CompactedError(e.requested, await self._compacted_revision())

    async def _future(self, e: FutureRevisionError) -> FutureRevisionError:
        return FutureRevisionError(e.requested, await self._current_revision())

    async def _range(self, key: bytes, **kwargs) -> RangeResponse:
        try:
            return await self.client.range(key, **kwargs)
        except CompactedError as e:
            raise await self._compacted(e) from None
        except FutureRevisionError as e:
            raise await self._future(e) from None

    # ------------------------------------------------------------ reads

    def get(self, key: str, revision: int = 0) -> defer.Deferred:
        return _deferred(self._get(key, revision))

    async def _get(self, key: str, revision: int) -> Optional[KeyValue]:
        if revision == 0:
            latest = await self._latest.get(self._key(key))
            return self._kv(latest) if latest is not None else None
        r = await self._range(self._key(key), revision=revision)
        return self._kv(r.kvs[0]) if r.kvs else None

    def list(self, prefix: str, revision: int = 0, limit: int = 0, start_key: str = "") -> defer.Deferred:
        return _deferred(self._list(prefix, revision, limit, start_key))

    async def _list(self, prefix: str, revision: int, limit: int, start_key: str) -> ListResult:
        begin = self._key(prefix)
        end = prefix_end(begin)
        if start_key and start_key > prefix:
            begin = self._key(start_key)
        r = await self._range(begin, range_end=end, limit=limit, revision=revision)
        return ListResult([self._kv(kv) for kv in r.kvs], revision or r.revision, r.more, r.count)

    def count(self, prefix: str) -> defer.Deferred:
        return _deferred(self._count(prefix))

    def unchanged_since(self, prefix: str, since: int, at: int, count: int) -> defer.Deferred:
        """Fire True when, at revision ``at``, ``prefix`` holds ``count`` keys none of which was
        written after ``since``: then its keys and values at ``at`` are those at ``since`` (a key
        created and deleted in between left no trace in either).  One range that sends back at
        most one key, so the watch cache can vouch for its contents without progress
        notifications (``cacher.py``)."""
        return _deferred(self._unchanged_since(prefix, since, at, count))

    async def _unchanged_since(self, prefix: str, since: int, at: int, count: int) -> bool:
        begin = self._key(prefix)
        r = await self._range(begin, range_end=prefix_end(begin), revision=at, limit=1, keys_only=True,
                              min_mod_revision=since + 1)
        return r.count == count and not r.kvs

    async def _count(self, prefix: str) -> int:
        begin = self._key(prefix)
        r = await self.client.range(begin, range_end=prefix_end(begin), count_only=True)
        return r.count

    # ------------------------------------------------------------ writes

    def create(self, key: str, value: bytes, lease: int = 0) -> defer.Deferred:
        # callbacks, not a coroutine: every create of an object comes this way
        try:
            created = self.client.create(self._key(key), value, lease)
        except Exception:
            return defer.fail()
        return created.addCallback(_created, key, value, lease)

    def update(self, key: str, value: bytes, expected_mod_revision: int = 0,
               lease: Optional[int] = None) -> defer.Deferred:
        return _deferred(self._update(key, value, expected_mod_revision, lease))

    async def _update(self, key: str, value: bytes, expected: int, lease: Optional[int]) -> KeyValue:
        k = self._key(key)
        guard = (Compare.mod_revision(k, "EQUAL", expected) if expected
                 else Compare.create_revision(k, "GREATER", 0))
        # ignore_lease keeps the key's lease (an Event keeps its TTL when updated).
        put = (Op.put(k, value, prev_kv=True, ignore_lease=True) if lease is None
               else Op.put(k, value, lease=lease, prev_kv=True))
        r = await self.client.txn([guard], [put], [Op.range(k)])
        if not r.succeeded:
            raise self._guard_failure(key, r.responses[0])
        prev = r.responses[0].prev_kv
        return KeyValue(key, value, prev.create_revision, r.revision, prev.lease if lease is None else lease)

    def delete(self, key: str, expected_mod_revision: int = 0) -> defer.Deferred:
        return _deferred(self._delete(key, expected_mod_revision))

    async def _delete(self, key: str, expected: int) -> KeyValue:
        k = self._key(key)
        guard = (Compare.mod_revision(k, "EQUAL", expected) if expected
                 else Compare.create_revision(k, "GREATER", 0))
        r = await self.client.txn([guard], [Op.delete_range(k, prev_kv=True)], [Op.range(k)])
        if not r.succeeded:
            raise self._guard_failure(key, r.responses[0])
        prev = r.responses[0].prev_kvs[0]
        return KeyValue(key, prev.value, prev.create_revision, r.revision, prev.lease)

    def _guard_failure(self, key: str, current: RangeResponse) -> Exception:
        if not current.kvs:
            return KeyNotFoundError(key)
        return ConflictError(key, self._kv(current.kvs[0]))

    # ------------------------------------------------------------ watch

    def watch(self, prefix: str, after_revision: int, on_event: EventHandler, on_error: ErrorHandler,
              on_progress: Optional[ProgressHandler] = None) -> Watch:
        begin = self._key(prefix)
        w = EtcdWatch(self.client, begin, prefix_end(begin), after_revision, self._unkey, on_event,
                      on_error, on_progress, reactor=self.reactor, on_done=self._watches.discard,
                      silence_timeout=self.watch_silence_timeout)
        if w.active:
            self._watches.add(w)
        return w

    # ------------------------------------------------------------ maintenance

    def compact(self, revision: int) -> defer.Deferred:
        return _deferred(self._compact(revision))

    async def _compact(self, revision: int) -> None:
        try:
            await self.client.compact(revision)
        except CompactedError:
            return  # already compacted at or beyond ``revision``
        except FutureRevisionError as e:
            raise await self._future(e) from None
        self._known_compacted = max(self._known_compacted, revision)

    async def compact_to_current_minus(self, keep: int) -> int:
        """Compact away all but the last ``keep`` revisions; returns the compaction revision (0 if none)."""
        target = await self._current_revision() - keep
        if target <= max(1, self._known_compacted):
            return 0
        await self._compact(target)
        return target

    def grant_lease(self, ttl_seconds: int) -> defer.Deferred:
        return _deferred(self._grant_lease(ttl_seconds))

    async def _grant_lease(self, ttl_seconds: int) -> int:
        lease_id, _ = await self.client.lease_grant(ttl_seconds)
        return lease_id


__all__ = ["EtcdStorage", "EtcdTLS", "UnavailableError"]

"""One ``RangeAllocation`` record in storage: a range and the bitmap of what is taken in it.

Upstream keeps the service cluster IPs at ``/registry/ranges/serviceips`` and
the node ports at ``/registry/ranges/servicenodeports``, each a
``RangeAllocation`` (``range``: the CIDR or port range, ``data``: the bitmap)
changed by compare-and-swap, so every API server sharing the storage sees one
truth and two servers never hand out the same value.  The same here:

* :meth:`StoredRange.change` applies a change (a function of the bitmap) and
  writes the record guarded by the mod revision it was read at; on a conflict
  (another server wrote first) the change is applied again to the record that
  won.  Changes that arrive while a write is in flight are applied together in
  the next write (a group commit), so a burst of creates on one server costs a
  handful of writes, not one each, and never conflicts with itself.
* the record is created by the repair (``service_repair.py``) from the
  existing Services; until it exists allocations fail as upstream's do
  ("cannot allocate resources of type serviceipallocations at this time").
"""
from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

import orjson
from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.machinery import errors
from kapiserver.storage import interface as st

log = Logger()
T = TypeVar("T")

# Conflicting writes (other servers) before a change gives up with a 500; each
# retry first waits a random moment up to this long, so two busy servers interleave.
MAX_ATTEMPTS = 50
CONFLICT_BACKOFF_SECONDS = 0.01


@dataclass
class Snapshot:
    """A record as read: its range, its bitmap and the mod revision it was read at."""

    range: str
    data: bytes
    mod_revision: int


def encode_record(range_spec: str, data: bytes) -> bytes:
    return orjson.dumps({"kind": "RangeAllocation", "apiVersion": "v1", "metadata": {"creationTimestamp": None},
                         "range": range_spec, "data": base64.b64encode(data).decode("ascii")})


def decode_record(kv: st.KeyValue) -> Snapshot:
    obj = orjson.loads(kv.value)
    return Snapshot(str(obj.get("range") or ""), base64.b64decode(obj.get("data") or ""), kv.mod_revision)


class StoredRange:
    """The record at ``key`` for a range of ``size`` offsets (``reserved``: the static band)."""

    def __init__(self, storage: st.Storage, key: str, resource: str, range_spec: str, size: int,
                 reserved: int, reactor: Optional[IReactorTime] = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.storage = storage
        self.key = key
        self.resource = resource
        self.range_spec = range_spec
        self.size = size
        self.reserved = reserved
        self.reactor = reactor
        self._kv: Optional[st.KeyValue] = None  # the record as last read or written
        self._pending: list[tuple[Callable[[AllocationBitmap], Any], defer.Deferred]] = []
        self._writing = False

    def empty(self) -> AllocationBitmap:
        return AllocationBitmap(self.size, self.reserved)

    def bitmap_of(self, snapshot: Snapshot) -> AllocationBitmap:
        return AllocationBitmap.from_snapshot(self.size, self.reserved, snapshot.data)

    # ------------------------------------------------------------ reads

    async def get(self) -> Optional[Snapshot]:
        """The record as stored now (None before the first repair created it)."""
        kv = await self.storage.get(self.key)
        if kv is not None:
            self._kv = kv
        return decode_record(kv) if kv is not None else None

    async def peek(self, change: Callable[[AllocationBitmap], T]) -> T:
        """Apply ``change`` to a copy of the current bitmap without writing (dry run)."""
        kv = await self.storage.get(self.key)
        return change(self._bitmap(kv))

    def _bitmap(self, kv: Optional[st.KeyValue]) -> AllocationBitmap:
        if kv is None:
            raise errors.internal_error(f"cannot allocate resources of type {self.resource} at this time")
        snapshot = decode_record(kv)
        if snapshot.range != self.range_spec:
            raise errors.internal_error(f"the {self.resource} range in storage is {snapshot.range}, this server "
                                        f"allocates from {self.range_spec}: the provided range does not match "
                                        f"the current range")
        return self.bitmap_of(snapshot)

    # ------------------------------------------------------------ changes

    async def change(self, change: Callable[[AllocationBitmap], T]) -> T:
        """Apply ``change`` to the stored bitmap and write it (compare-and-swap, retried).

        ``change`` may run more than once (once per conflicting write) and must
        depend only on the bitmap it is given; a StatusError it raises fails
        only this change (its edits are discarded), not the others written
        with it.
        """
        d: defer.Deferred = defer.Deferred()
        self._pending.append((change, d))
        if not self._writing:
            defer.Deferred.fromCoroutine(self._drain())
        return await d

    async def _drain(self) -> None:
        self._writing = True
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    results = await self._write(batch)
                except Exception as e:
                    for _, d in batch:
                        d.errback(e)
                    continue
                for (_, d), (ok, value) in zip(batch, results):
                    if ok:
                        d.callback(value)
                    else:
                        d.errback(value)
        finally:
            self._writing = False

    async def _write(self, batch: list) -> list[tuple[bool, Any]]:
        fresh = self._kv is None
        kv = self._kv if not fresh else await self.storage.get(self.key)
        for attempt in range(MAX_ATTEMPTS):
            bitmap = self._bitmap(kv)
            before = bitmap.copy()
            results: list[tuple[bool, Any]] = []
            for change, _ in batch:
                saved = bitmap.copy()
                try:
                    results.append((True, change(bitmap)))
                except errors.StatusError as e:
                    bitmap = saved
                    results.append((False, e))
            if bitmap == before:
                if fresh or all(ok for ok, _ in results):
                    return results
                # refused by the copy last written here, which nothing checked: another server,
                # or a reset of the store (testing.enable_reset), may have freed the value since
                kv = self._kv = await self.storage.get(self.key)
                fresh = True
                continue
            try:
                assert kv is not None
                self._kv = await self.storage.update(self.key, encode_record(self.range_spec, bitmap.snapshot()),
                                                     expected_mod_revision=kv.mod_revision)
                return results
            except st.ConflictError as e:
                kv = self._kv = e.current
                fresh = True
            except st.KeyNotFoundError:
                kv = self._kv = None
            await task.deferLater(self.reactor, random.uniform(0, CONFLICT_BACKOFF_SECONDS), lambda: None)
        raise errors.internal_error(f"could not update the {self.resource} after {MAX_ATTEMPTS} conflicting writes")

    async def write_snapshot(self, bitmap: AllocationBitmap, read: Optional[Snapshot]) -> None:
        """Store ``bitmap`` if the record is still as ``read`` (None: absent); raises ConflictError/KeyExistsError."""
        value = encode_record(self.range_spec, bitmap.snapshot())
        if read is None:
            self._kv = await self.storage.create(self.key, value)
        else:
            self._kv = await self.storage.update(self.key, value, expected_mod_revision=read.mod_revision)

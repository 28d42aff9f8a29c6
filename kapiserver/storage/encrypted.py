"""Encryption at rest as a storage layer: ``TransformingStorage``.

It honours the :class:`~kapiserver.storage.interface.Storage` contract and
sits directly on the backend, below the watch cache, where upstream's etcd3
store applies its transformers: every value written for an encrypted
resource is encrypted on the way down, and every value read (get, list pages,
watch events and their previous values, the current value a failed
compare-and-swap hands back) is decrypted on the way up, so the watch cache,
the Store and every client see plaintext and only the backend (the SQLite
file, etcd) holds ciphertext.

A read value that is *stale* (decrypted with a key or provider that is not
the first) comes back with ``KeyValue.stale`` set, so the Store writes an
update even when the object did not change: ``kubectl replace`` of every
object rewrites it under the current key.

Which resource a key belongs to is ``resource_of(key)`` (built-in kinds are
stored without their group, see :func:`storage_resources`); keys of no
resource (``/ranges/...``, ``/masterleases/...``) pass through untouched.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Optional

from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.storage.encryption_config import EncryptionConfig
from kapiserver.storage.interface import (ConflictError, ErrorHandler, Event, EventHandler, KeyValue, ListResult,
                                          ProgressHandler, Snapshots, Storage, StorageError, Watch)
from kapiserver.storage.value.transformer import Identity, TransformError, Transformer

log = Logger()

ResourceOf = Callable[[str], Optional[tuple[str, str]]]


class DecryptionError(StorageError):
    """A stored value could not be turned back into plaintext (the Store answers 500)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"failed to decrypt {key}: {reason}")
        self.key = key
        self.reason = reason


def storage_resources(types: Iterable[Any]) -> ResourceOf:
    """``resource_of`` for keys of the given resource types (``storage_resource`` → group)
    and of custom resources (``/<group>/<plural>/...``)."""
    groups: dict[str, str] = {}
    for rtype in types:
        if not rtype.is_crd:
            groups.setdefault(rtype.storage_resource, rtype.group)

    def resource_of(key: str) -> Optional[tuple[str, str]]:
        parts = key.split("/", 3)
        if len(parts) < 3 or parts[0]:
            return None
        first = parts[1]
        if "." in first:
            return (first, parts[2]) if parts[2] else None
        group = groups.get(first)
        return (group, first) if group is not None else None
    return resource_of


class TransformingStorage(Storage):
    """A :class:`Storage` that encrypts and decrypts values of the resources ``config`` names."""

    def __init__(self, backend: Storage, config: EncryptionConfig, resource_of: ResourceOf,
                 key_prefix: str = "/registry") -> None:
        self.backend = backend
        self.config = config
        self.resource_of = resource_of
        # the authenticated data is the full key as etcd holds it (prefix + key)
        self.key_prefix = key_prefix.rstrip("/")
        self._identity = Identity()

    def transformer(self, key: str) -> Optional[Transformer]:
        resource = self.resource_of(key)
        if resource is None:
            return None
        return self.config.transformer_for(*resource) or self._identity

    def _aad(self, key: str) -> bytes:
        return (self.key_prefix + key).encode()

    def _decrypt(self, kv: Optional[KeyValue]) -> Optional[KeyValue]:
        if kv is None or not kv.value:  # (a delete event without the previous value carries none)
            return kv
        transformer = self.transformer(kv.key)
        if transformer is None:
            return kv
        try:
            plain, stale = transformer.from_storage(kv.value, self._aad(kv.key))
        except TransformError as e:
            log.error("failed to decrypt {key}: {reason}", key=kv.key, reason=str(e))
            raise DecryptionError(kv.key, str(e)) from None
        return dataclasses.replace(kv, value=plain, stale=stale)

    def _encrypt(self, key: str, value: bytes) -> bytes:
        transformer = self.transformer(key)
        return value if transformer is None else transformer.to_storage(value, self._aad(key))

    @staticmethod
    def _with_value(kv: KeyValue, value: bytes) -> KeyValue:
        return dataclasses.replace(kv, value=value, stale=False)

    # ------------------------------------------------------------ pass-through

    def start(self) -> defer.Deferred:
        return self.backend.start()

    def stop(self) -> defer.Deferred:
        return self.backend.stop()

    def current_revision(self) -> defer.Deferred:
        return self.backend.current_revision()

    def compacted_revision(self) -> defer.Deferred:
        return self.backend.compacted_revision()

    def count(self, prefix: str) -> defer.Deferred:
        return self.backend.count(prefix)

    def compact(self, revision: int) -> defer.Deferred:
        return self.backend.compact(revision)

    def grant_lease(self, ttl_seconds: int) -> defer.Deferred:
        return self.backend.grant_lease(ttl_seconds)

    # the backend's capabilities (values are not involved)

    @property
    def watch_progress(self) -> bool:
        return self.backend.watch_progress

    async def check_health(self) -> None:
        await self.backend.check_health()

    def local_revision(self) -> Optional[int]:
        return self.backend.local_revision()

    def flush_progress(self) -> None:
        self.backend.flush_progress()

    def snapshots(self) -> Optional[Snapshots]:
        # Saved and restored as stored (ciphertext): what comes back decrypts with the same keys.
        return self.backend.snapshots()

    def unchanged_since(self, prefix: str, since: int, at: int, count: int) -> defer.Deferred:
        return self.backend.unchanged_since(prefix, since, at, count)

    # ------------------------------------------------------------ reads

    def get(self, key: str, revision: int = 0) -> defer.Deferred:
        return self.backend.get(key, revision).addCallback(self._decrypt)

    def list(self, prefix: str, revision: int = 0, limit: int = 0, start_key: str = "") -> defer.Deferred:
        def decrypted(page: ListResult) -> ListResult:
            items = [self._decrypt(kv) for kv in page.items]
            return dataclasses.replace(page, items=[kv for kv in items if kv is not None])
        return self.backend.list(prefix, revision, limit, start_key).addCallback(decrypted)

    # ------------------------------------------------------------ writes

    def _conflict(self, failure: Any) -> Any:
        failure.trap(ConflictError)
        error = failure.value
        raise ConflictError(error.key, self._decrypt(error.current))

    def create(self, key: str, value: bytes, lease: int = 0) -> defer.Deferred:
        return self.backend.create(key, self._encrypt(key, value), lease).addCallback(self._with_value, value)

    def update(self, key: str, value: bytes, expected_mod_revision: int = 0,
               lease: Optional[int] = None) -> defer.Deferred:
        d = self.backend.update(key, self._encrypt(key, value), expected_mod_revision, lease)
        return d.addCallbacks(self._with_value, self._conflict, callbackArgs=(value,))

    def delete(self, key: str, expected_mod_revision: int = 0) -> defer.Deferred:
        d = self.backend.delete(key, expected_mod_revision)
        return d.addCallbacks(self._decrypt, self._conflict)

    # ------------------------------------------------------------ watch

    def watch(self, prefix: str, after_revision: int, on_event: EventHandler, on_error: ErrorHandler,
              on_progress: Optional[ProgressHandler] = None) -> Watch:
        handle: list[Watch] = []
        failed: list[bool] = []

        def decrypted(event: Event) -> None:
            if failed:
                return
            try:
                kv = self._decrypt(event.kv)
                prev = self._decrypt(event.prev_kv)
            except DecryptionError as e:
                # as upstream's etcd3 watcher: the watch ends with the error
                failed.append(True)
                if handle:
                    handle[0].cancel()
                on_error(e)
                return
            assert kv is not None
            on_event(Event(event.type, kv, prev, event.revision))
        handle.append(self.backend.watch(prefix, after_revision, decrypted, on_error, on_progress))
        return handle[0]

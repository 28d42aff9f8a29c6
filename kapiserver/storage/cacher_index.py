"""Secondary indexes of a watch cache: keys by the value one function extracts from each object.

Upstream's watch cache keeps indexes for a few fields (``spec.nodeName`` of pods) so that a
list or watch selecting on them costs what it returns.  Here an index is made before the server
is ready (the registry's standard ones: ``Storage.prepare``) or by the first list that asks for
it (a field's value, every label's ``key=value``: whatever ``value_of`` returns for a stored
value, one value or several; the registry knows how to read them) and kept up to date by the
cache's events from then on.  An index only narrows the candidates: whoever asks still applies the whole
selector to what it gets, so an index must hold every key whose object has a value, never fewer.

A cache keeps at most :data:`MAX_INDEXES`; the one asked for least recently goes when another
is needed (selectors are the clients' choice, memory is not).
"""
from __future__ import annotations

import itertools
from typing import Iterable, Union

from twisted.internet import defer

from kapiserver.storage.interface import IndexValue, KeyValue

MAX_INDEXES = 8
# Objects indexed between two turns of the reactor while an index is being built (a pod's field
# index decodes and converts each: 250 of them take about 10 ms).
BUILD_CHUNK = 250
# How long after a write the cache starts indexing what was written since (then a chunk per turn).
INDEX_CATCH_UP_SECONDS = 0.1


class Index:
    """Keys by value for one ``value_of`` function; ``of_key`` remembers each key's values so an update
    or delete takes the key out of its old values' sets without reading the old object again.

    While it is built (a chunk per reactor turn) the cache's events keep it current too: the build
    indexes each key's object as it is then, so whichever comes second is right.
    """

    def __init__(self, value_of: IndexValue) -> None:
        self.value_of = value_of
        self.by_value: dict[str, set[str]] = {}
        self.of_key: dict[str, Union[str, tuple[str, ...]]] = {}
        # keys written since they were last indexed, with their new value (the cache's own
        # object): indexed in the background soon after (the cache's ``_catch_up_indexes``, a
        # chunk per reactor turn), or by the next read first (``catch_up``, then :meth:`keys_with`);
        # a key written twice in between is decoded once
        self.pending: dict[str, KeyValue] = {}
        self.last_used = 0
        self.built = False
        self.waiters: list[defer.Deferred] = []

    def add(self, kv: KeyValue) -> None:
        try:
            value = self.value_of(kv)
        except Exception:  # noqa: BLE001 - a corrupt value has no indexed value (the list skips it anyway)
            value = None
        if value is None or value == ():
            return
        self.of_key[kv.key] = value
        for one in (value,) if isinstance(value, str) else value:
            keys = self.by_value.get(one)
            if keys is None:
                self.by_value[one] = {kv.key}
            else:
                keys.add(kv.key)

    def remove(self, key: str) -> None:
        if self.pending:
            self.pending.pop(key, None)
        value = self.of_key.pop(key, None)
        if value is None:
            return
        for one in (value,) if isinstance(value, str) else value:
            keys = self.by_value[one]
            keys.discard(key)
            if not keys:
                del self.by_value[one]

    def put(self, kv: KeyValue) -> None:
        """``kv`` is the key's new value (a create or an update), indexed when the index is next read."""
        self.remove(kv.key)
        self.pending[kv.key] = kv

    def index_pending(self, limit: int = 0) -> None:
        """Index the keys written since the last read, the ``limit`` oldest of them (0: all)."""
        pending = self.pending
        if not limit or limit >= len(pending):
            self.pending = {}
            for kv in pending.values():
                self.add(kv)
            return
        for key in list(itertools.islice(pending, limit)):
            self.add(pending.pop(key))

    def keys_with(self, values: Iterable[str]) -> set[str]:
        if self.pending:
            self.index_pending()
        found: set[str] = set()
        for value in values:
            keys = self.by_value.get(value)
            if keys:
                found |= keys
        return found

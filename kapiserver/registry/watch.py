"""Watches of one resource type through the Store: storage events → watch events.

Applies upstream's watch semantics on top of a storage prefix watch: the
initial state as synthetic ADDED events (resourceVersion unset or "0", or
``sendInitialEvents=true``), events strictly after a given resourceVersion,
selector filtering with objects moving in and out of the selection,
bookmarks, ``timeoutSeconds`` and 410 Expired for compacted history.

Kinds whose conversion is asynchronous (``convert_from_storage_async``: CRD
conversion webhooks) go through an ordered pipeline instead of the
synchronous path: storage events queue up, one drain loop converts each run
of queued events with one conversion call and sends them in order, and a
failed conversion ends the watch with an ERROR event (500 Status).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterable, Optional, Protocol, Union, runtime_checkable

from twisted.internet import defer, task
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger

from kapiserver.machinery import codec, errors
from kapiserver.registry.options import NOT_OLDER_THAN, ListOptions, parse_resource_version
from kapiserver.registry.store import CorruptObjectError, Store, decode, decode_metadata, readable, too_old
from kapiserver.storage import interface as st

log = Logger()

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Asynchronous conversion: events converted per call, and how many may wait
# behind a slow conversion before the watch is closed (the client re-lists).
CONVERT_BATCH_EVENTS = 500
MAX_PENDING_EVENTS = 10_000


class WatchSink(Protocol):
    """Where a watch's events go (the HTTP stream, or a controller)."""

    def send(self, event_type: str, obj: dict) -> None: ...

    def finish(self) -> None:
        """The watch ended (timeout, error already sent, or stop)."""


@runtime_checkable
class EncodingWatchSink(WatchSink, Protocol):
    """A sink that encodes events itself (the HTTP stream): watchers with the same
    ``encoding_key`` (None: none shared) share one encoding of each event."""

    encoding_key: Any

    def encode(self, event_type: str, obj: dict) -> bytes: ...

    def send_encoded(self, line: bytes) -> None: ...

    def feed_initial(self, items: list, external: Callable[[Any], dict],
                     matches: Optional[Callable[[dict], bool]]) -> None:
        """Send ``items`` (stored values) as ADDED events, a slice at a time while the
        client reads; ``external`` turns one into the object to send."""


class _DecodedEvent:
    """The event being handed out and its decoded objects, shared by the encoding watchers with a
    selector (ResourceWatch._externals_for_encoding).  The cacher hands an event to every watcher
    in one reactor turn, so the slot is emptied after that turn: a large object's decoded form is
    not kept until the next event."""

    def __init__(self) -> None:
        self.slot: Optional[tuple] = None  # (store, key, revision, type)
        self.objects: tuple[dict, Optional[dict]] = ({}, None)
        self._emptying: Optional[IDelayedCall] = None

    def get(self, slot: tuple) -> Optional[tuple[dict, Optional[dict]]]:
        return self.objects if self.slot == slot else None

    def put(self, slot: tuple, objects: tuple[dict, Optional[dict]], reactor: IReactorTime) -> None:
        self.slot, self.objects = slot, objects
        if self._emptying is None:
            self._emptying = reactor.callLater(0, self._empty)

    def _empty(self) -> None:
        self.slot, self.objects, self._emptying = None, ({}, None), None


_decoded_event = _DecodedEvent()


class ResourceWatch:
    """One watch of ``store``'s objects in ``namespace`` ("": all) as ``opts`` select them.

    ``metadata_only`` (in-process watchers that need no more, as upstream's metadata
    informers): every object sent is ``{"apiVersion", "kind", "metadata"}``, its metadata
    without ``managedFields``, read without decoding the rest of the stored value
    (:mod:`kapiserver.registry.stored_metadata`); no field selector then (a field may be
    outside metadata).  Kinds converted asynchronously (a webhook may change labels) are
    converted whole and cut down after.
    """

    def __init__(self, store: Store, namespace: str, opts: ListOptions, sink: WatchSink, reactor: IReactorTime,
                 bookmark_interval: float = 60.0, metadata_only: bool = False) -> None:
        if metadata_only and opts.field_selector.requirements:
            raise ValueError("a metadata-only watch takes no field selector")
        self.store = store
        self.rtype = store.rtype
        self.namespace = namespace
        self.opts = opts
        self.sink = sink
        self._encoding_sink = sink if isinstance(sink, EncodingWatchSink) else None
        self.reactor = reactor
        self.bookmark_interval = bookmark_interval
        self.matches = store.matcher(opts)
        self._prefix, self._key_suffix = store.watch_scope(namespace, opts)
        self.revision = 0
        self._watch: Optional[st.Watch] = None
        self._timer: Optional[IDelayedCall] = None
        self._bookmarks: Optional[task.LoopingCall] = None
        self._done = False
        self._async = self.rtype.convert_from_storage_async is not None
        self._metadata_only = metadata_only
        # what an event's value is sent as
        self._read: Callable[[st.KeyValue], dict] = self._partial if metadata_only else self._external
        # asynchronous conversion: events (or progress revisions) waiting, in order
        self._pending: deque[Union[st.Event, int]] = deque()
        self._draining = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        opts = self.opts
        prefix = self._prefix
        initial = opts.send_initial_events
        if initial is None:
            initial = opts.resource_version in ("", "0")
        if initial:
            wanted = parse_resource_version(opts.resource_version) if opts.resource_version_match == \
                NOT_OLDER_THAN else 0
            storage = self.store.storage
            page = await (storage.list_cached(prefix) if opts.resource_version == "0" else storage.list(prefix))
            if wanted and page.revision < wanted:
                raise errors.StatusError(504, "Timeout", f"Too large resource version: {wanted}, "
                                         f"current: {page.revision}")
            self.revision = page.revision
            if self._metadata_only and not self._async:
                for partial in self._partials(page.items):
                    if self.matches is None or self.matches(partial):
                        self.sink.send(ADDED, partial)
            else:
                await self._send_initial(page.items)
            if opts.is_watch_list:  # (upstream sends none unasked)
                self._bookmark({INITIAL_EVENTS_END: "true"})
        else:
            self.revision = parse_resource_version(opts.resource_version)
        self._watch = self.store.storage.watch(prefix, self.revision, self._on_event, self._on_error,
                                               self._on_progress)
        timeout = opts.timeout_seconds
        if timeout:  # a negative one has expired already (upstream's context.WithTimeout)
            self._timer = self.reactor.callLater(max(timeout, 0), self.stop)
        if opts.allow_watch_bookmarks and self.bookmark_interval > 0:
            self._bookmarks = task.LoopingCall(self._bookmark)
            self._bookmarks.clock = self.reactor
            self._bookmarks.start(self.bookmark_interval, now=False)

    async def _send_initial(self, items: list[st.KeyValue]) -> None:
        # a corrupt object is skipped (and logged), as in lists; a value already encoded decoded once
        values = [kv for kv in items if kv.encodings is not None or readable(kv) is not None]
        if self._encoding_sink is not None and not self._async:
            # the sink sends them itself, a slice at a time while its client reads
            self._encoding_sink.feed_initial(values, self._external, self.matches)
            return
        initial_objs: Iterable[dict]
        if self._async:
            initial_objs = self._cut(await self.store.externals([decode(kv) for kv in values]))
        else:
            initial_objs = (self._external(kv) for kv in values)
        for obj in initial_objs:
            if self.matches is None or self.matches(obj):
                self.sink.send(ADDED, obj)

    def _partials(self, items: list[st.KeyValue]) -> Iterable[dict]:
        """The metadata-only objects of ``items``; a corrupt one is skipped (and logged)."""
        for kv in items:
            try:
                yield self._partial(kv)
            except CorruptObjectError as e:
                log.error("skipping corrupt object at {key}: {why}", key=e.key, why=e.why)

    def _external(self, kv: st.KeyValue) -> dict:
        """The object ``kv`` holds, as clients see it (CorruptObjectError when it holds none)."""
        return self.store.to_external(decode(kv))

    def _partial(self, kv: st.KeyValue) -> dict:
        """The metadata-only object ``kv`` holds (CorruptObjectError when it holds none)."""
        return {"apiVersion": self.rtype.api_version, "kind": self.rtype.kind, "metadata": decode_metadata(kv)}

    def _cut(self, objs: list[dict]) -> list[dict]:
        """Converted objects as this watch sends them: cut down to their metadata when metadata-only."""
        if not self._metadata_only:
            return objs
        return [{"apiVersion": o.get("apiVersion"), "kind": o.get("kind"),
                 "metadata": {k: v for k, v in (o.get("metadata") or {}).items() if k != "managedFields"}}
                for o in objs]

    def stop(self) -> None:
        """End the watch (idempotent); the sink is told once."""
        if self._done:
            return
        self._done = True
        if self._watch is not None:
            self._watch.cancel()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if self._bookmarks is not None and self._bookmarks.running:
            self._bookmarks.stop()
        self.sink.finish()

    # ------------------------------------------------------------ events

    def _bookmark(self, annotations: Optional[dict] = None) -> None:
        if self._done or self._draining:  # never a bookmark ahead of unsent events
            return
        md: dict = {"resourceVersion": str(self.revision)}
        if annotations:
            md["annotations"] = annotations
        self.sink.send(BOOKMARK, {"kind": self.rtype.kind, "apiVersion": self.rtype.api_version, "metadata": md})

    def _on_progress(self, revision: int) -> None:
        if self._draining:
            self._pending.append(revision)
            return
        self.revision = max(self.revision, revision)

    def _on_event(self, event: st.Event) -> None:
        if self._done:
            return
        if self._async:
            self._enqueue(event)
            return
        self.revision = event.revision
        if self._key_suffix is not None and not event.kv.key.endswith(self._key_suffix):
            return  # another object: the selector cannot match it, before or after
        sink = self._encoding_sink
        try:
            if sink is not None and sink.encoding_key is not None:
                self._send_shared(event, sink)
                return
            converted = self._convert(event)
        except CorruptObjectError as e:
            log.error("skipping a watch event of the corrupt object at {key}: {why}", key=e.key, why=e.why)
            return
        except Exception:
            log.failure("decoding a watch event of {resource}", resource=self.rtype.plural)
            return
        if converted is not None:
            self.sink.send(*converted)

    def _send_shared(self, event: st.Event, sink: EncodingWatchSink) -> None:
        """Send ``event`` as bytes shared by every watcher of its prefix with the same encoding.

        The cacher hands every watcher the same Event object: the first watcher that sends
        it as a given event type encodes it, the others reuse the bytes (kept in the event's
        memo for as long as the event stays in the cache's window, at their own size:
        codec.exact_size).  An unfiltered watcher knows the type without decoding; one with
        a selector decodes to match, and shares the bytes whenever it sends the event's own
        object (ADDED, MODIFIED or DELETED alike: a pod's watchers of the scheduler, the
        kubelet and kube-controller-manager then encode it once).  An object that left the
        selection is sent as its previous state at the new revision, encoded for this
        watcher alone.
        """
        if self.matches is None:
            event_type = DELETED if event.type == st.DELETE else ADDED if event.is_create else MODIFIED
            key = (sink.encoding_key, event_type)
            line = event.cache.get(key)
            if line is None:
                line = event.cache[key] = codec.exact_size(sink.encode(event_type, self._read(event.kv)))
            sink.send_encoded(line)
            return
        obj, old = self._externals_for_encoding(event)
        seen = self._classify(event, obj, old)
        if seen is None:
            return
        event_type, sent = seen
        if sent is not obj:
            sink.send_encoded(sink.encode(event_type, sent))
            return
        key = (sink.encoding_key, event_type)
        line = event.cache.get(key)
        if line is None:
            line = event.cache[key] = codec.exact_size(sink.encode(event_type, obj))
        sink.send_encoded(line)

    def _externals_for_encoding(self, event: st.Event) -> tuple[dict, Optional[dict]]:
        """The event's object and previous object as the store's clients see them, decoded once
        for all the store's encoding watchers with a selector (they only read them: to match and
        to encode).  Kept for the one event being handed out, in its reactor turn (:class:`_DecodedEvent`):
        held longer, every event of the cache's window would keep its decoded objects."""
        slot = (self.store, event.kv.key, event.revision, event.type)
        found = _decoded_event.get(slot)
        if found is not None:
            return found
        obj = self._read(event.kv)
        old = self._read(event.prev_kv) if event.type != st.DELETE and event.prev_kv is not None else None
        _decoded_event.put(slot, (obj, old), self.reactor)
        return obj, old

    def _convert(self, event: st.Event) -> Optional[tuple[str, dict]]:
        obj = self._read(event.kv)
        old = None
        if self.matches is not None and event.type != st.DELETE and event.prev_kv is not None:
            old = self._read(event.prev_kv)
        return self._classify(event, obj, old)

    def _classify(self, event: st.Event, obj: dict, old: Optional[dict]) -> Optional[tuple[str, dict]]:
        """The watch event for a storage event, given its converted object (and
        previous object when a selector applies); None when it is not seen."""
        if event.type == st.DELETE:
            if self.matches is None or self.matches(obj):
                return DELETED, obj
            return None
        if self.matches is None:
            return (ADDED if event.is_create else MODIFIED), obj
        now = self.matches(obj)
        before = old is not None and self.matches(old)
        if now and before:
            return MODIFIED, obj
        if now:
            return ADDED, obj
        if before and old is not None:
            # left the selection: the old object, at the new revision (as upstream's cacher);
            # a copy, as other watchers may read the same decoded object
            return DELETED, {**old, "metadata": {**old["metadata"], "resourceVersion": str(event.revision)}}
        return None

    # ------------------------------------------------------------ asynchronous conversion

    def _enqueue(self, event: st.Event) -> None:
        if len(self._pending) >= MAX_PENDING_EVENTS:
            log.warn("closing a watch of {resource}: {n} events wait for conversion",
                     resource=self.rtype.plural, n=len(self._pending))
            self.stop()
            return
        self._pending.append(event)
        if not self._draining:
            self._draining = True
            defer.Deferred.fromCoroutine(self._drain()).addErrback(
                lambda f: log.failure("watch conversion of {resource}", f, resource=self.rtype.plural))

    async def _drain(self) -> None:
        """Convert and send queued events in order until the queue is empty."""
        try:
            while self._pending and not self._done:
                batch: list[Union[st.Event, int]] = []
                while self._pending and len(batch) < CONVERT_BATCH_EVENTS:
                    batch.append(self._pending.popleft())
                events = [e for e in batch if isinstance(e, st.Event) and _readable(e)]
                objs, with_old = [], []
                for event in events:
                    objs.append(decode(event.kv))
                    prev = event.prev_kv if self.matches is not None and event.type != st.DELETE else None
                    with_old.append(prev is not None)
                    if prev is not None:
                        objs.append(decode(prev))
                try:
                    converted = iter(self._cut(await self.store.externals(objs)))
                except errors.StatusError as e:
                    self._fail(e)
                    return
                except Exception:
                    log.failure("converting watch events of {resource}", resource=self.rtype.plural)
                    self._fail(errors.internal_error("converting a watch event failed"))
                    return
                outputs = {}
                for event, has_old in zip(events, with_old):
                    obj = next(converted)
                    outputs[id(event)] = self._classify(event, obj, next(converted) if has_old else None)
                for item in batch:
                    if self._done:
                        return
                    if isinstance(item, int):
                        self.revision = max(self.revision, item)
                        continue
                    self.revision = item.revision
                    out = outputs[id(item)]
                    if out is not None:
                        self.sink.send(*out)
        finally:
            self._draining = False

    def _fail(self, err: errors.StatusError) -> None:
        if not self._done:
            self.sink.send(ERROR, err.to_status())
            self.stop()

    def _on_error(self, failure: Exception) -> None:
        if self._done:
            return
        if isinstance(failure, st.CompactedError):
            err = too_old(failure.requested, failure.compacted)
        else:
            log.error("watch of {resource} failed: {err!r}", resource=self.rtype.plural, err=failure)
            err = errors.internal_error("the watch ended unexpectedly; please restart it")
        self.sink.send(ERROR, err.to_status())
        self.stop()


def _readable(event: st.Event) -> bool:
    """Whether an event's objects decode (a corrupt one is logged and skipped, never ends the watch)."""
    try:
        decode(event.kv)
        if event.prev_kv is not None:
            decode(event.prev_kv)
    except CorruptObjectError as e:
        log.error("skipping a watch event of the corrupt object at {key}: {why}", key=e.key, why=e.why)
        return False
    return True

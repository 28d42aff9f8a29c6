"""Watch: a chunked stream of ``{"type": ..., "object": ...}`` lines, or of
length-prefixed protobuf WatchEvent frames (``application/vnd.kubernetes.protobuf;
stream=watch``) when the client prefers protobuf and the kind has a table.

The stream is a push producer registered with the HTTP transport: when the
client stops reading, Twisted pauses it and events queue here; past a bounded
backlog the watch is closed (the client re-lists and watches again) instead
of letting memory grow.

The initial-events-end bookmark of a watch-list carries, like upstream's, the
empty list of the kind in the stream's encoding (annotation
``kubernetes.io/initial-events-list-blueprint``), from which client-go's
WatchList builds its list type.
"""
from __future__ import annotations

import base64
import time
from collections import deque
from typing import Any, Callable, Optional

from twisted.internet import defer
from zope.interface import implementer
from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime
from twisted.logger import Logger

from kapiserver.endpoints import list_encoding, list_stream, partial_metadata
from kapiserver.endpoints.negotiation import PROTOBUF_SHAPE_KINDS, STREAM_MEDIA_TYPES, TABLE_SHAPES, negotiate
from kapiserver.endpoints.request_context import client_gone, context_of
from kapiserver.endpoints.scope import RequestScope
from kapiserver.endpoints.transform import allowed_shapes, transform_watch_object
from kapiserver.machinery import codec, errors, protobuf, protobuf_tables
from kapiserver.registry.options import ListOptions
from kapiserver.registry.watch import ADDED, BOOKMARK, ERROR, INITIAL_EVENTS_END, ResourceWatch

log = Logger()

MAX_BACKLOG_EVENTS = 10_000
MAX_BACKLOG_BYTES = 32 * 1024 * 1024
# How long a watch stream gathers events before writing them (see WriteCoalescer),
# once at least COALESCE_FROM_STREAMS watches are open; below that, events go out
# in the same reactor turn (few watchers never saturate the server).
FLUSH_DELAY_SECONDS = 0.02
COALESCE_FROM_STREAMS = 100
LIST_BLUEPRINT = "kubernetes.io/initial-events-list-blueprint"


class WriteCoalescer:
    """Writes each watch stream's events of a reactor turn, or a short window, as one chunk.

    With many watchers, per-write costs dominate the fan-out: a TLS record, a
    send and two epoll updates per event and watcher (measured with py-spy,
    bench/watch_latency.py).  Gathering a stream's events for
    FLUSH_DELAY_SECONDS and writing them together let 500 watchers keep up
    with 100 writes/s on two cores (it could not before), for a bounded extra
    delay.  One delayed call serves all streams.
    """

    def __init__(self, reactor: IReactorTime) -> None:
        self.reactor = reactor
        self.streams: list["WatchStream"] = []
        self.call: Optional[IDelayedCall] = None
        self.open_streams = 0  # maintained by WatchStream

    def mark(self, stream: "WatchStream") -> None:
        self.streams.append(stream)
        if self.call is None:
            delay = FLUSH_DELAY_SECONDS if self.open_streams >= COALESCE_FROM_STREAMS else 0
            self.call = self.reactor.callLater(delay, self.flush)

    def forget(self, stream: "WatchStream") -> None:
        if stream in self.streams:
            self.streams.remove(stream)
        if not self.streams and self.call is not None and self.call.active():
            self.call.cancel()
            self.call = None

    def flush(self) -> None:
        self.call = None
        streams, self.streams = self.streams, []
        for stream in streams:
            stream.flush_pending()


_coalescers: dict[int, WriteCoalescer] = {}


def coalescer_for(reactor: IReactorTime) -> WriteCoalescer:
    coalescer = _coalescers.get(id(reactor))
    if coalescer is None:
        coalescer = _coalescers[id(reactor)] = WriteCoalescer(reactor)
    return coalescer


def uses_protobuf(scope: RequestScope) -> bool:
    """Protobuf frames: the client listed protobuf first and the stream's objects have a table."""
    target = scope.target
    if not target.prefer_protobuf:
        return False
    if target.as_kind:
        return target.as_kind in PROTOBUF_SHAPE_KINDS and protobuf.can_encode(
            f"{target.group}/{target.version}", target.as_kind)
    return not scope.rtype.is_crd and protobuf.can_encode(scope.rtype.api_version, scope.rtype.kind)


def negotiate_stream(scope: RequestScope, opts: ListOptions) -> None:
    """Upstream's negotiation of a watch: a watch-list cannot be a Table (watchListEndpointRestrictions: the
    Accept header is negotiated again without it, 406 when nothing else fits), and only JSON and protobuf have
    a stream form (NegotiateOutputMediaTypeStream: YAML is 406)."""
    watch_list_table = opts.is_watch_list and scope.target.as_kind == "Table"
    if watch_list_table or scope.target.as_kind == "PartialObjectMetadataList":
        # negotiated as upstream's list route does, after the options are checked; a watch's events
        # are single objects (upstream streams nothing for a PartialObjectMetadataList: 406 here)
        accept = scope.request.getHeader(b"accept")
        shapes = tuple(s for s in allowed_shapes("watch") if not s[0].endswith("List")
                       and not (watch_list_table and s in TABLE_SHAPES))
        scope.target = negotiate(accept.decode("latin-1") if accept else None, shapes,
                                 protobuf_objects=not scope.rtype.is_crd)
    if scope.target.media_type == codec.YAML and not uses_protobuf(scope):
        raise errors.not_acceptable(accepted=STREAM_MEDIA_TYPES)


@implementer(IPushProducer)
class WatchStream:
    """Writes encoded watch events to a request, with flow control."""

    def __init__(self, scope: RequestScope, on_close: Callable[[], None]) -> None:
        self.scope = scope
        self.request = scope.request
        self.on_close = on_close
        self.paused = False
        self.backlog: deque[bytes] = deque()
        self.backlog_bytes = 0
        self.closed = False
        self.done: defer.Deferred[None] = defer.Deferred()
        self.watch: ResourceWatch | None = None
        self.sent_any = False
        self.pending: list[bytes] = []  # events of this reactor turn, written together
        self.protobuf = self._uses_protobuf()
        self.content_type = protobuf.WATCH_MEDIA_TYPE if self.protobuf else scope.target.content_type
        # read for every event and watcher: computed once (the target parses headers)
        self.encoding_key = self._encoding_key()
        coalescer_for(scope.reactor).open_streams += 1
        # the initial events of a watch-list (or of a watch from "now"), written a slice at a
        # time while the client reads: until they are all out, later events wait in the backlog
        self.feeding = False
        self._initial: list = []
        self._initial_index = 0
        self._external: Optional[Callable[[Any], dict]] = None
        self._matches: Optional[Callable[[dict], bool]] = None
        self._memo_key: Any = None
        self._feed_call: Any = None
        self.initialized: defer.Deferred = defer.Deferred()

    def _uses_protobuf(self) -> bool:
        return uses_protobuf(self.scope)

    def _encoding_key(self):
        """What makes two watchers' bytes for one event identical (None: never shared).

        Table streams differ per watcher (column definitions only in the first
        event), so they are not shared.
        """
        target = self.scope.target
        if target.as_kind == "Table":
            return None
        return ("watch-line", self.scope.rtype.api_version, self.scope.rtype.kind, target.content_type,
                self.content_type)

    def encode(self, event_type: str, obj: dict) -> bytes:
        target = self.scope.target
        if event_type == BOOKMARK:
            if target.as_kind in PROTOBUF_SHAPE_KINDS:  # upstream sends bookmarks in the negotiated shape too
                obj = partial_metadata.to_partial_object_metadata(obj, f"{target.group}/{target.version}")
            obj = self._with_list_blueprint(obj)
        elif event_type != ERROR:
            obj = transform_watch_object(self.scope, obj, first=not self.sent_any)
            self.sent_any = True
        if self.protobuf:
            return protobuf.encode_watch_frame(event_type, protobuf.encode_object(obj))
        return codec.encode_json({"type": event_type, "object": obj})  # one line, newline-terminated

    def _with_list_blueprint(self, bookmark: dict) -> dict:
        """The initial-events-end bookmark with the stream's empty list (a copy; others as they are)."""
        md = bookmark.get("metadata") or {}
        annotations = md.get("annotations") or {}
        if annotations.get(INITIAL_EVENTS_END) != "true" or self.scope.target.as_kind == "Table":
            return bookmark
        blueprint = base64.b64encode(self._empty_list()).decode("ascii")
        return {**bookmark, "metadata": {**md, "annotations": {**annotations, LIST_BLUEPRINT: blueprint}}}

    def _empty_list(self) -> bytes:
        target, rtype = self.scope.target, self.scope.rtype
        listed: dict[str, Any]
        if target.as_kind:
            listed = {"kind": "PartialObjectMetadataList", "apiVersion": f"{target.group}/{target.version}",
                      "metadata": {}, "items": None}
        elif rtype.is_crd:  # upstream's unstructured list: no metadata, empty items
            listed = {"apiVersion": rtype.api_version, "items": [], "kind": rtype.list_kind}
        else:
            listed = {"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": {}, "items": None}
        if self.protobuf:
            return protobuf.encode_object(listed)
        return codec.encode_json(listed)  # newline-terminated, as upstream; JSON whatever the media type

    # WatchSink
    def send(self, event_type: str, obj: dict) -> None:
        if not self.closed:
            self.send_encoded(self.encode(event_type, obj))

    def send_encoded(self, line: bytes) -> None:
        if self.closed:
            return
        if (self.paused or self.backlog or self.feeding) and not self.pending:  # keep the order of events
            self._queue(line)
            return
        self.pending.append(line)
        if len(self.pending) == 1:
            coalescer_for(self.scope.reactor).mark(self)

    def flush_pending(self) -> None:
        """Write the events gathered this reactor turn as one chunk."""
        if self.closed or not self.pending:
            return
        data = b"".join(self.pending)
        self.pending.clear()
        if self.paused or self.backlog or self.feeding:
            self._queue(data)
        else:
            self.request.write(data)

    def _queue(self, data: bytes) -> None:
        """Hold data while the client is not reading; past the bound, end the watch."""
        self.backlog.append(data)
        self.backlog_bytes += len(data)
        if len(self.backlog) > MAX_BACKLOG_EVENTS or self.backlog_bytes > MAX_BACKLOG_BYTES:
            log.warn("closing a watch of {resource}: the client is not reading (backlog {n} events)",
                     resource=self.scope.rtype.plural, n=len(self.backlog))
            self.backlog.clear()
            self.backlog_bytes = 0
            if self.watch is not None:
                self.watch.stop()
            else:
                self.finish()

    def _close(self) -> bool:
        """Mark the stream closed once; False if it already was."""
        if self.closed:
            return False
        self.closed = True
        self._stop_feeding()
        coalescer = coalescer_for(self.scope.reactor)
        coalescer.forget(self)
        coalescer.open_streams -= 1
        return True

    def abandon(self) -> None:
        """Give the request back before the stream started (the watch failed to start)."""
        self._initialized()
        if self._close():
            self.request.unregisterProducer()
            self.done.callback(None)

    def finish(self) -> None:
        if not self._close():
            return
        try:
            for line in self.backlog:
                self.request.write(line)
            self.backlog.clear()
            if self.pending:
                self.request.write(b"".join(self.pending))
                self.pending.clear()
            self.request.unregisterProducer()
            if not client_gone(self.request):
                self.request.finish()
        except Exception:  # the connection may be gone already
            pass
        self.on_close()
        self.done.callback(None)

    # ------------------------------------------------------------ initial events

    def feed_initial(self, items: list, external: Callable[[Any], dict],
                     matches: Optional[Callable[[dict], bool]]) -> None:
        """Send ``items`` (stored values, or objects) as ADDED events before anything else,
        encoding each when its turn comes (memoized on its value when every watcher of this
        kind and encoding gets the same bytes), while the client keeps reading."""
        if self.closed or not items:
            self._initialized()
            return
        self.feeding = True
        self._initial = items
        self._initial_index = 0
        self._external = external
        self._matches = matches
        self._memo_key = None
        target, rtype = self.scope.target, self.scope.rtype
        if not target.as_kind:  # the object itself: the bytes its LISTs memoize
            if self.protobuf:
                self._memo_key = protobuf_tables.message_for(rtype.group, rtype.version, rtype.kind)
            elif target.media_type == codec.JSON:
                self._memo_key = "json"
        self._schedule_feed()

    def _initial_event(self, item: Any) -> bytes:
        """An ADDED event of the initial state; of the plain object, from the memoized item bytes."""
        external = self._external
        assert external is not None
        store = self.scope.generic_store()
        if self._memo_key == "json":
            return b'{"type":"ADDED","object":' + list_encoding.item_json(item, store, external) + b"}\n"
        if self._memo_key is not None:
            raw = list_encoding.item_protobuf(item, store, external, self._memo_key)
            rtype = self.scope.rtype
            return protobuf.encode_watch_frame(ADDED, protobuf.wrap(rtype.api_version, rtype.kind, raw))
        return self.encode(ADDED, external(item))

    def _schedule_feed(self) -> None:
        if self._feed_call is None and self.feeding and not self.closed:
            self._feed_call = self.scope.reactor.callLater(0, self._feed)

    def _feed(self) -> None:
        self._feed_call = None
        if not self.feeding or self.paused or self.closed:
            return
        assert self._external is not None
        pieces: list[bytes] = []
        size = 0
        deadline = time.monotonic() + list_stream.SLICE_SECONDS
        items, external = self._initial, self._external
        while self._initial_index < len(items) and size < list_stream.BATCH_BYTES and time.monotonic() < deadline:
            item = items[self._initial_index]
            self._initial_index += 1
            if self._matches is not None and not self._matches(external(item)):
                continue
            line = self._initial_event(item)
            self.sent_any = True
            pieces.append(line)
            size += len(line)
        if pieces:
            self.request.write(b"".join(pieces))
        if self._initial_index >= len(items):
            self._stop_feeding()
            self._initialized()
            if not self.paused:
                self.resumeProducing()  # what waited behind the initial events
            return
        if not self.paused:
            self._schedule_feed()

    def _stop_feeding(self) -> None:
        self.feeding = False
        self._initial = []
        if self._feed_call is not None and self._feed_call.active():
            self._feed_call.cancel()
        self._feed_call = None

    def _initialized(self) -> None:
        if not self.initialized.called:
            self.initialized.callback(None)

    # IPushProducer
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        if self.feeding:
            self._schedule_feed()
            return
        while self.backlog and not self.paused and not self.closed:
            line = self.backlog.popleft()
            self.backlog_bytes -= len(line)
            self.request.write(line)

    def stopProducing(self) -> None:
        if self.watch is not None:
            self.watch.stop()


async def watch(scope: RequestScope, register: Callable[[ResourceWatch], Callable[[], None]]) -> None:
    """Serve a watch until it ends.  ``register`` tracks it for shutdown and
    returns the function that forgets it."""
    opts = scope.list_options(watch=True)  # bad options and selectors are refused before the stream starts
    negotiate_stream(scope, opts)
    request = scope.request
    unregister: list[Callable[[], None]] = []

    def forget() -> None:
        for f in unregister:
            f()
    stream = WatchStream(scope, forget)
    rw = ResourceWatch(scope.generic_store(), scope.info.namespace, opts, stream, scope.reactor,
                       scope.bookmark_interval)
    stream.watch = rw
    request.setResponseCode(200)
    request.setHeader(b"content-type", stream.content_type.encode())
    request.setHeader(b"cache-control", b"no-cache, private")
    request.registerProducer(stream, True)
    request.notifyFinish().addBoth(lambda _: rw.stop())
    try:
        await rw.start()
    except Exception:
        stream.abandon()  # the error is answered as a Status instead of a stream
        raise
    unregister.append(register(rw))
    initialized = context_of(request).watch_initialized
    if initialized is not None:  # once the initial events are out, priority and fairness gives the seats back
        stream.initialized.addCallback(lambda _: initialized())
    if not stream.feeding:
        stream._initialized()
    # send headers now so clients see the watch established even when idle
    request.write(b"")
    await stream.done

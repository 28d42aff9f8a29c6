"""One etcd watch as one WebSocket to the gateway's /v3/watch, resumed on failure.

The gateway answers a watch with one JSON message per WatchResponse,
``{"result": WatchResponse}`` (:mod:`.websocket`).  This module turns etcd
events into storage :class:`Event` objects,
and when the stream breaks (etcd restarted, connection lost) opens a new one
starting just after the last revision it delivered, so the watcher sees no gap
and no duplicate.  A compacted start revision ends the watch with
``on_error(CompactedError)``.

A stream can also stay open and go silent (a partition without FIN/RST, a
hung gateway).  With a silence timeout, a stream that brings no bytes at all
for that long is aborted and resumed the same way, on another endpoint first.
etcd's progress notifications (asked for with ``progress_notify``) are what
keep a healthy but idle stream from looking silent, so the timeout must be a
few times etcd's ``--experimental-watch-progress-notify-interval``.

A running watch can be asked for progress (:meth:`EtcdWatch.request_progress`,
kube-apiserver's RequestWatchProgress): etcd answers on the same stream with
its latest revision once every event up to it was sent, which is how the
watch cache learns, without a read of its own, that it holds everything
committed before a consistent read began.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.internet import defer, task
from twisted.logger import Logger

from kapiserver.storage.etcd.client import EtcdClient, b64, unb64
from kapiserver.storage.etcd.progress import ProgressRequests
from kapiserver.storage.etcd.websocket import WebSocketStream
from kapiserver.storage.interface import (DELETE, PUT, CompactedError, ErrorHandler, Event, EventHandler,
                                          KeyValue, ProgressHandler, StorageError)

log = Logger()

KeyDecoder = Callable[[bytes], str]


class EtcdWatch:
    """A running watch of ``[key, range_end)`` delivering events after ``after_revision``.

    ``decode_key`` maps an etcd key back to the storage key (strips the prefix).
    ``silence_timeout`` > 0 resumes a stream that sent nothing for that many
    seconds (see the module docstring); 0 trusts the stream forever.
    """

    def __init__(self, client: EtcdClient, key: bytes, range_end: bytes, after_revision: int,
                 decode_key: KeyDecoder, on_event: EventHandler, on_error: ErrorHandler,
                 on_progress: Optional[ProgressHandler] = None, reactor=None,
                 initial_backoff: float = 0.05, max_backoff: float = 2.0,
                 on_done: Optional[Callable[["EtcdWatch"], None]] = None, silence_timeout: float = 0.0):
        self._client = client
        self._reactor = reactor or client.reactor
        self._key = key
        self._range_end = range_end
        self.last_revision = after_revision
        self._decode_key = decode_key
        self._on_event = on_event
        self._on_error = on_error
        self._on_progress = on_progress
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._on_done = on_done
        self._silence_timeout = silence_timeout
        self._endpoint: Optional[str] = None
        self._stream: Optional[WebSocketStream] = None
        self._stream_start = 0  # the revision the current stream's watch starts at
        self._pending: Optional[defer.Deferred] = None
        self._fragments: list[dict] = []
        self._progress: Optional[ProgressRequests] = None  # the current stream's
        self._finished = False
        self._shunned = False  # the current stream's endpoint answered a call that it cannot serve
        self.reconnects = 0
        # progress requests sent, and those etcd left unanswered, on the streams before the current one
        self._ended_streams_progress = (0, 0)
        self.fragmented_responses = 0
        self.silences = 0
        self._loop = defer.Deferred.fromCoroutine(self._run())

    # ------------------------------------------------------------ public

    def cancel(self) -> None:
        """Stop delivery and close the HTTP request (idempotent; on_error is not called)."""
        self._finish()

    @property
    def active(self) -> bool:
        return not self._finished

    @property
    def progress_requests(self) -> int:
        """Progress requests sent so far, on every stream."""
        return self._ended_streams_progress[0] + (self._progress.sent if self._progress else 0)

    @property
    def progress_timeouts(self) -> int:
        """Progress requests etcd left unanswered so far, on every stream."""
        return self._ended_streams_progress[1] + (self._progress.timeouts if self._progress else 0)

    def request_progress(self) -> defer.Deferred:
        """Fire with a revision R once every event up to R was delivered (and ``on_progress(R)``
        called when R is past the last event), R being etcd's latest revision at some moment after
        this call (:mod:`.progress`).  Fails with StorageError when the stream is not open, is
        catching up, ends first, or etcd did not answer in time: the caller then reads etcd.
        """
        if self._progress is None or self._finished:
            return defer.fail(StorageError("the etcd watch stream is not open"))
        return self._progress.request()

    # ------------------------------------------------------------ loop

    def _request(self) -> dict:
        body = {"key": b64(self._key), "start_revision": str(self.last_revision + 1),
                "prev_kv": True, "progress_notify": True, "fragment": True}
        if self._range_end:
            body["range_end"] = b64(self._range_end)
        return {"create_request": body}

    async def _run(self) -> None:
        self._client.add_shun_listener(self._endpoint_shunned)
        try:
            await self._stream_until_finished()
        finally:
            self._client.remove_shun_listener(self._endpoint_shunned)

    async def _stream_until_finished(self) -> None:
        backoff = self._initial_backoff
        avoid: Optional[str] = None
        while not self._finished:
            self._fragments = []
            stream = None
            try:
                self._pending = defer.Deferred.fromCoroutine(self._client.open_websocket(
                    "/v3/watch", self._new_stream, avoid=avoid))
                self._endpoint, stream = await self._pending
                self._pending = None
                self._shunned = False
                self._stream_start = self.last_revision + 1
                stream.send(self._request())
                self._stream = stream
                self._progress = ProgressRequests(stream.send, self._reactor, stream.abort)
                await stream.ended
            except defer.CancelledError:
                if self._finished:
                    return
            except StorageError as e:
                log.debug("etcd watch could not connect: {e}", e=e)
            except Exception:
                log.failure("etcd watch stream failed")
            finally:
                self._pending = None
                self._stream = None
                self._end_progress()
            if self._finished:
                return
            # A silent endpoint, or one that cannot serve, may be partitioned away: try the others first.
            avoid = self._endpoint if stream is not None and (stream.silent or self._shunned) else None
            if stream is not None and stream.received:
                backoff = self._initial_backoff
            self.reconnects += 1
            log.debug("etcd watch stream ended; resuming after revision {rev} in {delay}s",
                      rev=self.last_revision, delay=backoff)
            self._pending = task.deferLater(self._reactor, backoff, lambda: None)
            try:
                await self._pending
            except defer.CancelledError:
                return
            finally:
                self._pending = None
            backoff = min(backoff * 2, self._max_backoff)

    def _new_stream(self, host: bytes) -> WebSocketStream:
        return WebSocketStream(host, "/v3/watch", self._handle, self._reactor, self._silence_timeout, self._silent)

    def _end_progress(self) -> None:
        progress, self._progress = self._progress, None
        if progress is not None:
            progress.close()
            sent, timeouts = self._ended_streams_progress
            self._ended_streams_progress = (sent + progress.sent, timeouts + progress.timeouts)
            if progress.timeouts:
                log.info("etcd left {n} of {sent} progress requests unanswered on a watch stream of {key!r}",
                         n=progress.timeouts, sent=progress.sent, key=self._key)

    def _endpoint_shunned(self, endpoint: str) -> None:
        """A call to ``endpoint`` was answered that it cannot serve: if this watch's stream is there,
        it may be on a member cut off from its peers, whose watch stays open but learns nothing new;
        resume elsewhere (a stream on a healthy member costs a reconnect, no gap, no duplicate)."""
        if self._stream is not None and self._endpoint == endpoint and not self._shunned:
            self._shunned = True
            log.info("etcd at {endpoint} answered that it cannot serve; resuming the watch of {key!r} "
                     "after revision {rev} on another endpoint", endpoint=endpoint, key=self._key,
                     rev=self.last_revision)
            self._stream.abort()

    def _silent(self, idle: float) -> None:
        self.silences += 1
        log.warn("etcd watch stream from {endpoint} sent nothing for {idle:.1f}s (no events, no progress "
                 "notifications); reconnecting and resuming after revision {rev}",
                 endpoint=self._endpoint, idle=idle, rev=self.last_revision)

    def _finish(self, error: Optional[Exception] = None) -> None:
        if self._finished:
            return
        self._finished = True
        if self._stream is not None:
            self._stream.abort()
        if self._pending is not None:
            self._pending.cancel()
        self._end_progress()
        if self._on_done is not None:
            self._on_done(self)
        if error is not None:
            try:
                self._on_error(error)
            except Exception:
                log.failure("watch error handler failed")

    # ------------------------------------------------------------ messages

    def _handle(self, doc: dict) -> None:
        if self._finished:
            return
        if "error" in doc:
            # The gateway reports a broken gRPC stream in-band; reconnect.
            log.debug("etcd watch stream error: {err}", err=doc["error"])
            if self._stream is not None:
                self._stream.abort()
            return
        r = doc.get("result", {})
        compacted = int(r.get("compact_revision", 0))
        if compacted:
            self._finish(CompactedError(self.last_revision + 1, compacted))
            return
        if r.get("canceled"):
            reason = r.get("cancel_reason") or "no reason given"
            self._finish(StorageError(f"etcd canceled the watch: {reason}"))
            return
        events = r.get("events")
        if r.get("fragment"):
            self.fragmented_responses += 1
            self._fragments.extend(events or ())
            return
        if self._fragments:
            events = self._fragments + list(events or ())
            self._fragments = []
        if events:
            self._deliver(events)
        elif r.get("created"):
            if self._progress is not None:
                self._progress.created(int(r.get("header", {}).get("revision", 0)), self._stream_start)
        else:
            revision = int(r.get("header", {}).get("revision", 0))
            # A progress notification: everything up to ``revision`` was sent.
            if revision > self.last_revision:
                self.last_revision = revision
                if self._on_progress is not None:
                    try:
                        self._on_progress(revision)
                    except Exception:
                        log.failure("watch progress handler failed")
            # etcd's answer to a progress request names no watch (-1); its own periodic ones do
            if r.get("watch_id") == "-1" and self._progress is not None:
                self._progress.answered(revision)

    def _deliver(self, raw_events: list[dict]) -> None:
        for raw in raw_events:
            if self._finished:
                return
            event = self._event(raw)
            if event.revision <= self.last_revision:
                continue  # already delivered before a reconnect
            self.last_revision = event.revision
            try:
                self._on_event(event)
            except Exception:
                log.failure("watch event handler failed")

    def _event(self, raw: dict) -> Event:
        # read from the gateway's JSON straight into KeyValues (not through EtcdKV first):
        # every worker's watch cache gets every write's event
        kv = raw.get("kv", {})
        mod_revision = int(kv.get("mod_revision", 0))
        prev_raw = raw.get("prev_kv")
        prev = self._kv(prev_raw) if prev_raw else None
        if raw.get("type") == "DELETE":
            # etcd's DELETE kv has only key and mod_revision: show the last value.
            if prev is not None:
                current = KeyValue(prev.key, prev.value, prev.create_revision, mod_revision, prev.lease)
            else:
                current = KeyValue(self._decode_key(unb64(kv.get("key"))), b"", 0, mod_revision, 0)
            return Event(DELETE, current, prev, mod_revision)
        current = self._kv(kv)
        if int(kv.get("version", 0)) == 1:
            prev = None  # a create, even if a compaction hid nothing
        return Event(PUT, current, prev, mod_revision)

    def _kv(self, kv: dict) -> KeyValue:
        """A key as the gateway's JSON has it (``mvccpb.KeyValue``, as :meth:`EtcdKV.from_json` reads it)."""
        return KeyValue(self._decode_key(unb64(kv.get("key"))), unb64(kv.get("value")),
                        int(kv.get("create_revision", 0)), int(kv.get("mod_revision", 0)), int(kv.get("lease", 0)))

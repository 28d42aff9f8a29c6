"""One etcd watch as one streaming POST to the gateway's /v3/watch, resumed on failure.

The gateway answers a watch with a never-ending response body: one JSON
object per line, ``{"result": WatchResponse}``.  This module parses that
stream incrementally, turns etcd events into storage :class:`Event` objects,
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
"""
from __future__ import annotations

from typing import Callable, Optional

import orjson
from twisted.internet import defer, task
from twisted.internet.interfaces import IDelayedCall
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.storage.etcd.client import EtcdClient, EtcdKV, b64
from kapiserver.storage.interface import (DELETE, PUT, CompactedError, ErrorHandler, Event, EventHandler,
                                          KeyValue, ProgressHandler, StorageError)

log = Logger()

KeyDecoder = Callable[[bytes], str]


class _LineStream(Protocol):
    """Splits a streaming body into JSON documents, one per line.

    With ``silence_timeout`` > 0 it aborts itself (and calls ``on_silence``
    with the idle time) once no byte arrived for that long.  Data only stamps
    the time; one timer checks the stamp, so a busy stream costs one timer
    per timeout period, not one per chunk.
    """

    def __init__(self, on_message: Callable[[dict], None], clock=None, silence_timeout: float = 0.0,
                 on_silence: Optional[Callable[[float], None]] = None):
        self._on_message = on_message
        self._buffer = b""
        self.received = False
        self.silent = False
        self.ended: defer.Deferred = defer.Deferred()
        self._clock = clock
        self._silence_timeout = silence_timeout if clock is not None else 0.0
        self._on_silence = on_silence
        self._last_data = 0.0
        self._watchdog: Optional[IDelayedCall] = None

    def connectionMade(self) -> None:
        if self._silence_timeout > 0:
            self._last_data = self._clock.seconds()
            self._watchdog = self._clock.callLater(self._silence_timeout, self._check_silence)

    def _check_silence(self) -> None:
        self._watchdog = None
        if self.transport is None:
            return
        idle = self._clock.seconds() - self._last_data
        remaining = self._silence_timeout - idle
        if remaining > 0.001:
            self._watchdog = self._clock.callLater(remaining, self._check_silence)
            return
        self.silent = True
        if self._on_silence is not None:
            self._on_silence(idle)
        self.abort()

    def dataReceived(self, data: bytes) -> None:
        self.received = True
        if self._watchdog is not None:
            self._last_data = self._clock.seconds()
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            if self.transport is None:  # aborted by a previous message
                return
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError:
                log.warn("undecodable line from etcd watch stream: {line!r}", line=line[:200])
                continue
            self._on_message(doc)

    def abort(self) -> None:
        self._stop_watchdog()
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.stopProducing()  # type: ignore[attr-defined]  # a TCP/TLS transport is a producer

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog.active():
            watchdog.cancel()

    def connectionLost(self, reason: Optional[Failure] = None) -> None:
        self.transport = None
        self._stop_watchdog()
        self.reason = reason
        if not self.ended.called:
            self.ended.callback(None)


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
        self._stream: Optional[_LineStream] = None
        self._pending: Optional[defer.Deferred] = None
        self._fragments: list[dict] = []
        self._finished = False
        self.reconnects = 0
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

    # ------------------------------------------------------------ loop

    def _request(self) -> dict:
        body = {"key": b64(self._key), "start_revision": str(self.last_revision + 1),
                "prev_kv": True, "progress_notify": True, "fragment": True}
        if self._range_end:
            body["range_end"] = b64(self._range_end)
        return {"create_request": body}

    async def _run(self) -> None:
        backoff = self._initial_backoff
        avoid: Optional[str] = None
        while not self._finished:
            stream = _LineStream(self._handle, self._reactor, self._silence_timeout, self._silent)
            self._stream = stream
            self._fragments = []
            try:
                self._pending = defer.Deferred.fromCoroutine(
                    self._client.open_stream("/v3/watch", self._request(), stream, avoid=avoid))
                self._endpoint = await self._pending
                self._pending = None
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
            if self._finished:
                return
            # A silent endpoint may be partitioned away: try the others first.
            avoid = self._endpoint if stream.silent else None
            if stream.received:
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
        elif not r.get("created"):
            revision = int(r.get("header", {}).get("revision", 0))
            # A progress notification: everything up to ``revision`` was sent.
            if revision > self.last_revision:
                self.last_revision = revision
                if self._on_progress is not None:
                    try:
                        self._on_progress(revision)
                    except Exception:
                        log.failure("watch progress handler failed")

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
        kv = EtcdKV.from_json(raw.get("kv", {}))
        prev_raw = raw.get("prev_kv")
        prev = self._kv(EtcdKV.from_json(prev_raw)) if prev_raw else None
        if raw.get("type") == "DELETE":
            # etcd's DELETE kv has only key and mod_revision: show the last value.
            if prev is not None:
                current = KeyValue(prev.key, prev.value, prev.create_revision, kv.mod_revision, prev.lease)
            else:
                current = KeyValue(self._decode_key(kv.key), b"", 0, kv.mod_revision, 0)
            return Event(DELETE, current, prev, kv.mod_revision)
        current = self._kv(kv)
        if kv.version == 1:
            prev = None  # a create, even if a compaction hid nothing
        return Event(PUT, current, prev, kv.mod_revision)

    def _kv(self, kv: EtcdKV) -> KeyValue:
        return KeyValue(self._decode_key(kv.key), kv.value, kv.create_revision, kv.mod_revision, kv.lease)

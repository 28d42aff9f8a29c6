"""Writing a list answer with flow control (chunked, piece by piece).

A :class:`ListStream` is a push producer registered with the transport: it
writes the list's pieces (``endpoints/list_encoding.py``; or a Status's,
``endpoints/status_stream.py``) a slice at a time
— about ``BATCH_BYTES``, or ``SLICE_SECONDS`` of encoding, whichever comes
first — then gives the reactor a turn.  When the client does not read, the
transport pauses it and nothing more is encoded until the client catches up,
so a slow reader costs one slice plus the transport's buffer, never the whole
list.  The request is finished (and its in-flight seat given back) once the
last piece has been handed to the transport.

A failure after the first byte cannot become a Status any more: the
connection is dropped, as upstream does with a handler that fails mid-answer.
"""
from __future__ import annotations

import time
import weakref
from typing import Any, Protocol

from twisted.internet import defer
from twisted.internet.interfaces import IPushProducer, IReactorTime, ITCPTransport
from twisted.logger import Logger
from twisted.web._http2 import H2Stream
from twisted.web.server import Request
from zope.interface import implementer

from kapiserver.endpoints.request_context import writable

log = Logger()

BATCH_BYTES = 64 * 1024
SLICE_SECONDS = 0.005

# Streams being written (tests and benchmarks look at their counters).
_active: "weakref.WeakSet[ListStream]" = weakref.WeakSet()


def active_streams() -> list["ListStream"]:
    return list(_active)


def abort_connection(request: Request) -> None:
    """Drop the connection (HTTP/1.1) or reset the stream (HTTP/2) of a request whose
    answer cannot be completed."""
    channel = request.channel
    if channel is None:
        return
    if isinstance(channel, H2Stream):  # HTTP/2: the stream is the channel (RST_STREAM)
        channel.abortConnection()
        return
    transport = channel.transport
    if transport is None:
        return
    tcp = ITCPTransport(transport, None)
    if tcp is not None:
        tcp.abortConnection()
    else:
        transport.loseConnection()


class PiecedBody(Protocol):
    """An answer in pieces: ``head()``, ``piece(i)`` for each i below ``piece_count()``, ``tail()``,
    asked for in that order; ``prepare()`` first (what must be known before the head)."""

    content_type: str
    kind: str  # what is written (for the log)

    async def prepare(self) -> None: ...

    def head(self) -> bytes: ...

    def piece_count(self) -> int: ...

    def piece(self, index: int) -> bytes: ...

    def tail(self) -> bytes: ...


@implementer(IPushProducer)
class ListStream:
    """Writes one list answer (or any :class:`PiecedBody`), a slice per reactor turn, while the
    transport accepts it."""

    def __init__(self, request: Request, body: PiecedBody, reactor: IReactorTime) -> None:
        self.request = request
        self.body = body
        self.reactor = reactor
        self.index = 0
        self.count = body.piece_count()
        self.paused = False
        self.stopped = False
        self.finished = False
        self.started = False
        self._call: Any = None
        self.done: defer.Deferred = defer.Deferred()
        # what was written, and the largest single write (what one slice may hold)
        self.bytes_written = 0
        self.largest_write = 0
        _active.add(self)

    def start(self) -> defer.Deferred:
        """Stream the pieces (the headers are set); ``done`` fires once written or abandoned."""
        request = self.request
        request.registerProducer(self, True)
        request.notifyFinish().addErrback(lambda _: self.stopProducing())
        self._pump()
        return self.done

    # IPushProducer
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self._schedule()

    def stopProducing(self) -> None:
        """The connection is gone: stop encoding."""
        self.stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        self._end()

    # ------------------------------------------------------------ writing

    def _schedule(self) -> None:
        if self._call is None and not self.stopped and not self.finished:
            self._call = self.reactor.callLater(0, self._pump)

    def _pump(self) -> None:
        self._call = None
        if self.paused or self.stopped or self.finished:
            return
        request = self.request
        if not writable(request):
            self.stopProducing()
            return
        pieces = []
        size = 0
        deadline = time.monotonic() + SLICE_SECONDS
        try:
            if not self.started:
                self.started = True
                head = self.body.head()
                pieces.append(head)
                size += len(head)
            while self.index < self.count and size < BATCH_BYTES and time.monotonic() < deadline:
                piece = self.body.piece(self.index)
                self.index += 1
                pieces.append(piece)
                size += len(piece)
            last = self.index >= self.count
            if last:
                pieces.append(self.body.tail())
        except Exception:
            log.failure("encoding a {kind} answer failed; dropping the connection", kind=self.body.kind)
            abort_connection(request)
            self.stopProducing()
            return
        data = b"".join(pieces)
        self.bytes_written += len(data)
        self.largest_write = max(self.largest_write, len(data))
        request.write(data)
        if last:
            self.finished = True
            request.unregisterProducer()
            if writable(request):
                request.finish()
            self._end()
            return
        if not self.paused:
            self._schedule()

    def _end(self) -> None:
        _active.discard(self)
        if not self.done.called:
            self.done.callback(None)

"""The audit webhook backend (``--audit-webhook-config-file``): batches of events POSTed as an EventList.

Upstream's buffered webhook backend in its default ``batch`` mode, without
ever making a request wait:

* events go into a bounded buffer (``audit.webhook_batch_buffer_size``); when
  it is full a new event is dropped and counted in
  ``apiserver_audit_error_total{plugin="buffered"}`` (upstream's counter);
* a batch is sent once ``webhook_batch_max_size`` events are waiting, or
  ``webhook_batch_max_wait_seconds`` after the first event of a batch arrived;
* batches are throttled by a token bucket (``webhook_batch_throttle_qps``,
  ``_burst``) and at most :data:`MAX_IN_FLIGHT` are in flight: while the
  webhook is slow or down the buffer fills and then drops, never growing;
* a batch that fails with a connection error, a 5xx or a 429 is retried with
  upstream's backoff (initial ``webhook_initial_backoff_seconds``, factor 1.5,
  jitter 0.2, 5 attempts in all); a batch given up on is counted in
  ``apiserver_audit_error_total{plugin="webhook"}``, one per event.
"""
from __future__ import annotations

import collections
import random
from typing import Any, Optional

import orjson
from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.audit.metrics import AuditMetrics
from kapiserver.audit.event import API_VERSION
from kapiserver.auth.webhook_kubeconfig import WebhookTarget

log = Logger()

PLUGIN = "webhook"
BUFFERED_PLUGIN = "buffered"
MAX_IN_FLIGHT = 4
ATTEMPTS = 5
BACKOFF_FACTOR = 1.5
BACKOFF_JITTER = 0.2
REQUEST_TIMEOUT = 30.0


class RetryableError(Exception):
    pass


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved up (golang.org/x/time/rate)."""

    def __init__(self, qps: float, burst: int, clock: Any) -> None:
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.updated = clock.seconds()

    def _refill(self) -> None:
        now = self.clock.seconds()
        self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.qps)
        self.updated = now

    def wait(self) -> float:
        """Seconds until a token is available (0 = now)."""
        self._refill()
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.qps

    def take(self) -> None:
        self._refill()
        self.tokens -= 1


class WebhookBackend:
    name = PLUGIN

    def __init__(self, target: WebhookTarget, reactor: Optional[IReactorTime] = None, buffer_size: int = 10000,
                 max_batch_size: int = 400, max_batch_wait: float = 30.0, throttle_qps: float = 10.0,
                 throttle_burst: int = 15, initial_backoff: float = 10.0, http: Any = None, *,
                 metrics: AuditMetrics) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.target = target
        self.reactor = reactor
        # events lost: dropped from the full or closed buffer, or in batches the webhook never took
        self.dropped = metrics.errors.labels(plugin=BUFFERED_PLUGIN)
        self.lost = metrics.errors.labels(plugin=PLUGIN)
        self.buffer: collections.deque[dict] = collections.deque()
        self.buffer_size = buffer_size
        self.max_batch_size = max_batch_size
        self.max_batch_wait = max_batch_wait
        self.throttle = TokenBucket(throttle_qps, throttle_burst, reactor) if throttle_qps > 0 else None
        self.initial_backoff = initial_backoff
        self.http = http
        self.pool: Any = None
        self.in_flight: set[defer.Deferred] = set()
        self._call: Any = None
        self._call_at = 0.0
        self._stopping = False
        self.sent_batches = 0  # for tests and debugging

    def start(self) -> None:
        if self.http is None:
            self.http, self.pool = self.target.client(self.reactor, connections=2, retry_automatically=False)

    def __str__(self) -> str:
        return PLUGIN

    # ------------------------------------------------------------ intake

    def process_events(self, events: list[dict]) -> bool:
        for event in events:
            if self._stopping or len(self.buffer) >= self.buffer_size:
                self.dropped.inc()
                log.warn("audit webhook buffer {state}: event {id} dropped", id=event.get("auditID"),
                         state="closed" if self._stopping else "full")
                continue
            self.buffer.append(event)
        self._schedule()
        return True  # as upstream's buffered backend: never fails the request

    # ------------------------------------------------------------ batching

    def _schedule(self) -> None:
        if not self.buffer or self._stopping:
            return
        delay = 0.0 if len(self.buffer) >= self.max_batch_size else self.max_batch_wait
        if len(self.in_flight) >= MAX_IN_FLIGHT:
            return  # a finishing send schedules again
        if self.throttle is not None:
            delay = max(delay, self.throttle.wait())
        at = self.reactor.seconds() + delay
        if self._call is not None and self._call.active():
            if self._call_at <= at:
                return
            self._call.cancel()
        self._call_at = at
        self._call = self.reactor.callLater(delay, self._flush)

    def _flush(self) -> None:
        self._call = None
        if not self.buffer or len(self.in_flight) >= MAX_IN_FLIGHT:
            return
        if self.throttle is not None:
            if self.throttle.wait() > 0:
                self._schedule()
                return
            self.throttle.take()
        batch = [self.buffer.popleft() for _ in range(min(self.max_batch_size, len(self.buffer)))]
        sending = defer.Deferred.fromCoroutine(self._send(batch))
        self.in_flight.add(sending)

        def done(_: Any) -> None:
            self.in_flight.discard(sending)
            self._schedule()
        sending.addBoth(done)
        self._schedule()

    # ------------------------------------------------------------ sending

    async def _send(self, batch: list[dict]) -> None:
        body = orjson.dumps({"kind": "EventList", "apiVersion": API_VERSION, "metadata": {}, "items": batch},
                            default=str)
        delay = self.initial_backoff
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await self._post(body)
                self.sent_batches += 1
                return
            except RetryableError as e:
                problem = str(e)
            except Exception as e:
                problem = f"{type(e).__name__}: {e}"
                break
            if attempt == ATTEMPTS:
                break
            wait = delay * (1 + random.uniform(0, BACKOFF_JITTER))
            log.info("audit webhook attempt {n} failed ({problem}); retrying in {wait:.1f}s", n=attempt,
                     problem=problem, wait=wait)
            await task.deferLater(self.reactor, wait, lambda: None)
            delay *= BACKOFF_FACTOR
        self.lost.inc(len(batch))
        log.error("audit webhook: {n} events lost: {problem}", n=len(batch), problem=problem)

    async def _post(self, body: bytes) -> None:
        headers = dict(self.target.headers)
        headers["Content-Type"] = ["application/json"]
        try:
            d = self.http.post(self.target.url, data=body, headers=headers)
            d.addTimeout(REQUEST_TIMEOUT, self.reactor)
            response = await d
            content = await response.content()
        except Exception as e:  # connection refused/reset, TLS failure, timeout: transient
            raise RetryableError(f"{type(e).__name__}: {e}") from None
        if response.code == 429 or response.code >= 500:
            raise RetryableError(f"the webhook answered {response.code}")
        if response.code >= 300:
            raise RuntimeError(f"the webhook answered {response.code}: {content[:200]!r}")

    # ------------------------------------------------------------ shutdown

    def shutdown(self, grace: float = 5.0) -> defer.Deferred:
        """Send what is buffered (throttle ignored), wait up to ``grace`` seconds for the sends."""
        return defer.Deferred.fromCoroutine(self._shutdown(grace))

    def _forget(self, result: Any, sending: defer.Deferred) -> Any:
        self.in_flight.discard(sending)
        return result

    async def _shutdown(self, grace: float) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        while self.buffer:
            batch = [self.buffer.popleft() for _ in range(min(self.max_batch_size, len(self.buffer)))]
            sending = defer.Deferred.fromCoroutine(self._send(batch))
            self.in_flight.add(sending)
            sending.addBoth(self._forget, sending)
        self._stopping = True
        if self.in_flight:
            waiting = defer.DeferredList(list(self.in_flight), consumeErrors=True)
            waiting.addTimeout(grace, self.reactor)
            try:
                await waiting
            except defer.TimeoutError:
                log.warn("audit webhook: {n} batches still unsent at shutdown", n=len(self.in_flight))
                for d in list(self.in_flight):
                    d.cancel()
        if self.pool is not None:
            await self.pool.closeCachedConnections()


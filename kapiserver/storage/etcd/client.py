"""A typed client for etcd v3's JSON gRPC gateway.

Why the gateway: it needs no gRPC dependency, every call is a plain HTTP POST
of a JSON body, and a watch is one WebSocket of JSON messages.  Conventions of
the gateway this module hides: keys and values are base64, int64 fields are
JSON strings, and fields equal to their zero value are omitted.

Unary calls (ranges, txns, leases) go over persistent connections through a
small HTTP/1.1 client of their own (:mod:`.unary_http`: about a third of what
treq and Twisted's Agent cost per call); watches, one long stream each, are
WebSockets (:mod:`.websocket`), which carry requests to a running watch.

Every call has a deadline; with several endpoints, a connection failure moves
on to the next one.  Connections use TCP keepalive (:mod:`.keepalive`).  Failures surface as the storage errors of
:mod:`kapiserver.storage.interface` (an unreachable etcd is
:class:`UnavailableError` naming the endpoints).
"""
from __future__ import annotations

import base64
import binascii
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import orjson
from twisted.internet import defer, error as net_error
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import _newclient
from twisted.web.client import (RequestGenerationFailed, RequestTransmissionFailed, ResponseFailed,
                                 ResponseNeverReceived)

from kapiserver.storage.etcd.keepalive import KeepAliveEndpointFactory
from kapiserver.storage.etcd.tls import EtcdTLS
from kapiserver.storage.etcd.unary_http import ConnectionBroke, UnaryHTTPClient
from kapiserver.storage.etcd.websocket import WebSocketStream
from kapiserver.storage.interface import (CompactedError, FutureRevisionError, StorageError,
                                          UnavailableError)

log = Logger()

# Failures that prove the request never reached etcd: always safe to retry on
# the next endpoint.
_NOT_SENT = (net_error.ConnectError, _newclient.RequestNotSent)
# Failures after the request may have been sent: only reads are retried.
_MAYBE_SENT = (_newclient.ResponseNeverReceived, _newclient.RequestTransmissionFailed,
               _newclient.ResponseFailed, net_error.ConnectionLost, net_error.ConnectionDone, ConnectionBroke)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64_bytes(data: bytes) -> bytes:
    # base64 is JSON as it is (no character needs escaping): written into a body unchanged
    return binascii.b2a_base64(data, newline=False)


def unb64(text: Optional[str]) -> bytes:
    # binascii directly: base64.b64decode encodes the text to bytes first and then calls it
    # (the same answer and errors; a key and a value of every watch event and read)
    return binascii.a2b_base64(text) if text else b""


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (etcd's range_end)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # all keys


_JSON_HEADERS: dict[bytes | str, list[bytes | str]] = {b"Content-Type": [b"application/json"]}


# ---------------------------------------------------------------- typed data


@dataclass(frozen=True)
class EtcdKV:
    """A key as etcd stores it (``mvccpb.KeyValue``)."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_json(cls, kv: dict) -> "EtcdKV":
        return cls(unb64(kv.get("key")), unb64(kv.get("value")), int(kv.get("create_revision", 0)),
                   int(kv.get("mod_revision", 0)), int(kv.get("version", 0)), int(kv.get("lease", 0)))


@dataclass(frozen=True)
class RangeResponse:
    revision: int
    kvs: list[EtcdKV]
    more: bool
    count: int

    @classmethod
    def from_json(cls, r: dict) -> "RangeResponse":
        return cls(header_revision(r), [EtcdKV.from_json(kv) for kv in r.get("kvs", ())],
                   bool(r.get("more", False)), int(r.get("count", 0)))


@dataclass(frozen=True)
class PutResponse:
    revision: int
    prev_kv: Optional[EtcdKV]


@dataclass(frozen=True)
class DeleteResponse:
    revision: int
    deleted: int
    prev_kvs: list[EtcdKV]


@dataclass(frozen=True)
class TxnResponse:
    """``responses`` holds one typed response per executed op, in order."""

    succeeded: bool
    revision: int
    responses: list[Any]


def header_revision(r: dict) -> int:
    return int(r.get("header", {}).get("revision", 0))


def _created(r: dict) -> tuple[bool, int]:
    """A create txn's answer (:meth:`EtcdClient.create`)."""
    return bool(r.get("succeeded", False)), header_revision(r)


# ---------------------------------------------------------------- txn building


@dataclass(frozen=True)
class Compare:
    """One txn guard: ``target`` of ``key`` compared (``result``) with ``value``.

    target: "MOD" (mod_revision), "CREATE" (create_revision), "VERSION", "VALUE";
    result: "EQUAL", "GREATER", "LESS", "NOT_EQUAL".
    """

    key: bytes
    target: str
    result: str
    value: Any

    _FIELDS = {"MOD": "mod_revision", "CREATE": "create_revision", "VERSION": "version", "VALUE": "value"}

    def to_json(self) -> dict:
        value = b64(self.value) if self.target == "VALUE" else str(int(self.value))
        return {"key": b64(self.key), "target": self.target, "result": self.result,
                self._FIELDS[self.target]: value}

    @classmethod
    def mod_revision(cls, key: bytes, result: str, rev: int) -> "Compare":
        return cls(key, "MOD", result, rev)

    @classmethod
    def create_revision(cls, key: bytes, result: str, rev: int) -> "Compare":
        return cls(key, "CREATE", result, rev)

    @classmethod
    def version(cls, key: bytes, result: str, version: int) -> "Compare":
        return cls(key, "VERSION", result, version)


@dataclass(frozen=True)
class Op:
    """One txn operation: ``kind`` is "range", "put" or "delete_range"."""

    kind: str
    body: dict = field(default_factory=dict)

    @classmethod
    def range(cls, key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0,
              count_only: bool = False, keys_only: bool = False) -> "Op":
        return cls("range", _range_body(key, range_end, limit, revision, count_only, keys_only, False, 0))

    @classmethod
    def put(cls, key: bytes, value: bytes, lease: int = 0, prev_kv: bool = False,
            ignore_lease: bool = False) -> "Op":
        return cls("put", _put_body(key, value, lease, prev_kv, ignore_lease))

    @classmethod
    def delete_range(cls, key: bytes, range_end: bytes = b"", prev_kv: bool = False) -> "Op":
        return cls("delete_range", _delete_body(key, range_end, prev_kv))

    def to_json(self) -> dict:
        return {f"request_{self.kind}": self.body}


def _range_body(key, range_end, limit, revision, count_only, keys_only, serializable, min_mod_revision) -> dict:
    body: dict[str, Any] = {"key": b64(key)}
    if range_end:
        body["range_end"] = b64(range_end)
    if limit:
        body["limit"] = str(limit)
    if revision:
        body["revision"] = str(revision)
    if count_only:
        body["count_only"] = True
    if keys_only:
        body["keys_only"] = True
    if serializable:
        body["serializable"] = True
    if min_mod_revision:
        body["min_mod_revision"] = str(min_mod_revision)
    return body


def _put_body(key, value, lease, prev_kv, ignore_lease) -> dict:
    body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    if prev_kv:
        body["prev_kv"] = True
    if ignore_lease:
        body["ignore_lease"] = True
    return body


def _delete_body(key, range_end, prev_kv) -> dict:
    body: dict[str, Any] = {"key": b64(key)}
    if range_end:
        body["range_end"] = b64(range_end)
    if prev_kv:
        body["prev_kv"] = True
    return body


def _put_response(r: dict) -> PutResponse:
    prev = r.get("prev_kv")
    return PutResponse(header_revision(r), EtcdKV.from_json(prev) if prev else None)


def _delete_response(r: dict) -> DeleteResponse:
    return DeleteResponse(header_revision(r), int(r.get("deleted", 0)),
                          [EtcdKV.from_json(kv) for kv in r.get("prev_kvs", ())])


_OP_RESPONSES = {"response_range": RangeResponse.from_json, "response_put": _put_response,
                 "response_delete_range": _delete_response}


# ---------------------------------------------------------------- errors


class EtcdError(StorageError):
    """etcd answered with a gRPC error that has no more specific storage error."""

    def __init__(self, code: int, message: str):
        super().__init__(f"etcd error (code {code}): {message}", message)
        self.code = code
        self.message = message


class LeaseNotFoundError(EtcdError):
    """The lease does not exist (never granted, revoked or expired)."""


# gRPC status codes that mean "try again later".
_UNAVAILABLE_CODES = {4, 14}  # DEADLINE_EXCEEDED, UNAVAILABLE


def _error_from_body(status: int, body: bytes, path: str, revision: int = 0) -> StorageError:
    try:
        doc = orjson.loads(body)
        message = doc.get("message") or doc.get("error") or ""
        code = int(doc.get("code", 0))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return EtcdError(0, f"HTTP {status} from {path}: {body[:200]!r}")
    if "required revision has been compacted" in message:
        return CompactedError(revision, 0)  # the backend fills in the compacted revision
    if "required revision is a future revision" in message:
        return FutureRevisionError(revision, 0)
    if "requested lease not found" in message:
        return LeaseNotFoundError(code, message)
    # a proposal on a member that knows no leader waits out etcd's own deadline, and the gateway
    # passes that on as code 2 (Unknown), "context deadline exceeded"
    if code in _UNAVAILABLE_CODES or "timed out" in message or "leader" in message or "deadline exceeded" in message:
        return UnavailableError(f"etcd cannot serve {path}: {message}", message)
    return EtcdError(code, message)


# ---------------------------------------------------------------- client


class _OneStream(Factory):
    """Connects one given protocol, without logging each connection as a factory start."""

    noisy = False

    def __init__(self, stream: WebSocketStream) -> None:
        self._stream = stream

    def buildProtocol(self, addr: object) -> WebSocketStream:
        return self._stream


class _Slots:
    """At most ``limit`` holders at once; the others wait in turn (a DeferredSemaphore that
    makes no Deferred for a slot that is free)."""

    def __init__(self, limit: int) -> None:
        self.free = limit
        self._waiting: deque[defer.Deferred] = deque()

    def take(self) -> Optional[defer.Deferred]:
        """None when a slot was free and is now held; else a Deferred that fires once one is
        handed over (cancelling it gives up the wait)."""
        if self.free:
            self.free -= 1
            return None
        d: defer.Deferred = defer.Deferred(self._waiting.remove)
        self._waiting.append(d)
        return d

    def release(self) -> None:
        if self._waiting:
            self._waiting.popleft().callback(None)  # the slot passes to the first waiting
        else:
            self.free += 1


class _Deadlines:
    """Cancels calls that run past one fixed timeout, with one timer for them all.

    ``Deferred.addTimeout`` schedules and cancels a timer of the reactor's per call; calls
    of one timeout end in the order they began, so the oldest call's deadline is the only
    one that can come next: one timer, set for it, moved on to the next oldest when it goes
    off.  A call is cancelled at its deadline exactly, as by ``addTimeout``.
    """

    def __init__(self, reactor: IReactorTime, timeout: float) -> None:
        self._reactor = reactor
        self.timeout = timeout
        self._running: dict[defer.Deferred, float] = {}  # calls and their deadlines, oldest first
        self._timer: Optional[IDelayedCall] = None
        self._expired: set[defer.Deferred] = set()

    def watch(self, d: defer.Deferred) -> None:
        """Cancel ``d`` if it has not fired ``timeout`` seconds from now."""
        if d.called:
            return
        self._running[d] = self._reactor.seconds() + self.timeout
        if self._timer is None:
            self._timer = self._reactor.callLater(self.timeout, self._expire)
        d.addBoth(self._ended, d)

    def _ended(self, result: object, d: defer.Deferred) -> object:
        self._running.pop(d, None)
        return result

    def expired(self, d: defer.Deferred) -> bool:
        """Whether ``d`` was cancelled for running past its deadline (asked once)."""
        if d in self._expired:
            self._expired.discard(d)
            return True
        return False

    def _expire(self) -> None:
        self._timer = None
        now = self._reactor.seconds()
        while self._running:
            d, deadline = next(iter(self._running.items()))
            if deadline > now:
                self._timer = self._reactor.callLater(deadline - now, self._expire)
                return
            del self._running[d]
            self._expired.add(d)
            d.cancel()

    def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()


class EtcdClient:
    """Calls etcd's gateway on ``endpoints`` (``http(s)://host:port``), with failover.

    The endpoint that last answered is tried first.  ``request_timeout`` bounds
    each call as a whole (all endpoints included).
    """

    def __init__(self, endpoints: list[str], tls: Optional[EtcdTLS] = None, request_timeout: float = 10.0,
                 reactor=None, max_in_flight: int = 32):
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.request_timeout = request_timeout
        self._preferred = 0
        # Bounds the number of concurrent unary calls (and so of connections):
        # a burst of writes queues here instead of opening a socket each.
        self._slots = _Slots(max_in_flight)
        self._deadlines = _Deadlines(reactor, request_timeout)
        connect_timeout = max(1, min(5, int(request_timeout)))
        endpoint_factory = KeepAliveEndpointFactory(reactor, tls.policy() if tls is not None else None,
                                                     connect_timeout)
        self._unary = UnaryHTTPClient(endpoint_factory)
        self.calls = 0  # unary calls made (tests, benchmarks)
        # told of an endpoint that answered it cannot serve (the watches on it move: below)
        self._shun_listeners: set[Callable[[str], None]] = set()

    def describe_endpoints(self) -> str:
        return ", ".join(self.endpoints)

    def _order(self, avoid: Optional[str] = None) -> list[str]:
        n = len(self.endpoints)
        order = [self.endpoints[(self._preferred + i) % n] for i in range(n)]
        if avoid in order and n > 1:
            order.remove(avoid)
            order.append(avoid)
        return order

    def _prefer(self, endpoint: str) -> None:
        self._preferred = self.endpoints.index(endpoint)

    def add_shun_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(endpoint)`` whenever an endpoint answers that it cannot serve."""
        self._shun_listeners.add(listener)

    def remove_shun_listener(self, listener: Callable[[str], None]) -> None:
        self._shun_listeners.discard(listener)

    def _shun(self, endpoint: str) -> None:
        """``endpoint`` answered that it cannot serve now (no leader, a timeout, a leader change):
        later calls start at the next endpoint, and the watches on it are told.  A member cut off
        from its peers keeps answering so, after its own timeout, for as long as the cut lasts, and
        keeps a watch open, sending progress notifications of its stale revision: upstream's client
        spreads calls over every endpoint and its watches require a leader, which etcd's gateway
        cannot be asked for (its WebSocket proxy forwards no gRPC metadata)."""
        if len(self.endpoints) < 2:
            return  # nowhere else to go
        if self.endpoints[self._preferred] == endpoint:
            self._preferred = (self._preferred + 1) % len(self.endpoints)
        for listener in list(self._shun_listeners):
            listener(endpoint)

    # ------------------------------------------------------------ plumbing

    async def call(self, path: str, body: dict, idempotent: bool = True, timeout: Optional[float] = None,
                   revision: int = 0) -> dict:
        """POST ``body`` to ``path`` and return the decoded JSON answer.

        ``idempotent`` calls are also retried when a connection broke after
        the request may have been sent.  ``revision`` is the revision asked
        for, used to build Compacted/FutureRevision errors.
        """
        return await self.post(path, orjson.dumps(body), idempotent, timeout, revision)

    def post(self, path: str, data: bytes, idempotent: bool = True, timeout: Optional[float] = None,
             revision: int = 0) -> "defer.Deferred[dict]":
        """:meth:`call` with the body already encoded (JSON), as a Deferred (one coroutine less
        for the calls every write makes)."""
        limit = self.request_timeout if timeout is None else timeout
        self.calls += 1
        d = defer.Deferred.fromCoroutine(self._call(path, data, idempotent, revision))
        if limit == self._deadlines.timeout:
            self._deadlines.watch(d)
            return d.addErrback(self._timed_out, d, path, limit)
        d.addTimeout(limit, self.reactor)
        return d.addErrback(self._timed_out, None, path, limit)

    def _timed_out(self, failure: Failure, call: Optional[defer.Deferred], path: str, limit: float) -> Failure:
        """A call that ran out of time fails as unavailable (a caller that gave up gets its
        CancelledError)."""
        if failure.check(defer.TimeoutError) or (
                call is not None and failure.check(defer.CancelledError) and self._deadlines.expired(call)):
            raise UnavailableError(f"etcd request {path} timed out after {limit:g}s "
                                   f"(endpoints: {self.describe_endpoints()})",
                                   f"etcd did not answer within {limit:g}s")
        return failure

    async def _call(self, path: str, data: bytes, idempotent: bool, revision: int) -> dict:
        last: Optional[BaseException] = None
        for endpoint in self._order():
            waiting = self._slots.take()
            if waiting is not None:
                await waiting
            try:
                code, content = await self._unary.post(endpoint, path, data)
            except _NOT_SENT as e:
                last = e
                continue
            except _MAYBE_SENT as e:
                last = e
                if idempotent:
                    continue
                raise UnavailableError(f"connection to etcd at {endpoint} broke during {path}; "
                                       f"the outcome is unknown: {_describe(e)}",
                                       "the connection to etcd broke during the request; its outcome is unknown"
                                       ) from None
            finally:
                self._slots.release()
            if code != 200:
                error = _error_from_body(code, content, path, revision)
                if isinstance(error, UnavailableError):
                    self._shun(endpoint)
                    if idempotent:  # safe to ask again (a read): the next may serve
                        last = error
                        continue
                else:
                    self._prefer(endpoint)
                raise error
            self._prefer(endpoint)
            return orjson.loads(content) if content else {}
        if isinstance(last, UnavailableError):
            raise last  # every endpoint answered, none could serve: the last one's answer
        raise UnavailableError(f"etcd is unreachable at {self.describe_endpoints()}: {_describe(last)}",
                               "etcd is unreachable")

    async def open_websocket(self, path: str, make_stream: Callable[[bytes], WebSocketStream],
                             timeout: Optional[float] = None, avoid: Optional[str] = None
                             ) -> tuple[str, WebSocketStream]:
        """Open a WebSocket to ``path`` (a bidirectional stream: a watch) on the first endpoint that takes it.

        ``make_stream(host)`` makes the protocol for one attempt.  Returns the
        endpoint and the stream once the upgrade was accepted;
        ``stream.ended`` says when it is gone.  Cancelling the awaiting
        Deferred aborts an attempt in flight.  ``avoid`` (an endpoint that just
        went silent) is tried last.
        """
        limit = self.request_timeout if timeout is None else timeout
        last: Optional[BaseException] = None
        for endpoint in self._order(avoid):
            where, host = self._unary.resolve(endpoint)
            stream = make_stream(host)
            connecting = where.connect(_OneStream(stream))
            connecting.addTimeout(limit, self.reactor)
            try:
                await connecting
                await stream.opened.addTimeout(limit, self.reactor)
            except (StorageError, defer.CancelledError):  # refused by etcd, or given up by the caller
                stream.abort()
                raise
            except Exception as e:  # no connection, a broken one, a failed TLS handshake, a timeout
                stream.abort()
                last = e
                continue
            self._prefer(endpoint)
            return endpoint, stream
        raise UnavailableError(f"etcd is unreachable at {self.describe_endpoints()}: {_describe(last)}",
                               "etcd is unreachable")

    def close(self) -> defer.Deferred:
        """Close the unary calls' connections (streams are closed by their owners)."""
        self._deadlines.stop()
        return self._unary.close()

    # ------------------------------------------------------------ KV

    async def range(self, key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0,
                    count_only: bool = False, keys_only: bool = False, serializable: bool = False,
                    min_mod_revision: int = 0) -> RangeResponse:
        """etcd's Range.  With ``min_mod_revision`` etcd filters the keys after reading the
        whole range, then applies ``limit``; ``count`` stays the whole range's."""
        body = _range_body(key, range_end, limit, revision, count_only, keys_only, serializable, min_mod_revision)
        return RangeResponse.from_json(await self.call("/v3/kv/range", body, revision=revision))

    async def put(self, key: bytes, value: bytes, lease: int = 0, prev_kv: bool = False,
                  ignore_lease: bool = False) -> PutResponse:
        body = _put_body(key, value, lease, prev_kv, ignore_lease)
        return _put_response(await self.call("/v3/kv/put", body, idempotent=False))

    async def delete_range(self, key: bytes, range_end: bytes = b"", prev_kv: bool = False) -> DeleteResponse:
        body = _delete_body(key, range_end, prev_kv)
        return _delete_response(await self.call("/v3/kv/deleterange", body, idempotent=False))

    async def txn(self, compare: list[Compare], success: list[Op], failure: list[Op]) -> TxnResponse:
        body = {"compare": [c.to_json() for c in compare], "success": [o.to_json() for o in success],
                "failure": [o.to_json() for o in failure]}
        read_only = all(o.kind == "range" for o in success + failure)
        r = await self.call("/v3/kv/txn", body, idempotent=read_only)
        responses = []
        for item in r.get("responses", ()):
            for name, parse in _OP_RESPONSES.items():
                if name in item:
                    responses.append(parse(item[name]))
                    break
            else:
                responses.append(item)
        return TxnResponse(bool(r.get("succeeded", False)), header_revision(r), responses)

    def create(self, key: bytes, value: bytes, lease: int = 0) -> "defer.Deferred[tuple[bool, int]]":
        """Fire with whether ``key`` was put, and the answer's revision: put if it did not exist, in one txn (``create_revision`` 0, as
        :meth:`txn` with ``Compare.create_revision(key, "EQUAL", 0)`` and ``Op.put``, the same
        body).

        Every create of an object is one, so its body is written as bytes here rather than
        built as Compare and Op objects, a dict and then JSON, and of the answer only what a
        create needs is read."""
        k = _b64_bytes(key)
        body = b"".join((b'{"compare":[{"key":"', k, b'","target":"CREATE","result":"EQUAL","create_revision":"0"}],'
                         b'"success":[{"request_put":{"key":"', k, b'","value":"', _b64_bytes(value),
                         b'","lease":"%d"}}],"failure":[]}' % lease if lease else b'"}}],"failure":[]}'))
        return self.post("/v3/kv/txn", body, idempotent=False).addCallback(_created)

    async def compact(self, revision: int, physical: bool = False) -> None:
        body: dict[str, Any] = {"revision": str(revision)}
        if physical:
            body["physical"] = True
        await self.call("/v3/kv/compaction", body, revision=revision)

    # ------------------------------------------------------------ leases

    async def lease_grant(self, ttl: int, lease_id: int = 0) -> tuple[int, int]:
        """Grant a lease; returns ``(id, ttl)``."""
        body: dict[str, Any] = {"TTL": str(ttl)}
        if lease_id:
            body["ID"] = str(lease_id)
        r = await self.call("/v3/lease/grant", body, idempotent=False)
        if r.get("error"):
            raise EtcdError(0, r["error"])
        return int(r.get("ID", 0)), int(r.get("TTL", 0))

    async def lease_keepalive(self, lease_id: int) -> int:
        """Refresh a lease once; returns its new TTL (raises LeaseNotFoundError if it expired)."""
        r = await self.call("/v3/lease/keepalive", {"ID": str(lease_id)})
        result = r.get("result", r)
        if "error" in r:
            raise _error_from_body(500, orjson.dumps(r["error"]), "/v3/lease/keepalive")
        ttl = int(result.get("TTL", 0))
        if ttl <= 0:
            raise LeaseNotFoundError(5, "etcdserver: requested lease not found")
        return ttl

    async def lease_revoke(self, lease_id: int) -> None:
        await self.call("/v3/lease/revoke", {"ID": str(lease_id)})

    # ------------------------------------------------------------ maintenance

    async def status(self, timeout: Optional[float] = None) -> dict:
        """The maintenance status of the first endpoint that answers (revision in ``header``)."""
        return await self.call("/v3/maintenance/status", {}, timeout=timeout)


# twisted's HTTP client failures that wrap the Failures that caused them (``reasons``)
_REASONS_CARRIERS = (ResponseFailed, ResponseNeverReceived, RequestTransmissionFailed, RequestGenerationFailed)


def _describe(e: Optional[BaseException]) -> str:
    if e is None:
        return "no endpoint tried"
    if isinstance(e, _REASONS_CARRIERS) and e.reasons:
        return "; ".join(str(r.value) for r in e.reasons)
    return str(e) or type(e).__name__

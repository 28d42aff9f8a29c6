"""The request filters that run before routing (upstream's handler chain).

In order: body size limit (while the body arrives), request info, panic
recovery (around everything), authentication, authorization, max-in-flight,
request timeout; then the resource tree (the delegation chain) routes the
request.  Metrics are recorded when the request finishes.
"""
from __future__ import annotations

import time
from typing import Any, Optional, Protocol

from twisted.logger import Logger
from twisted.web import server

from kapiserver.endpoints import respond
from kapiserver.endpoints.request_info import RequestInfo, parse_request_info
from kapiserver.machinery import errors

log = Logger()

MUTATING_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


class FilterSettings(Protocol):
    """What the filters need from the server (the APIServer provides it)."""

    reactor: Any
    max_body_bytes: int
    request_timeout: float

    def authenticate(self, request: server.Request) -> Any: ...

    def authorize(self, user: Any, info: RequestInfo) -> Optional[str]: ...

    def admit_inflight(self, info: RequestInfo) -> Optional[Any]: ...

    def record(self, request: "APIRequest", code: int, seconds: float) -> None: ...


class InflightToken(Protocol):
    def release(self) -> None: ...


class APIRequest(server.Request):
    """A twisted.web request that runs the API server's filters before routing."""

    request_info: RequestInfo
    user: Any = None
    timed_out = False
    _body_bytes = 0
    _body_too_large = False

    def handleContentChunk(self, data: bytes) -> None:
        limit = self._settings().max_body_bytes
        self._body_bytes += len(data)
        if self._body_bytes > limit:
            self._body_too_large = True
            return  # stop storing: the request will be answered 413
        super().handleContentChunk(data)

    def _settings(self) -> FilterSettings:
        return self.channel.site.api  # type: ignore[attr-defined]

    def process(self) -> None:
        self.site = self.channel.site
        settings = self._settings()
        self.setHeader(b"Date", server.datetimeToString())
        self.prepath = []
        self.postpath = [p for p in self.path.split(b"?", 1)[0][1:].split(b"/")]
        started = time.monotonic()
        token: Optional[InflightToken] = None
        try:
            path = self.path.split(b"?", 1)[0].decode("utf-8", "replace")
            self.request_info = parse_request_info(self.method.decode("latin-1"), path, self.args or {})
            info = self.request_info
            if self._body_too_large:
                raise errors.too_large(f"the request body is too large: limit is {settings.max_body_bytes} bytes")
            self.user = settings.authenticate(self)
            denial = settings.authorize(self.user, info)
            if denial:
                raise errors.StatusError(403, "Forbidden", denial)
            token = settings.admit_inflight(info)
            if not info.is_long_running and not (info.verb == "list" and _truthy(self.args, b"watch")):
                self._arm_timeout(settings)
        except Exception as e:
            self.notifyFinish().addBoth(lambda _: settings.record(self, self.code, time.monotonic() - started))
            respond.write_failure(self, e)
            return

        def done(_):
            if token is not None:
                token.release()
            settings.record(self, self.code, time.monotonic() - started)
        self.notifyFinish().addBoth(done)
        try:
            self.render(self.site.getResourceFor(self))
        except Exception as e:  # panic recovery: never a traceback to the client
            respond.write_failure(self, e)

    def _arm_timeout(self, settings: FilterSettings) -> None:
        seconds = settings.request_timeout
        raw = (self.args or {}).get(b"timeout")
        if raw:
            parsed = _parse_duration(raw[0].decode("latin-1"))
            if parsed is None:
                raise errors.bad_request(f"invalid timeout specified in the request URL: {raw[0]!r}")
            seconds = min(seconds, parsed) if parsed > 0 else seconds
        call = settings.reactor.callLater(seconds, self._on_timeout)
        self.notifyFinish().addBoth(lambda _: call.cancel() if call.active() else None)

    def _on_timeout(self) -> None:
        if self.finished or self.startedWriting:
            return
        respond.write_status(self, errors.timeout("request did not complete within the allowed duration"))
        self.timed_out = True

    def processingFailed(self, reason):  # last resort: a Status, not Twisted's HTML page
        log.failure("request processing failed", reason)
        respond.write_status(self, errors.internal_error())


def _truthy(args: Optional[dict], key: bytes) -> bool:
    values = (args or {}).get(key)
    return bool(values) and values[0].lower() in (b"true", b"1")


def _parse_duration(text: str) -> Optional[float]:
    """Go durations as clients send them in ``?timeout=`` (``30s``, ``1m0s``, ``500ms``)."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    total, number = 0.0, ""
    i = 0
    if not text:
        return None
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = ch
        if text[i:i + 2] in ("ms", "us", "µs", "ns"):
            unit = text[i:i + 2]
        if unit not in units or not number:
            return None
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    if number:
        return None
    return total


class APISite(server.Site):
    """The Site: requests are :class:`APIRequest`; ``api`` provides the filter settings."""

    requestFactory = APIRequest
    displayTracebacks = False

    def __init__(self, root, api: FilterSettings, **kwargs) -> None:
        super().__init__(root, **kwargs)
        self.api = api
        self.noisy = False

    def buildProtocol(self, addr):
        proto = super().buildProtocol(addr)
        channel = getattr(proto, "_channel", None)
        if channel is not None:
            # Go's net/http (kube-apiserver) reads up to 1 MiB of request line and headers (long
            # selectors in a URL work) and answers 431 beyond; Twisted would drop the connection at 16 KiB
            channel.MAX_LENGTH = channel.totalHeadersSize = MAX_HEADER_BYTES
            channel.lineLengthExceeded = lambda line: _headers_too_large(channel)
            channel._respondToBadRequestAndDisconnect = lambda: _headers_too_large(channel)
        return proto


MAX_HEADER_BYTES = 1 << 20


def _headers_too_large(channel) -> None:
    channel.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; "
                            b"charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")
    channel.loseConnection()

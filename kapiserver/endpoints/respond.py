"""Writing answers: objects in the negotiated encoding, errors as Status."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from twisted.internet import defer, threads
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.server import Request

from kapiserver.endpoints.list_encoding import stored_body
from kapiserver.endpoints.list_stream import ListStream, PiecedBody
from kapiserver.endpoints.negotiation import PROTOBUF_SHAPE_KINDS, MediaTarget, negotiate
from kapiserver.endpoints.request_context import context_of, writable
from kapiserver.endpoints.status_stream import STREAMED_CAUSES, StatusBody, streamable
from kapiserver.machinery import codec, errors, protobuf
from kapiserver.registry.store import LARGE_BODY_ON_THREAD_BYTES, StoredObject, on_large_body_thread
from kapiserver.storage.interface import StorageError

log = Logger()


def wants_pretty(request: Request) -> bool:
    values = (request.args or {}).get(b"pretty")
    if values:
        return values[0].lower() in (b"true", b"1")
    agent = request.getHeader(b"user-agent") or b""
    # upstream pretty-prints for browsers and curl
    return agent.startswith(b"curl") or b"Mozilla" in agent


def _warn(request: Request, warnings: Iterable[str]) -> None:
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        request.responseHeaders.addRawHeader(b"warning", f'299 - "{escaped}"'.encode("utf-8", "replace"))


def write_object(request: Request, target: MediaTarget, code: int, obj: Any,
                 warnings: Iterable[str] = (), pretty: bool | None = None) -> None:
    if not writable(request):
        return
    audit = context_of(request).audit
    if audit is not None:
        audit.log_response_object(obj)
    content_type, body = _encoded(target, obj, wants_pretty(request) if pretty is None else pretty)
    _write_encoded(request, code, content_type, body, warnings)


def _encoded(target: MediaTarget, obj: Any, pretty: bool) -> tuple[str, bytes]:
    """(content type, body) of ``obj`` in the negotiated encoding."""
    body = _protobuf_body(target, obj)
    if body is not None:
        return protobuf.MEDIA_TYPE, body
    return target.content_type, codec.encode(obj, target.media_type, pretty)


def write_stored(request: Request, target: MediaTarget, code: int, stored: StoredObject,
                 warnings: Iterable[str] = ()) -> bool:
    """A stored object answered with the encoding memoized on its value (``stored_body``).

    False, having written nothing, when the answer needs the object itself: another
    shape, indented JSON, YAML, or an audit policy that logs response bodies.
    """
    if not writable(request):
        return True
    if not _answers_stored(request):
        return False
    encoded = stored_body(stored, target)
    if encoded is None:
        return False
    _write_encoded(request, code, encoded[0], encoded[1], warnings)
    return True


def _answers_stored(request: Request) -> bool:
    audit = context_of(request).audit
    return not ((audit is not None and audit.logs_response_object()) or wants_pretty(request))


async def write_large(request: Request, target: MediaTarget, code: int, obj: StoredObject | dict,
                      warnings: Iterable[str] = ()) -> None:
    """An object of the answer's own shape, as :func:`write_stored` or :func:`write_object` would
    answer it, decoded and encoded on the large-body thread: for a large object (a Pod of 100,000
    env vars: ~40 ms for its JSON) the reactor would otherwise spend that in the turn that stored it,
    every other request waiting."""
    if isinstance(obj, StoredObject) and _answers_stored(request):
        encoded = await on_large_body_thread(stored_body, obj, target)
        if encoded is not None:
            if writable(request):
                _write_encoded(request, code, encoded[0], encoded[1], warnings)
            return
    decoded, (content_type, body) = await on_large_body_thread(_decoded_and_encoded, obj, target,
                                                               wants_pretty(request))
    if writable(request):
        audit = context_of(request).audit
        if audit is not None:
            audit.log_response_object(decoded)
        _write_encoded(request, code, content_type, body, warnings)


def _decoded_and_encoded(obj: StoredObject | dict, target: MediaTarget, pretty: bool) -> tuple[dict, tuple[str, bytes]]:
    decoded = obj.external() if isinstance(obj, StoredObject) else obj
    return decoded, _encoded(target, decoded, pretty)


def is_large(stored: StoredObject) -> bool:
    """Whether ``stored`` is answered off the reactor (:func:`write_large`)."""
    return len(stored.item.value) >= LARGE_BODY_ON_THREAD_BYTES


def _write_encoded(request: Request, code: int, content_type: str, body: bytes, warnings: Iterable[str]) -> None:
    request.setResponseCode(code)
    request.setHeader(b"content-type", content_type.encode())
    request.setHeader(b"cache-control", b"no-cache, private")
    _warn(request, warnings)
    request.setHeader(b"content-length", str(len(body)).encode())
    if request.method != b"HEAD":
        request.write(body)
    request.finish()


async def stream_list(request: Request, body: PiecedBody, reactor: IReactorTime, warnings: Iterable[str] = (),
                      code: int = 200) -> None:
    """A list answer (or a Status of many causes) written piece by piece with flow control
    (``endpoints/list_stream.py``)."""
    await body.prepare()  # protobuf: every item's size, before the first byte
    if not writable(request):
        return
    request.setResponseCode(code)
    request.setHeader(b"content-type", body.content_type.encode())
    request.setHeader(b"cache-control", b"no-cache, private")
    _warn(request, warnings)
    if request.method == b"HEAD":
        request.finish()
        return
    await ListStream(request, body, reactor).start()


def write_raw(request: Request, code: int, content_type: str, body: bytes, warnings: Iterable[str] = ()) -> None:
    """Bytes that are already the answer (a connect subresource's: logs)."""
    if not writable(request):
        return
    request.setResponseCode(code)
    if content_type:
        request.setHeader(b"content-type", content_type.encode())
    request.setHeader(b"cache-control", b"no-cache, private")
    _warn(request, warnings)
    request.setHeader(b"content-length", str(len(body)).encode())
    if request.method != b"HEAD":
        request.write(body)
    request.finish()


def write_too_many_requests(request: Request, retry_after: int) -> None:
    """Upstream's ``tooManyRequests`` (max-in-flight and priority-and-fairness): ``http.Error``'s
    plain text, not a Status, with ``Retry-After``."""
    if not writable(request):
        return
    request.setResponseCode(429, b"Too Many Requests")
    request.setHeader(b"retry-after", str(retry_after).encode())
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"x-content-type-options", b"nosniff")
    body = b"Too many requests, please try again later.\n"
    request.setHeader(b"content-length", str(len(body)).encode())
    if request.method != b"HEAD":
        request.write(body)
    request.finish()


def _protobuf_body(target: MediaTarget, obj: Any) -> bytes | None:
    """The protobuf encoding when the client prefers it and the kind has a table, else None."""
    if not target.prefer_protobuf or not isinstance(obj, dict):
        return None
    if target.as_kind and target.as_kind not in PROTOBUF_SHAPE_KINDS:
        return None
    if not protobuf.can_encode(obj.get("apiVersion") or "", obj.get("kind") or ""):
        return None
    try:
        return protobuf.encode_object(obj)
    except protobuf.ProtobufError:
        log.failure("protobuf encoding of {kind} failed; answering JSON", kind=obj.get("kind"))
        return None


def status_target(request: Request, target: MediaTarget | None = None) -> MediaTarget | None:
    """How a Status is encoded: the negotiated media type (protobuf too, as upstream's
    ErrorNegotiated does), never another shape; without a target (errors before
    negotiation) from the request's Accept.  None when the client accepts nothing
    the server writes."""
    if target is None:
        accept = request.getHeader(b"accept")
        try:
            target = negotiate(accept.decode("latin-1") if accept else None)
        except errors.StatusError:
            return None
    return target.for_status()


def write_status(request: Request, err: errors.StatusError, target: MediaTarget | None = None) -> None:
    if not writable(request):
        return
    for name, value in err.headers.items():
        request.setHeader(name.encode(), value.encode())
    # a failed negotiation (406) is written as upstream's WriteRawJSON does: indented JSON
    negotiated = None if err.reason == "NotAcceptable" and target is None else status_target(request, target)
    if negotiated is None:
        write_object(request, MediaTarget(codec.JSON), err.code, err.to_status(), pretty=True)
        return
    if isinstance(err, errors.InvalidError) and len(err.causes) >= STREAMED_CAUSES:
        _write_large_invalid(request, err, negotiated)
        return
    write_object(request, negotiated, err.code, err.to_status())


def _write_large_invalid(request: Request, err: errors.InvalidError, target: MediaTarget) -> None:
    """A 422 of many causes, in the background of whoever answered it: streamed in slices
    (``status_stream.py``), or, for the encodings not streamed (YAML, indented JSON) and a Status
    an audit policy logs, rendered and encoded on a thread (400,000 causes in YAML take tens of
    seconds) and then written whole."""
    from twisted.internet import reactor  # (write_status is called where no reactor is at hand)

    audit = context_of(request).audit
    pretty = wants_pretty(request)
    if streamable(err, target, pretty) and (audit is None or not audit.logs_response_object()):
        body = StatusBody(err, target)
        written = defer.ensureDeferred(stream_list(request, body, reactor, code=err.code))
    else:
        def encode() -> tuple[dict, tuple[str, bytes]]:
            status = err.to_status()
            return status, _encoded(target, status, pretty)

        def write(result: tuple[dict, tuple[str, bytes]]) -> None:
            status, (content_type, encoded) = result
            if not writable(request):
                return
            if audit is not None:
                audit.log_response_object(status)
            _write_encoded(request, err.code, content_type, encoded, ())
        written = threads.deferToThread(encode).addCallback(write)

    def failed(failure: Failure) -> None:
        log.failure("writing a 422 of {count} causes failed", failure=failure, count=len(err.causes))
        if writable(request):
            write_failure(request, failure.value or Exception())
    written.addErrback(failed)


def failure_writer(request: Request, target: MediaTarget | None = None) -> Callable[[Failure], None]:
    """An errback answering ``request`` with the failure (see :func:`write_failure`)."""
    def write(failure: Failure) -> None:
        assert failure.value is not None
        write_failure(request, failure.value, target)
    return write


def write_failure(request: Request, exc: BaseException, target: MediaTarget | None = None) -> None:
    """Any exception: a StatusError as is, anything else as a generic 500 (details in the log)."""
    if isinstance(exc, errors.StatusError):
        write_status(request, exc, target)
        return
    log.failure("handler error for {method} {path}", failure=Failure(exc, type(exc), exc.__traceback__),
                method=request.method, path=request.path)
    if isinstance(exc, StorageError) and exc.client_message:
        # upstream's ErrorToAPIStatus: an error that is no API status answers 500 with its text
        write_status(request, errors.unexpected_error(exc.client_message), target)
        return
    write_status(request, errors.internal_error(), target)

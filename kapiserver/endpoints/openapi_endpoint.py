"""``/openapi/v2`` and ``/openapi/v3[/<group-version>]``, served with ETags.

``/openapi/v2`` is negotiated as kube-openapi does it: JSON, or gnostic's
protobuf ``Document`` for ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
(what kubectl asks for) and ``...v2.v1.0+protobuf``; both carry the ETag of
the JSON document; nothing acceptable is a bare 406. Like kube-openapi's
handlers, these answer any method as a GET.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from twisted.web import resource, server

from kapiserver.endpoints import respond
from kapiserver.endpoints.request_context import client_gone, context_of
from kapiserver.machinery import errors

JSON = "application/json"


def _accept_clauses(header: str) -> list[tuple[str, str]]:
    """(type, subtype) of each Accept clause, most preferred first (goautoneg's order:
    quality, then concrete types before wildcards)."""
    clauses = []
    for index, raw in enumerate(header.split(",")):
        pieces = [p.strip() for p in raw.split(";")]
        media = pieces[0].lower()
        if not media:
            continue
        q = 1.0
        for param in pieces[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        main, _, sub = media.partition("/")
        clauses.append((-q, main == "*", sub == "*", index, main, sub or "*"))
    clauses.sort()
    return [(c[4], c[5]) for c in clauses if c[0] < 0]


def negotiate_v2(accept: Optional[str]) -> Optional[str]:
    """The media type to answer ``/openapi/v2`` with, or None (406)."""
    # the protobuf encoder (and its message tables) loads with the first /openapi/v2 request
    from kapiserver.machinery import openapi_v2_protobuf
    offered = [(JSON, JSON)] + [(t, openapi_v2_protobuf.MEDIA_TYPE) for t in openapi_v2_protobuf.ACCEPTED_MEDIA_TYPES]
    for main, sub in _accept_clauses(accept or "*/*"):
        for media, answer in offered:
            o_main, o_sub = media.split("/", 1)
            if main in (o_main, "*") and sub in (o_sub, "*"):
                return answer
    return None


class OpenAPIEndpoint(resource.Resource):
    isLeaf = True

    def __init__(self, service: Callable[[], Any]) -> None:
        super().__init__()
        self.service = service  # returns the current kapiserver.endpoints.openapi.OpenAPIService

    def render(self, request: server.Request):
        # kube-openapi's handlers sit on a path mux with no method routing: every method
        # (POST, MKCOL, TRACE, ...) is answered as a GET, once authorized for its verb
        return self.render_GET(request)

    def render_GET(self, request: server.Request):
        parts = context_of(request).require_info().parts[1:]  # after "openapi"
        try:
            service = self.service()
            if parts == ["v2"]:
                return self._render_v2(request, service)
            if parts == ["v3"]:
                body, etag = service.v3_index_bytes(), None
            elif len(parts) > 1 and parts[0] == "v3":
                found = service.v3_bytes("/".join(parts[1:]))
                if found is None:
                    raise errors.resource_not_found()
                body, etag = found
            else:
                raise errors.resource_not_found()
        except Exception as e:
            respond.write_failure(request, e)
            return server.NOT_DONE_YET
        if etag and self._not_modified(request, etag):
            return b""
        request.setHeader(b"content-type", JSON.encode())
        return body

    @staticmethod
    def _not_modified(request: server.Request, etag: str) -> bool:
        """Set the ETag and cache headers; True (a 304 set) when the client has this version."""
        quoted = f'"{etag}"'.encode()
        request.setHeader(b"etag", quoted)
        if (request.args or {}).get(b"hash"):
            request.setHeader(b"cache-control", b"public, immutable")
        else:
            request.setHeader(b"cache-control", b"no-cache, private")
        if request.getHeader(b"if-none-match") == quoted:
            # http.ServeContent: 304 for GET and HEAD, 412 for any other method
            request.setResponseCode(304 if request.method in (b"GET", b"HEAD") else 412)
            return True
        return False

    def _render_v2(self, request: server.Request, service: Any):
        accept = request.getHeader(b"accept")
        media = negotiate_v2(accept.decode("latin-1") if accept else None)
        request.setHeader(b"vary", b"Accept")
        if media is None:
            request.setResponseCode(406)
            return b""
        body, etag = service.v2_bytes(), service.v2_etag()
        if self._not_modified(request, etag):
            return b""
        request.setHeader(b"content-type", media.encode())
        if media == JSON:
            return body

        def write(encoded: bytes) -> None:
            if client_gone(request):
                return
            request.setHeader(b"content-length", str(len(encoded)).encode())
            if request.method != b"HEAD":
                request.write(encoded)
            request.finish()
        service.v2_protobuf().addCallback(write).addErrback(lambda f: respond.write_failure(request, f.value))
        return server.NOT_DONE_YET

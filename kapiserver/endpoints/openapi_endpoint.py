"""``/openapi/v2`` and ``/openapi/v3[/<group-version>]``, served with ETags."""
from __future__ import annotations

from typing import Any, Callable

from twisted.web import resource, server

from kapiserver.endpoints import respond
from kapiserver.endpoints.request_context import context_of
from kapiserver.machinery import errors


class OpenAPIEndpoint(resource.Resource):
    isLeaf = True

    def __init__(self, service: Callable[[], Any]) -> None:
        super().__init__()
        self.service = service  # returns the current kapiserver.endpoints.openapi.OpenAPIService

    def render_GET(self, request: server.Request):
        parts = context_of(request).require_info().parts[1:]  # after "openapi"
        try:
            service = self.service()
            if parts == ["v2"]:
                body, etag = service.v2_bytes(), None
            elif parts == ["v3"]:
                body, etag = service.v3_index_bytes(), None
            elif len(parts) > 1 and parts[0] == "v3":
                found = service.v3_bytes("/".join(parts[1:]))
                if found is None:
                    raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
                body, etag = found
            else:
                raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        except Exception as e:
            respond.write_failure(request, e)
            return server.NOT_DONE_YET
        if etag:
            quoted = f'"{etag}"'.encode()
            request.setHeader(b"etag", quoted)
            if request.getHeader(b"if-none-match") == quoted:
                request.setResponseCode(304)
                return b""
            if (request.args or {}).get(b"hash"):
                request.setHeader(b"cache-control", b"public, immutable")
            else:
                request.setHeader(b"cache-control", b"no-cache, private")
        request.setHeader(b"content-type", b"application/json")
        return body

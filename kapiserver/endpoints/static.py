"""Leaves that answer from a function: discovery, version, OpenAPI documents, errors."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from twisted.web import resource, server

from kapiserver.endpoints import respond
from kapiserver.endpoints.negotiation import negotiate
from kapiserver.machinery import errors


class DocumentEndpoint(resource.Resource):
    """GET-only leaf: ``produce(request, target)`` returns the object to encode.

    ``shapes`` are the ``as=`` forms it can produce (aggregated discovery);
    ``produce`` sees the negotiated target to pick one.
    """

    isLeaf = True

    def __init__(self, produce: Callable[[server.Request, Any], Any], shapes: Iterable[tuple] = ()) -> None:
        super().__init__()
        self.produce = produce
        self.shapes = tuple(shapes)

    def render(self, request: server.Request):
        target = None
        try:
            if request.method not in (b"GET", b"HEAD"):
                raise errors.StatusError(405, "MethodNotAllowed", "the server does not allow this method on the "
                                         "requested resource")
            accept = request.getHeader(b"accept")
            target = negotiate(accept.decode("latin-1") if accept else None, self.shapes)
            obj = self.produce(request, target)
            respond.write_object(request, target, 200, obj)
        except Exception as e:
            respond.write_failure(request, e, target)
        return server.NOT_DONE_YET


class StatusEndpoint(resource.Resource):
    """Answers every request with one Status error (the end of the delegation chain)."""

    isLeaf = True

    def __init__(self, error: errors.StatusError) -> None:
        super().__init__()
        self.error = error

    def render(self, request: server.Request):
        respond.write_status(request, self.error)
        return server.NOT_DONE_YET


def not_found() -> StatusEndpoint:
    return StatusEndpoint(errors.resource_not_found())

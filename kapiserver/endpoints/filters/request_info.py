"""Request info: what the request is about, parsed once for every later filter and link.

Upstream's ``WithRequestInfo``.  A body over the size limit (declared, or
exceeded while it arrived; the connection stopped reading it) is answered 413
here, before anyone looks at it.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery import errors
from kapiserver.request.info import parse_request_info


class WithRequestInfo(Filter):
    def __init__(self, wrapped, max_body_bytes: int) -> None:
        super().__init__(wrapped)
        self.max_body_bytes = max_body_bytes

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        path = request.path.split(b"?", 1)[0].decode("utf-8", "replace")
        ctx.info = parse_request_info(request.method.decode("latin-1"), path, request.args or {})
        if ctx.body_too_large:
            # upstream's limitedReadBody: NewRequestEntityTooLargeError("limit is N")
            raise errors.too_large(f"Request entity too large: limit is {self.max_body_bytes}")
        return None

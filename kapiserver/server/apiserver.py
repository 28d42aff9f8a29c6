"""The API server: the resource tree, request filters, bootstrap and controllers.

STUB: the lead is replacing this with the real delegation tree; the
interface (constructor, ``site``, ``start``, ``stop``, ``inflight``) is stable.
"""
from __future__ import annotations

from twisted.web import resource, server


class _NotFound(resource.Resource):
    isLeaf = True

    def render(self, request):
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"application/json")
        return (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"the server could not find the requested resource","reason":"NotFound","code":404}')


class APIServer:
    def __init__(self, config, storage, ca_cert_pem: bytes, health, reactor=None) -> None:
        self.config = config
        self.storage = storage
        self.health = health
        self.site = server.Site(_NotFound())

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def inflight(self) -> int:
        return 0

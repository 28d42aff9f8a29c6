"""Requests for a group version served by an extension API server, forwarded to it.

As upstream's proxy handler: the request has already been authenticated and
authorized here; it goes to a ready endpoint of the APIService's Service over
TLS (``transport.py``), carrying the user in ``X-Remote-User``,
``X-Remote-Group`` and ``X-Remote-Extra-*`` (any such header the client sent
is dropped, as are ``Authorization`` and ``Impersonate-*``).  The extension
server authorizes again (a SubjectAccessReview back to this server).

The response streams through: status, headers, then the body as it arrives
(a watch stays open for as long as both sides keep it), with flow control
both ways: when the client stops reading, the extension server's connection
is paused; when the client goes away, it is closed.  An APIService that is
not Available answers 503 ``service unavailable``, as upstream (kubectl says
"the server is currently unable to handle the request").  Upgrade requests
(exec/attach/port-forward over SPDY or WebSockets) take the client's connection
out of HTTP and are passed through to the extension server byte for byte once
it answers ``101``, as upstream's UpgradeAwareHandler does.
"""
from __future__ import annotations

import io
from typing import Any, Callable
from urllib.parse import quote

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTCP
from twisted.logger import Logger
from twisted.python import failure
from twisted.web import resource, server
from twisted.web.http_headers import Headers

from kapiserver.aggregator.apiservice_registration import APIServiceRegistration, ProxyTarget
from kapiserver.aggregator.service_resolver import ResolveError, ServiceResolver
from kapiserver.aggregator.transport import CONNECT_TIMEOUT_SECONDS, ExtensionTransport, connection_creator
from kapiserver.machinery.user import UserInfo
from kapiserver.endpoints import respond
from kapiserver.endpoints.request_context import client_gone, context_of, writable
from kapiserver.endpoints.streaming.interfaces import IHijackableChannel
from kapiserver.machinery import errors

log = Logger()

# hop-by-hop headers (RFC 9110) are the connection's own, never forwarded
HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authenticate", b"proxy-authorization",
              b"te", b"trailer", b"transfer-encoding", b"upgrade"}
REMOTE_USER = b"X-Remote-User"
REMOTE_GROUP = b"X-Remote-Group"
REMOTE_EXTRA_PREFIX = b"X-Remote-Extra-"
_DROPPED_PREFIXES = (b"x-remote-", b"impersonate-")


def auth_proxy_headers(headers: Headers, user: UserInfo) -> None:
    """Upstream's SetAuthProxyHeaders: the user, its groups and extras (keys percent-encoded)."""
    headers.setRawHeaders(REMOTE_USER, [user.name.encode()])
    if user.groups:
        headers.setRawHeaders(REMOTE_GROUP, [g.encode() for g in user.groups])
    for key, values in user.extra.items():
        headers.setRawHeaders(REMOTE_EXTRA_PREFIX + quote(key, safe="").encode(), [v.encode() for v in values])


def forwarded_headers(incoming: Headers, user: UserInfo) -> Headers:
    out = Headers()
    for name, values in incoming.getAllRawHeaders():
        lowered = name.lower()
        if lowered in HOP_BY_HOP or lowered in (b"host", b"content-length", b"authorization") \
                or lowered.startswith(_DROPPED_PREFIXES):
            continue
        out.setRawHeaders(name, values)
    auth_proxy_headers(out, user)
    return out


def is_upgrade(request: server.Request) -> bool:
    connection = b",".join(request.requestHeaders.getRawHeaders(b"connection") or ()).lower()
    return b"upgrade" in connection and bool(request.getHeader(b"upgrade"))


def endpoint_url(host: str, port: int, path: bytes) -> bytes:
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return b"https://" + netloc.encode() + path


class ProxyResource(resource.Resource):
    """The leaf answering every request of the group versions served by extension servers."""

    isLeaf = True

    def __init__(self, registration: APIServiceRegistration, resolver: ServiceResolver,
                 transport: ExtensionTransport, on_unreachable: Callable[[str], None]) -> None:
        super().__init__()
        self.registration = registration
        self.resolver = resolver
        self.transport = transport
        self.on_unreachable = on_unreachable  # an APIService whose server could not be reached: check it now

    def render(self, request: server.Request) -> Any:
        info = context_of(request).require_info()
        target = self.registration.target(info.group, info.version)
        if target is None:  # removed since routing (a race): nothing serves it any more
            respond.write_status(request, errors.resource_not_found())
            return server.NOT_DONE_YET
        if not target.available:
            return self._unavailable(request)
        try:
            host, port = self.resolver.resolve(target.namespace, target.service, target.port)
        except ResolveError as e:
            log.info("error resolving {ns}/{name}: {err}", ns=target.namespace, name=target.service, err=e.message)
            return self._unavailable(request)
        if is_upgrade(request) and IHijackableChannel.providedBy(request.channel):
            self._upgrade(request, target, host, port)
            return server.NOT_DONE_YET
        d = defer.Deferred.fromCoroutine(self._forward(request, target, host, port))
        d.addErrback(lambda f: self._failed(request, target, f))
        return server.NOT_DONE_YET

    @staticmethod
    def _unavailable(request: server.Request) -> bytes:
        """Upstream's proxyError: a plain-text 503."""
        request.setResponseCode(503)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"x-content-type-options", b"nosniff")
        return b"service unavailable\n"

    def _failed(self, request: server.Request, target: ProxyTarget, f: failure.Failure) -> None:
        log.info("proxying to {name} failed: {err}", name=target.name, err=f.getErrorMessage())
        self.on_unreachable(target.name)
        if not writable(request):
            return
        if request.startedWriting:
            request.finish()
            return
        request.setResponseCode(503)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.write(f"Error trying to reach service: {f.getErrorMessage()}\n".encode())
        request.finish()

    def _upgrade(self, request: server.Request, target: ProxyTarget, host: str, port: int) -> None:
        """An upgrade, relayed: the user's headers as for any request, the client's Connection and Upgrade."""
        user = context_of(request).user
        if user is None:
            raise errors.internal_error("missing user")
        headers = forwarded_headers(request.requestHeaders, user)
        for name in (b"Connection", b"Upgrade"):
            headers.setRawHeaders(name, request.requestHeaders.getRawHeaders(name) or [])
        # the streaming package's relays load with the first request proxied, not with every start
        # (most servers have no extension API server): endpoints/streaming/on_first_use.py says why
        from kapiserver.endpoints.streaming import splice
        from kapiserver.endpoints.streaming.dialer import HTTPUpgradeDialer
        creator = connection_creator(target.tls, self.transport.client)
        dialer = HTTPUpgradeDialer(IReactorTCP(self.transport.reactor), host, port, creator, CONNECT_TIMEOUT_SECONDS)
        sent = [(name, value) for name, values in headers.getAllRawHeaders() for value in values]
        client = IHijackableChannel(request.channel).hijack(request)
        relayed = splice.serve_upgrade(client, dialer, request.uri, sent, method=request.method)
        relayed.addErrback(lambda f: log.failure("upgrade to {name}", f, name=target.name))

    async def _forward(self, request: server.Request, target: ProxyTarget, host: str, port: int) -> None:
        # as in _upgrade; twisted.web.client with the transport's first agent (aggregator/transport.py)
        from twisted.web.client import FileBodyProducer
        from kapiserver.endpoints.streaming.relay import BodyRelay, while_client_waits
        user = context_of(request).user
        if user is None:
            raise errors.internal_error("missing user")
        agent = self.transport.agent(target.tls)
        body = request.content.read() if request.content is not None else b""
        producer = FileBodyProducer(io.BytesIO(body)) if body or request.method in (b"POST", b"PUT", b"PATCH") \
            else None
        headers = forwarded_headers(request.requestHeaders, user)
        pending = agent.request(request.method, endpoint_url(host, port, request.uri), headers, producer)
        response = await while_client_waits(request, pending)
        if response is None:
            return
        request.setResponseCode(response.code, response.phrase)
        for name, values in response.headers.getAllRawHeaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != b"content-length":
                request.responseHeaders.setRawHeaders(name, values)
        request.write(b"")  # the status and headers go out now: a watch may stay quiet for a long time
        done: defer.Deferred = defer.Deferred()
        response.deliverBody(BodyRelay(request, done))
        await done
        if not client_gone(request):
            request.finish()

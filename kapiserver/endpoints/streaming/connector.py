"""Serving a connect subresource's :class:`Location`: logs, exec, attach, port-forward and proxies.

Upstream answers these with three handlers, all here:

* ``LocationStreamer`` (``pods/log``): ``GET`` the kubelet's URL; a failed
  answer becomes a Status (``GenericHttpResponseChecker``), a good one is
  streamed to the client as it comes, under backpressure;
* ``UpgradeAwareHandler`` with ``upgradeRequired`` (``exec``, ``attach``,
  ``portforward``): the client's SPDY or WebSocket upgrade is sent on to the
  kubelet, its ``101`` head passed back, and then both connections are
  spliced byte for byte; a ``v5.channel.k8s.io`` WebSocket is served by the
  stream translator (SPDY towards the kubelet), a port-forward WebSocket by
  the tunnelling handler;
* ``UpgradeAwareHandler`` as a reverse proxy (``pods/proxy``,
  ``services/proxy``, ``nodes/proxy``): any method, the answer streamed back;
  upgrades (WebSockets to a pod) are spliced as above.

Credentials never travel on: ``Authorization`` and ``Impersonate-*`` are
dropped, as upstream's authentication and impersonation filters remove them.
"""
from __future__ import annotations

from typing import Any, Callable, Optional
from urllib.parse import quote, urlencode

from twisted.internet import defer, protocol
from twisted.internet.interfaces import (IHostnameResolver, IOpenSSLClientConnectionCreator, IPushProducer,
                                         IReactorPluggableNameResolver, IReactorTCP, IReactorTime)
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web.client import Agent, FileBodyProducer, HTTPConnectionPool, _HTTP11ClientFactory
from twisted.web.http_headers import Headers

from kapiserver.endpoints.streaming import kubelet as kubelet_client
from kapiserver.endpoints.streaming import splice, translator, tunnel, websocket_reader
from kapiserver.endpoints.streaming.dialer import HTTPUpgradeDialer, dial_error_text
from kapiserver.endpoints.streaming.interfaces import IHijackableChannel
from kapiserver.endpoints.streaming.relay import relay_body, while_client_waits
from kapiserver.machinery import errors
from kapiserver.registry.subresources import Backend, Location, StreamMode

log = Logger()

HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authenticate", b"proxy-authorization",
              b"te", b"trailer", b"transfer-encoding", b"upgrade"}
_DROPPED = (b"authorization", b"host", b"content-length")
_DROPPED_PREFIXES = (b"impersonate-",)
# what of a kubelet's refusal becomes the Status message (upstream's maxReadLength)
MAX_ERROR_BODY = 50000
WEBSOCKET_PROTOCOL_HEADER = b"sec-websocket-protocol"
STREAM_CLOSE_PROTOCOL = b"v5.channel.k8s.io"
PORT_FORWARD_TUNNEL_PROTOCOL = b"SPDY/3.1+portforward.k8s.io"

StoreGetter = Callable[[str, str, str], Any]


def is_upgrade(request: server.Request) -> bool:
    """httpstream.IsUpgradeRequest: a Connection header naming upgrade (and an Upgrade header)."""
    connection = b",".join(request.requestHeaders.getRawHeaders(b"connection") or ()).lower()
    return any(token.strip() == b"upgrade" for token in connection.split(b",")) and \
        bool(request.getHeader(b"upgrade"))


def is_websocket(request: server.Request) -> bool:
    return (request.getHeader(b"upgrade") or b"").lower() == b"websocket"


def websocket_protocols(request: server.Request) -> list[bytes]:
    values = request.requestHeaders.getRawHeaders(WEBSOCKET_PROTOCOL_HEADER) or []
    return [p.strip() for value in values for p in value.split(b",") if p.strip()]


def forwarded_headers(request: server.Request, keep_upgrade: bool) -> list[tuple[bytes, bytes]]:
    """The client's headers as sent on: hop-by-hop ones (but the upgrade's own) and credentials dropped."""
    out: list[tuple[bytes, bytes]] = []
    for name, values in request.requestHeaders.getAllRawHeaders():
        lowered = name.lower()
        if lowered in _DROPPED or lowered.startswith(_DROPPED_PREFIXES):
            continue
        if lowered in HOP_BY_HOP and not (keep_upgrade and lowered in (b"connection", b"upgrade")):
            continue
        out.extend((name, value) for value in values)
    return out


def with_forwarded_for(request: server.Request, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with the client's address appended to ``X-Forwarded-For`` (upstream's
    AppendForwardedForHeader: prior values folded into one, comma-separated)."""
    client_ip = getattr(request.getClientAddress(), "host", "")
    if not client_ip:
        return headers
    prior = b", ".join(request.requestHeaders.getRawHeaders(b"x-forwarded-for") or [])
    value = (prior + b", " if prior else b"") + client_ip.encode()
    return [(name, v) for name, v in headers if name.lower() != b"x-forwarded-for"] + [(b"X-Forwarded-For", value)]


def location_path(location: Location) -> bytes:
    path = quote(location.path, safe="/:@!$&'()*+,;=-._~%")
    if location.query:
        path += "?" + urlencode(location.query)
    return path.encode()


class Target:
    """A resolved location: the address to dial and how (TLS creator, or plain TCP)."""

    def __init__(self, host: str, port: int, tls: Optional[IOpenSSLClientConnectionCreator]) -> None:
        self.host = host
        self.port = port
        self.tls = tls

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def url(self, path: bytes) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}".encode() + path

    def describe(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class StreamConnector:
    """Connects the streams of connect subresources to kubelets, pods and endpoints."""

    def __init__(self, reactor: Any, kubelet: kubelet_client.KubeletClientConfig) -> None:
        self.reactor: IReactorTCP = reactor
        self.clock: IReactorTime = reactor
        self.resolver: IHostnameResolver = IReactorPluggableNameResolver(reactor).nameResolver
        self.kubelet = kubelet
        self._pool = HTTPConnectionPool(reactor, persistent=False)
        self._pool._factory = _QuietClientFactory  # not a log line per connection

    # ------------------------------------------------------------ where

    async def resolve(self, location: Location, stores: StoreGetter) -> Target:
        if location.backend is Backend.DIRECT:
            https = location.scheme == "https"
            port = location.port or (443 if https else 80)
            return Target(location.host, port, kubelet_client.proxy_tls() if https else None)
        node = await stores("", "v1", "nodes").get("", location.node)
        endpoint = kubelet_client.kubelet_endpoint(node, self.kubelet)
        if location.mode is StreamMode.PROXY:
            problem = await kubelet_client.proxyable_host_problem(self.resolver, endpoint.host)
            if problem is not None:
                raise errors.bad_request(problem)
        if location.port and location.port != endpoint.port:  # another port of the node: the proxy transport
            https = location.scheme == "https"
            return Target(endpoint.host, location.port, kubelet_client.proxy_tls() if https else None)
        return Target(endpoint.host, endpoint.port, kubelet_client.kubelet_tls(self.kubelet, endpoint.host))

    # ------------------------------------------------------------ serving

    async def serve(self, request: server.Request, location: Location, stores: StoreGetter) -> None:
        if location.mode is StreamMode.UPGRADE and not is_upgrade(request):
            raise errors.bad_request("Upgrade request required")
        target = await self.resolve(location, stores)
        path = location_path(location)
        if location.mode is StreamMode.STREAM:
            await self._stream(request, location, target, path)
        elif is_upgrade(request):
            await self._upgrade(request, location, target, path)
        else:
            await self._proxy(request, location, target, path)

    def _agent(self, target: Target) -> Agent:
        policy = kubelet_client.FixedTLSPolicy(target.tls) if target.tls is not None else None
        if policy is None:
            return Agent(self.reactor, connectTimeout=self.kubelet.timeout_seconds, pool=self._pool)
        return Agent(self.reactor, contextFactory=policy, connectTimeout=self.kubelet.timeout_seconds,
                     pool=self._pool)

    async def _request(self, request: server.Request, target: Target, method: bytes, path: bytes,
                       headers: Headers, body: Optional[FileBodyProducer]) -> Any:
        """Start a backend request; cancelled when the client goes away.  Returns the response,
        or None when the client is gone."""
        pending = self._agent(target).request(method, target.url(path), headers, body)
        try:
            return await while_client_waits(request, pending)
        except defer.CancelledError:
            raise
        except Exception as e:
            raise errors.unexpected_error(_dial_error(method, target, path, e)) from None

    async def _stream(self, request: server.Request, location: Location, target: Target, path: bytes) -> None:
        """upstream's LocationStreamer with GenericHttpResponseChecker (pods/log)."""
        response = await self._request(request, target, b"GET", path, Headers(), None)
        if response is None:
            return
        if not 200 <= response.code <= 206:
            body = await _read_bounded(response, MAX_ERROR_BODY)
            text = body.decode("utf-8", "replace")
            if response.code == 500:
                raise errors.internal_error(text)
            if response.code == 400:
                raise errors.bad_request(text)
            raise errors.generic_server_response(response.code, "", location.resource, "", location.name, text)
        if is_websocket(request) and IHijackableChannel.providedBy(request.channel):
            # upstream's StreamObject: a WebSocket client gets the body as messages (wsstream.Reader)
            headers = [(name, value) for name, values in request.requestHeaders.getAllRawHeaders() for value in values]
            client = IHijackableChannel(request.channel).hijack(request)
            await websocket_reader.serve_websocket_body(client, request.method, headers, response,
                                                        f"{location.resource} {location.name}")
            return
        request.setResponseCode(200)
        request.setHeader(b"content-type", b"text/plain")
        request.setHeader(b"cache-control", b"no-cache, private")
        request.write(b"")  # the head goes out now: a followed log may be quiet for long
        await relay_body(response, request)

    async def _proxy(self, request: server.Request, location: Location, target: Target, path: bytes) -> None:
        """A reverse proxy: the client's method, headers and body; the backend's answer streamed back."""
        headers = Headers()
        for name, value in with_forwarded_for(request, forwarded_headers(request, keep_upgrade=False)):
            headers.addRawHeader(name, value)
        content = request.content.read() if request.content is not None else b""
        body = FileBodyProducer(_bytes_io(content), cooperator=None) if content or \
            request.method in (b"POST", b"PUT", b"PATCH") else None
        response = await self._request(request, target, request.method, path, headers, body)
        if response is None:
            return
        request.setResponseCode(response.code, response.phrase)
        for name, values in response.headers.getAllRawHeaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != b"content-length":
                request.responseHeaders.setRawHeaders(name, values)
        request.write(b"")
        await relay_body(response, request)

    async def _upgrade(self, request: server.Request, location: Location, target: Target, path: bytes) -> None:
        """Hijack the client's connection and relay it: translated (v5 exec/attach WebSockets),
        tunnelled (port-forward WebSockets) or passed through byte for byte (SPDY, other WebSockets)."""
        channel = request.channel
        if not IHijackableChannel.providedBy(channel):
            raise errors.bad_request("upgrade requests need HTTP/1.1")
        dialer = HTTPUpgradeDialer(self.reactor, target.host, target.port, target.tls, self.kubelet.timeout_seconds)
        protocols = websocket_protocols(request) if is_websocket(request) else []
        request_headers = list(request.requestHeaders.getAllRawHeaders())
        headers = [(name, value) for name, values in request_headers for value in values]
        audit_id = [(b"Audit-Id", value) for value in request.responseHeaders.getRawHeaders(b"audit-id") or []]
        client = channel.hijack(request)
        if location.mode is StreamMode.UPGRADE and STREAM_CLOSE_PROTOCOL in protocols and \
                location.resource in ("pods/exec", "pods/attach"):
            flags = {name for name, _ in location.query}  # the kubelet's names of the streams
            options = translator.StreamOptions(stdin="input" in flags, stdout="output" in flags,
                                               stderr="error" in flags, tty="tty" in flags)
            await translator.serve_translated(client, headers, options, dialer, path,
                                              forwarded_headers(request, keep_upgrade=False),
                                              method=request.method, clock=self.clock)
        elif location.mode is StreamMode.UPGRADE and PORT_FORWARD_TUNNEL_PROTOCOL in protocols and \
                location.resource == "pods/portforward":
            await tunnel.serve_tunnel(client, headers, dialer, path,
                                      with_forwarded_for(request, forwarded_headers(request, keep_upgrade=False)),
                                      method=request.method, response_headers=audit_id, clock=self.clock)
        else:
            await splice.serve_upgrade(client, dialer, path,
                                       with_forwarded_for(request, forwarded_headers(request, keep_upgrade=True)),
                                       method=request.method, response_headers=audit_id, clock=self.clock)


class _QuietClientFactory(_HTTP11ClientFactory):
    noisy = False


def _bytes_io(content: bytes) -> Any:
    import io
    return io.BytesIO(content)


def _describe(e: BaseException) -> str:
    reasons = getattr(e, "reasons", None)  # twisted's ResponseNeverReceived and the like
    if reasons:
        return "; ".join(r.getErrorMessage() for r in reasons)
    return str(e) or type(e).__name__


def _dial_error(method: bytes, target: Target, path: bytes, e: BaseException) -> str:
    """Go's *url.Error text: ``Get "https://10.200.0.2:10250/...": <cause>``, the cause of a failed
    connect as Go's net package words it (``dial tcp 10.200.0.2:10250: connect: connection refused``)."""
    verb = method.decode().capitalize()
    cause = dial_error_text(target.host, target.port, e) or _describe(e)
    return f'{verb} "{target.url(path).decode("latin-1")}": {cause}'


async def _read_bounded(response: Any, limit: int) -> bytes:
    done: defer.Deferred[bytes] = defer.Deferred()
    response.deliverBody(_BoundedReader(limit, done))
    return await done


class _BoundedReader(protocol.Protocol):
    transport: Optional[IPushProducer]  # type: ignore[assignment]  # what Response.deliverBody gives
    def __init__(self, limit: int, done: "defer.Deferred[bytes]") -> None:
        self.limit = limit
        self.done = done
        self.parts: list[bytes] = []
        self.size = 0

    def dataReceived(self, data: bytes) -> None:
        if self.size < self.limit:
            self.parts.append(data[:self.limit - self.size])
            self.size += len(self.parts[-1])
            if self.size >= self.limit and self.transport is not None:
                self.transport.stopProducing()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if not self.done.called:
            self.done.callback(b"".join(self.parts))

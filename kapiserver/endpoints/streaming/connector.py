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
  upgrades (WebSockets to a pod) are spliced as above.  Its ``WrapTransport``
  (``defaultProxyTransport``) is applied too: ``X-Forwarded-Uri`` on the
  request; links in ``Location`` and in HTML answers rewritten to go through
  the proxy again (``proxy_rewrite``); ``Access-Control-Allow-*`` dropped; a
  backend that cannot be reached is a 503 ``error trying to reach service``.
  A ``GET`` of ``.../proxy`` itself is redirected to ``.../proxy/``.

Credentials never travel on: ``Authorization`` and ``Impersonate-*`` are
dropped, as upstream's authentication and impersonation filters remove them.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Callable, Optional
from urllib.parse import quote, unquote_to_bytes, urlencode

from twisted.internet import defer, protocol, threads
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.endpoints import wrapClientTLS
from twisted.internet.interfaces import (IReactorTime, IHostnameResolver, IOpenSSLClientConnectionCreator, IPushProducer,
                                         IReactorPluggableNameResolver, IReactorTCP, IReactorThreads, IReactorTime,
                                         IStreamClientEndpoint)
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web._newclient import RequestTransmissionFailed, ResponseFailed, ResponseNeverReceived
from twisted.web.client import URI, Agent, FileBodyProducer, HTTPConnectionPool, ResponseDone, _HTTP11ClientFactory
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory, IResponse
from zope.interface import implementer

from kapiserver.endpoints.streaming import kubelet as kubelet_client
from kapiserver.endpoints.streaming import proxy_rewrite, splice, translator, tunnel, websocket_reader
from kapiserver.endpoints.streaming.dialer import HTTPUpgradeDialer, dial_error_text, tcp_dial
from kapiserver.endpoints.streaming.interfaces import Dial, IHijackableChannel, StoreGetter
from kapiserver.endpoints.request_context import writable
from kapiserver.endpoints.streaming.relay import BodyRelay, relay_body, while_client_waits
from kapiserver.machinery import errors, go_url
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
# an HTML answer is read whole to rewrite its links; a larger one is passed on as it is (with a
# log line).  Upstream reads any size into memory; this bounds what one request can hold.
MAX_REWRITTEN_HTML = 16 * 1024 * 1024
# larger pages are rewritten in the reactor's thread pool: tokenizing takes a few seconds per
# ten megabytes of dense markup, which the reactor thread cannot spare
INLINE_REWRITE_BYTES = 64 * 1024


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
    address = request.getClientAddress()
    client_ip = address.host if isinstance(address, (IPv4Address, IPv6Address)) else ""
    if not client_ip:
        return headers
    prior = b", ".join(request.requestHeaders.getRawHeaders(b"x-forwarded-for") or [])
    value = (prior + b", " if prior else b"") + client_ip.encode()
    return [(name, v) for name, v in headers if name.lower() != b"x-forwarded-for"] + [(b"X-Forwarded-For", value)]


def location_path(location: Location) -> bytes:
    """The path and query requested of the backend (``/`` for an empty path, as Go's
    ``URL.RequestURI``)."""
    path = quote(location.path or "/", safe="/:@!$&'()*+,;=-._~%")
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

    def __init__(self, reactor: IReactorTime, kubelet: kubelet_client.KubeletClientConfig, dial: Optional[Dial] = None) -> None:
        # the server's reactor, which connects and runs threads too
        self.clock = reactor
        self.reactor = IReactorTCP(reactor)
        self.threads = IReactorThreads(reactor)  # rewriting a large page
        # how backends are connected to (upstream's egress dialer): TCP unless told otherwise
        self.dial: Dial = dial if dial is not None else tcp_dial(self.reactor)
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
        endpoints = _TargetEndpoints(self.dial, target, self.kubelet.timeout_seconds)
        return Agent.usingEndpointFactory(self.reactor, endpoints, pool=self._pool)

    async def _request(self, request: server.Request, target: Target, method: bytes, path: bytes,
                       headers: Headers, body: Optional[FileBodyProducer],
                       failed: Callable[[BaseException], errors.StatusError]) -> Any:
        """Start a backend request; cancelled when the client goes away.  Returns the response,
        or None when the client is gone; a failed request raises what ``failed`` makes of it."""
        pending = self._agent(target).request(method, target.url(path), headers, body)
        try:
            return await while_client_waits(request, pending)
        except defer.CancelledError:
            raise
        except Exception as e:
            raise failed(e) from None

    async def _stream(self, request: server.Request, location: Location, target: Target, path: bytes) -> None:
        """upstream's LocationStreamer with GenericHttpResponseChecker (pods/log)."""
        response = await self._request(
            request, target, b"GET", path, Headers(), None,
            failed=lambda e: errors.unexpected_error(_dial_error(b"GET", target, path, e)))
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
        """A reverse proxy through upstream's default proxy transport: the client's method,
        headers and body with ``X-Forwarded-*``; the backend's answer without CORS headers,
        its ``Location`` and HTML links rewritten, streamed back."""
        if not location.path and request.method in (b"GET", b"HEAD"):
            _redirect_to_root(request)
            return
        rewriting = _rewriting(request, location, target, path)
        headers = Headers()
        for name, value in rewriting.request_headers(
                with_forwarded_for(request, forwarded_headers(request, keep_upgrade=False))):
            headers.addRawHeader(name, value)
        content = request.content.read() if request.content is not None else b""
        body = FileBodyProducer(io.BytesIO(content)) if content or request.method in (b"POST", b"PUT", b"PATCH") \
            else None
        response = await self._request(request, target, request.method, path, headers, body,
                                       failed=lambda e: _unreachable(target, e))
        if response is None:
            return
        for name in proxy_rewrite.CORS_HEADERS:
            response.headers.removeHeader(name)
        redirect = _first(response.headers, b"location")
        if redirect:
            try:
                rewritten = rewriting.links.rewrite_text(redirect)
            except go_url.URLError as e:
                response.deliverBody(_Discard())
                raise errors.internal_error(f"error trying to parse Location header: {e}") from None
            response.headers.setRawHeaders(b"location", [rewritten])
        elif proxy_rewrite.content_type_is_html(_first(response.headers, b"content-type")):
            coding = _first(response.headers, b"content-encoding") or b""
            if proxy_rewrite.rewrites_coding(coding):
                await self._relay_html(request, response, coding, rewriting.links)
                return
            log.error("Proxy encountered encoding {coding} for text/html; can't understand this so not fixing "
                      "links.", coding=coding.decode("latin-1"))
        _write_head(request, response)
        request.write(b"")
        await relay_body(response, request)

    async def _relay_html(self, request: server.Request, response: IResponse, coding: bytes,
                          links: proxy_rewrite.LinkRewriter) -> None:
        """Transport.rewriteResponse: the page read whole, its links rewritten, sent without its
        ``Content-Length``.  Past :data:`MAX_REWRITTEN_HTML` the page is relayed as it is."""
        page = _BoundedPage(MAX_REWRITTEN_HTML)
        response.deliverBody(page)
        request.notifyFinish().addErrback(lambda _: page.stop())
        whole = await page.whole
        if not writable(request):
            page.stop()
            return
        if not whole:
            log.info("{path}: the text/html answer is over {limit} bytes, passed on without rewriting its links",
                     path=request.path.decode("utf-8", "replace"), limit=MAX_REWRITTEN_HTML)
            _write_head(request, response)
            request.write(page.take())
            done: defer.Deferred[None] = defer.Deferred()
            page.relay_to(BodyRelay(request, done))
            await done
            if writable(request):
                request.finish()
            return
        if page.broken is not None:  # Go's body reader fails as the tokenizer reads it
            log.error("Failed to rewrite URLs: {err}", err=page.broken.getErrorMessage())
            raise errors.unexpected_error("unexpected EOF")
        body = page.take()
        try:
            if len(body) <= INLINE_REWRITE_BYTES:
                rewritten = proxy_rewrite.rewrite_body(body, coding, links.rewrite)
            else:
                rewritten = await threads.deferToThreadPool(self.threads, self.threads.getThreadPool(),
                                                            proxy_rewrite.rewrite_body, body, coding, links.rewrite)
        except proxy_rewrite.RewriteError as e:
            log.error("Failed to rewrite URLs: {err}", err=str(e))
            raise errors.unexpected_error(str(e)) from None
        if not writable(request):
            return
        _write_head(request, response)
        request.write(rewritten)
        request.finish()

    async def _upgrade(self, request: server.Request, location: Location, target: Target, path: bytes) -> None:
        """Hijack the client's connection and relay it: translated (v5 exec/attach WebSockets),
        tunnelled (port-forward WebSockets) or passed through byte for byte (SPDY, other WebSockets)."""
        channel = request.channel
        if not IHijackableChannel.providedBy(channel):
            raise errors.bad_request("upgrade requests need HTTP/1.1")
        dialer = HTTPUpgradeDialer(self.reactor, target.host, target.port, target.tls, self.kubelet.timeout_seconds,
                                   dial=self.dial)
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


@implementer(IAgentEndpointFactory)
class _TargetEndpoints:
    """An Agent's connections to one target: dialed with the connector's :class:`Dial`, in TLS
    when the target speaks it."""

    def __init__(self, dial: Dial, target: Target, timeout: float) -> None:
        self.dial = dial
        self.target = target
        self.timeout = timeout

    def endpointForURI(self, uri: URI) -> IStreamClientEndpoint:
        endpoint = self.dial(self.target.host, self.target.port, self.timeout)
        return wrapClientTLS(self.target.tls, endpoint) if self.target.tls is not None else endpoint


@dataclass(frozen=True)
class _Rewriting:
    """What upstream's defaultProxyTransport knows of one proxied request."""

    links: proxy_rewrite.LinkRewriter
    forwarded_uri: bytes

    def request_headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """Transport.RoundTrip's headers: ``X-Forwarded-Uri`` set, ``X-Forwarded-Host`` and
        ``X-Forwarded-Proto`` set when the request URL named them (a client's own are kept
        otherwise)."""
        added = [(b"X-Forwarded-Uri", self.forwarded_uri)]
        if self.links.host:
            added.append((b"X-Forwarded-Host", self.links.host))
        if self.links.scheme:
            added.append((b"X-Forwarded-Proto", self.links.scheme))
        replaced = {name.lower() for name, _ in added}
        return [(name, value) for name, value in headers if name.lower() not in replaced] + added


def _rewriting(request: server.Request, location: Location, target: Target, path: bytes) -> _Rewriting:
    """defaultProxyTransport for this request: the prefix is the (decoded) request path without
    the location's path; scheme and host are the request URL's (Go's server leaves them empty
    unless the request line is in absolute form); the backend's host is its URL's."""
    try:
        request_url = go_url.URL.parse(request.uri, via_request=True)
        scheme, host = request_url.scheme, request_url.host
    except go_url.URLError:
        scheme, host = b"", b""
    prefix = proxy_rewrite.path_prepend(unquote_to_bytes(request.path), unquote_to_bytes(location.path.encode()))
    backend_path = path.partition(b"?")[0]
    forwarded = proxy_rewrite.forwarded_uri(prefix, unquote_to_bytes(backend_path), backend_path)
    if location.backend is Backend.DIRECT and not location.port:
        source_host = target.host.encode()  # a pod's URL without a port names its IP alone
    else:
        source_host = target.describe().encode()
    links = proxy_rewrite.LinkRewriter(scheme, host, prefix, source_host, request.getHeader(b"host") or b"")
    return _Rewriting(links, forwarded)


def _redirect_to_root(request: server.Request) -> None:
    """proxyRedirectsforRootPath: a GET or HEAD of the proxy itself (no path after ``proxy``)
    is sent to the same path with a slash (the decoded path, the query as it came)."""
    query = request.uri.partition(b"?")[2]
    request.setResponseCode(301)
    request.setHeader(b"location", unquote_to_bytes(request.path) + b"/" + (b"?" + query if query else b""))
    request.setHeader(b"content-length", b"0")
    request.finish()


def _unreachable(target: Target, e: BaseException) -> errors.StatusError:
    """Transport.RoundTrip: a failed round trip is ``NewServiceUnavailable`` with the
    transport's error (a failed dial in Go's words)."""
    cause = dial_error_text(target.host, target.port, e) or _describe(e)
    return errors.service_unavailable(f"error trying to reach service: {cause}")


def _first(headers: Headers, name: bytes) -> Optional[bytes]:
    """``http.Header.Get``: the first value."""
    values = headers.getRawHeaders(name)
    return values[0] if values else None


def _write_head(request: server.Request, response: IResponse) -> None:
    """The backend's status and headers, without hop-by-hop ones and ``Content-Length`` (the
    body goes out chunked, or rewritten)."""
    request.setResponseCode(response.code, response.phrase)
    for name, values in response.headers.getAllRawHeaders():
        if name.lower() not in HOP_BY_HOP and name.lower() != b"content-length":
            request.responseHeaders.setRawHeaders(name, values)


class _Discard(protocol.Protocol):
    """A backend body nobody reads: its connection closed at once."""

    transport: Optional[IPushProducer]  # type: ignore[assignment]  # what Response.deliverBody gives

    def connectionMade(self) -> None:
        if self.transport is not None:
            self.transport.stopProducing()


class _BoundedPage(protocol.Protocol):
    """An HTML body read whole, up to ``limit`` bytes.  ``whole`` fires True once the body
    has ended (``broken`` says whether it ended early), or False once it is over ``limit``
    (reading then pauses until :meth:`relay_to` hands the rest to a relay)."""

    transport: Optional[IPushProducer]  # type: ignore[assignment]  # what Response.deliverBody gives

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.whole: defer.Deferred[bool] = defer.Deferred()
        self.broken: Optional[Failure] = None
        self.lost: Optional[Failure] = None
        self.relay: Optional[BodyRelay] = None

    def dataReceived(self, data: bytes) -> None:
        if self.relay is not None:
            self.relay.dataReceived(data)
            return
        self.parts.append(data)
        self.size += len(data)
        if self.size > self.limit and not self.whole.called:
            if self.transport is not None:
                self.transport.pauseProducing()
            self.whole.callback(False)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if self.relay is not None:
            self.relay.connectionLost(reason)
            return
        self.lost = reason
        if not self.whole.called:
            if not reason.check(ResponseDone, PotentialDataLoss):
                self.broken = reason
            self.whole.callback(True)

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts = []
        return data

    def relay_to(self, relay: BodyRelay) -> None:
        """The rest of the body to ``relay`` (after the part :meth:`take` gave)."""
        self.relay = relay
        relay.makeConnection(self.transport)
        if self.lost is not None:
            relay.connectionLost(self.lost)
        elif self.transport is not None:
            self.transport.resumeProducing()

    def stop(self) -> None:
        if self.transport is not None:
            self.transport.stopProducing()


_WrapperError = (ResponseNeverReceived, RequestTransmissionFailed, ResponseFailed)


def _describe(e: BaseException) -> str:
    if isinstance(e, _WrapperError) and e.reasons:  # twisted.web.client's failures carry their causes
        return "; ".join(r.getErrorMessage() for r in e.reasons)
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

"""Calling a webhook over HTTPS through treq (upstream's webhook ClientManager).

``clientConfig.url`` is called as given; ``clientConfig.service`` is called at
an endpoint the service resolver picks, with TLS server name (SNI and the
certificate check) ``<svc>.<ns>.svc``, as upstream dials it.  The server is
verified against ``caBundle`` (the system roots without one).  Each client
configuration keeps its own agent and pool of persistent connections.  A
call is bounded by the webhook's timeout and never blocks the reactor; its
failures are worded as Go's HTTP client words them (``Post "<url>": ...``).
treq and ``twisted.web.client`` load with the first call (as for every caller of
``machinery/go_http_client.py``, whose docstring says why).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urlsplit

import orjson
from twisted.internet import defer, ssl
from twisted.internet.interfaces import IReactorTime
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from kapiserver.admission.webhook.authentication import AuthenticationInfoResolver, Credentials
from kapiserver.admission.webhook.service_resolver import ServiceResolver
from kapiserver.machinery import errors
from kapiserver.machinery.duration import format_go_duration
from kapiserver.machinery.go_http_client import describe_post_failure, trust_root_from_ca_bundle

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_CACHE_SIZE = 200  # upstream's client cache size

if TYPE_CHECKING:  # pragma: no cover
    from treq.client import HTTPClient
    from twisted.web.client import HTTPConnectionPool, _HTTP11ClientFactory


@functools.cache
def _quiet_factory() -> type[_HTTP11ClientFactory]:
    """The pools' connection factory, without a log line per connection (too many for a
    per-request client); made with the first client, as twisted.web.client loads then."""
    from twisted.web.client import _HTTP11ClientFactory

    class QuietFactory(_HTTP11ClientFactory):
        noisy = False
    return QuietFactory


class CallFailed(Exception):
    """The call did not produce an answer (transport, TLS, timeout, non-2xx status)."""



@implementer(IPolicyForHTTPS)
class _TLSPolicy:
    """Verify against ``trust`` as ``server_name`` (or the URL's host)."""

    def __init__(self, trust: Any, server_name: Optional[str], client_certificate: Any) -> None:
        self.trust = trust
        self.server_name = server_name
        self.client_certificate = client_certificate

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:  # noqa: N802 (Twisted's name)
        name = self.server_name or hostname.decode("ascii")
        return ssl.optionsForClientTLS(name, trustRoot=self.trust, clientCertificate=self.client_certificate,
                                       acceptableProtocols=[b"http/1.1"])


def _trust_root(ca_bundle: str) -> Any:
    if not ca_bundle:
        return None  # the platform's roots
    try:
        return trust_root_from_ca_bundle(ca_bundle)
    except ValueError:
        raise CallFailed("could not get REST client: unable to load root certificates: unable to parse bytes as "
                         "PEM block") from None


def _client_certificate(creds: Credentials) -> Any:
    if not creds.cert_pem:
        return None
    return ssl.PrivateCertificate.loadPEM(creds.key_pem + b"\n" + creds.cert_pem)



_GENERIC = {400: "the server rejected our request for an unknown reason",
            401: "the server has asked for the client to provide credentials",
            403: "the server does not allow access to the requested resource",
            404: "the server could not find the requested resource",
            405: "the server does not allow this method on the requested resource",
            409: "the server reported a conflict",
            422: "the server rejected our request due to an error in our request",
            429: "the server has received too many requests and has asked us to try again later",
            503: "the server is currently unable to handle the request",
            504: "the server was unable to return a response in the time allotted, but may still be processing "
                 "the request"}


def status_failure(code: int, content: bytes) -> str:
    """A non-2xx answer as client-go's REST client reports it."""
    try:
        status = orjson.loads(content)
        if isinstance(status, dict) and status.get("kind") == "Status" and status.get("message"):
            return str(status["message"])
    except orjson.JSONDecodeError:
        pass
    if code in _GENERIC:
        return _GENERIC[code]
    text = content.decode("utf-8", "replace").strip()
    return f'an error on the server ("{text[:1024]}") has prevented the request from succeeding'


class WebhookClient:
    def __init__(self, reactor: IReactorTime, resolver: ServiceResolver,
                 credentials: Optional[AuthenticationInfoResolver] = None) -> None:
        self.reactor = reactor
        self.resolver = resolver
        self.credentials = credentials or AuthenticationInfoResolver()
        self._clients: dict[bytes, tuple[HTTPClient, HTTPConnectionPool]] = {}
        self._in_flight: set[defer.Deferred] = set()

    def _client(self, key: bytes, ca_bundle: str, server_name: Optional[str], creds: Credentials) -> HTTPClient:
        found = self._clients.get(key)
        if found is not None:
            return found[0]
        from treq.client import HTTPClient  # the first call loads them: see the module's docstring
        from twisted.web.client import Agent, HTTPConnectionPool
        policy = _TLSPolicy(_trust_root(ca_bundle), server_name, _client_certificate(creds))
        pool = HTTPConnectionPool(self.reactor, persistent=True)
        pool._factory = _quiet_factory()
        pool.maxPersistentPerHost = 8
        pool.retryAutomatically = False  # an admission request is not repeated behind the webhook's back
        client = HTTPClient(Agent(self.reactor, contextFactory=policy, pool=pool))
        if len(self._clients) >= _CACHE_SIZE:
            _, (_, old_pool) = self._clients.popitem()
            old_pool.closeCachedConnections()
        self._clients[key] = (client, pool)
        return client

    async def close(self) -> None:
        """Cancel the calls in flight and close every connection (the server stops); returns once
        the connections are closed, so a stopped server leaves none behind."""
        for d in list(self._in_flight):
            d.cancel()
        pools = [pool for _, pool in self._clients.values()]
        self._clients.clear()
        await defer.DeferredList([pool.closeCachedConnections() for pool in pools])

    async def post(self, client_config: dict, body: bytes, timeout: float) -> tuple[int, bytes]:
        """POST ``body``; ``(status code, response body)``.  Raises CallFailed."""
        query = f"timeout={format_go_duration(timeout)}"
        ca_bundle = client_config.get("caBundle") or ""
        service = client_config.get("service")
        headers: dict[bytes | str, list[bytes | str]] = {
            "Content-Type": ["application/json"], "Accept": ["application/json, */*"],
            "User-Agent": ["kube-apiserver-admission"]}
        key = orjson.dumps(client_config, option=orjson.OPT_SORT_KEYS)
        if service is not None:
            name, namespace = service.get("name") or "", service.get("namespace") or ""
            port = service.get("port") or 443
            server_name = f"{name}.{namespace}.svc"
            path = service.get("path") or ""
            shown = f"https://{server_name}:{port}{path}?{query}"
            creds = self.credentials.for_service(name, namespace, port)
            try:
                address, target_port = await self.resolver.resolve(namespace, name, port)
            except errors.StatusError as e:
                raise CallFailed(f'Post "{shown}": {e.message}') from None
            host = f"[{address}]" if ":" in address else address
            url = f"https://{host}:{target_port}{path}?{query}"
            headers["Host"] = [f"{server_name}:{port}"]
            client = self._client(key, ca_bundle, server_name, creds)
        else:
            raw = client_config.get("url") or ""
            parts = urlsplit(raw)
            if not raw:
                raise CallFailed("could not get REST client: webhook configuration must have either service or URL")
            shown = url = parts._replace(query=(parts.query + "&" if parts.query else "") + query).geturl()
            creds = self.credentials.for_url(parts.hostname or "", parts.port or 443)
            client = self._client(key, ca_bundle, None, creds)
        if creds.token:
            headers["Authorization"] = [f"Bearer {creds.token}"]

        async def call() -> tuple[int, bytes]:
            response = await client.post(url, data=body, headers=headers)
            content = await response.content()
            return response.code, content

        d = defer.Deferred.fromCoroutine(call())
        d.addTimeout(timeout, self.reactor)
        self._in_flight.add(d)
        try:
            code, content = await d
        except Exception as e:  # transport failures, TLS, timeout
            raise CallFailed(describe_post_failure(e, shown)) from None
        finally:
            self._in_flight.discard(d)
        if len(content) > MAX_RESPONSE_BYTES:
            raise CallFailed(f'Post "{shown}": response body too large')
        if not 200 <= code <= 299:
            raise CallFailed(status_failure(code, content))
        return code, content

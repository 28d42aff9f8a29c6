"""The TLS client the aggregator reaches extension API servers with.

As upstream's proxy transport: the server's certificate is verified against
the APIService's ``caBundle`` (the system roots when it has none) for the name
``<service>.<namespace>.svc``, unless ``insecureSkipTLSVerify``; this server
presents the front-proxy client certificate (``proxy_client_cert_file`` /
``proxy_client_key_file``), so the extension server believes the
``X-Remote-*`` headers naming the user.  One connection pool (and Agent) per
distinct TLS configuration.  treq and ``twisted.web.client`` load with the first
request to an extension server (``machinery/go_http_client.py`` says why).
"""
from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from twisted.internet import ssl
from twisted.logger import Logger
from twisted.internet.interfaces import IReactorTime
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

if TYPE_CHECKING:  # pragma: no cover
    from twisted.web.client import Agent, HTTPConnectionPool

log = Logger()
CONNECT_TIMEOUT_SECONDS = 5


class TLSTarget(NamedTuple):
    server_name: str  # <service>.<namespace>.svc
    ca_bundle: bytes  # PEM (decoded from the APIService's base64 caBundle); b"" = system roots
    insecure: bool


def decode_ca_bundle(value: Any) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def load_client_certificate(cert_path: str, key_path: str) -> Optional[ssl.PrivateCertificate]:
    """The front-proxy client certificate, or None (then extension servers see no client certificate)."""
    try:
        with open(cert_path, "rb") as f:
            cert = f.read()
        with open(key_path, "rb") as f:
            key = f.read()
    except OSError as e:
        log.warn("no front-proxy client certificate ({err}): extension API servers will not believe the "
                 "users this server names", err=e)
        return None
    return ssl.PrivateCertificate.loadPEM(cert + b"\n" + key)


def _pem_certificates(bundle: bytes) -> list[ssl.Certificate]:
    marker = b"-----END CERTIFICATE-----"
    certs = []
    for chunk in bundle.split(marker)[:-1]:
        certs.append(ssl.Certificate.loadPEM(chunk.strip() + b"\n" + marker + b"\n"))
    return certs


@implementer(IPolicyForHTTPS)
class _FixedPolicy:
    def __init__(self, creator: Any) -> None:
        self.creator = creator

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        return self.creator


def connection_creator(target: TLSTarget, client: Optional[ssl.PrivateCertificate]) -> Any:
    if target.insecure:
        kwargs: dict = {}
        if client is not None:
            kwargs = {"privateKey": client.privateKey.original, "certificate": client.original}
        return ssl.CertificateOptions(verify=False, raiseMinimumTo=ssl.TLSVersion.TLSv1_2, **kwargs)
    certs = _pem_certificates(target.ca_bundle) if target.ca_bundle else []
    trust = ssl.trustRootFromCertificates(certs) if certs else ssl.platformTrust()
    return ssl.optionsForClientTLS(target.server_name, trustRoot=trust, clientCertificate=client)


class ExtensionTransport:
    """Agents for extension servers, one per TLS configuration, sharing this server's client certificate."""

    def __init__(self, reactor: IReactorTime, client: Optional[ssl.PrivateCertificate]) -> None:
        self.reactor = reactor
        self.client = client
        self._agents: dict[TLSTarget, tuple[Agent, HTTPConnectionPool]] = {}

    def agent(self, target: TLSTarget) -> Agent:
        found = self._agents.get(target)
        if found is None:
            from twisted.web.client import Agent, HTTPConnectionPool  # see the module's docstring
            pool = HTTPConnectionPool(self.reactor, persistent=True)
            pool.maxPersistentPerHost = 4
            pool.cachedConnectionTimeout = 60
            agent = Agent(self.reactor, contextFactory=_FixedPolicy(connection_creator(target, self.client)),
                          connectTimeout=CONNECT_TIMEOUT_SECONDS, pool=pool)
            found = self._agents[target] = (agent, pool)
        return found[0]

    async def close(self) -> None:
        agents, self._agents = self._agents, {}
        for _, pool in agents.values():
            await pool.closeCachedConnections()


# the identity the aggregator's own requests (availability checks, discovery and OpenAPI
# downloads) carry: upstream's system:kube-aggregator in system:masters, so they are always allowed
AGGREGATOR_USER = "system:kube-aggregator"
AGGREGATOR_GROUPS = ("system:masters",)
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024


class ExtensionRequestError(Exception):
    pass


async def get_document(transport: ExtensionTransport, target: TLSTarget, host: str, port: int, path: str,
                       accept: str = "application/json", timeout: float = 5.0,
                       etag: str = "") -> tuple[int, dict, bytes]:
    """GET ``path`` from an extension server as the aggregator: (status code, lower-cased headers, body)."""
    import treq
    from twisted.web.http_headers import Headers

    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    url = f"https://{netloc}{path}"
    headers = Headers({b"Accept": [accept.encode()], b"X-Remote-User": [AGGREGATOR_USER.encode()],
                       b"X-Remote-Group": [g.encode() for g in AGGREGATOR_GROUPS]})
    if etag:  # a document not changed since is answered 304, without its body
        headers.setRawHeaders(b"If-None-Match", [etag.encode()])
    try:
        response = await treq.get(url, headers=headers, agent=transport.agent(target), timeout=timeout)
        body = await treq.content(response)
    except Exception as e:
        raise ExtensionRequestError(f"failing or missing response from {url}: {_describe(e)}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ExtensionRequestError(f"the response from {url} is too large")
    found = {k.decode("latin-1").lower(): v[-1].decode("latin-1") for k, v in response.headers.getAllRawHeaders()}
    return response.code, found, body


def _describe(e: Exception) -> str:
    from twisted.web.client import (RequestGenerationFailed, RequestTransmissionFailed, ResponseFailed,
                                    ResponseNeverReceived)
    # twisted's HTTP client failures that wrap the Failures that caused them (``reasons``)
    if isinstance(e, (ResponseFailed, ResponseNeverReceived, RequestTransmissionFailed, RequestGenerationFailed)) \
            and e.reasons:
        return "; ".join(r.getErrorMessage() for r in e.reasons)
    return str(e) or type(e).__name__

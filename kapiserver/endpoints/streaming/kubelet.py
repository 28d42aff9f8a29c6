"""The kubelet connection (upstream's ``pkg/kubelet/client``): where a node's kubelet is and how to talk TLS to it.

A node's kubelet is reached at the first of its ``status.addresses`` whose
type comes first in ``preferred_address_types`` (``GetPreferredNodeAddress``),
on the port its Node reports in ``status.daemonEndpoints.kubeletEndpoint``
(or the configured default).  ``nodes/proxy`` is refused when that address
(or any the name resolves to) is not global unicast (upstream's
``isProxyableHostname``: no loopback, link-local, multicast or unspecified
address); logs, exec, attach and port-forward do not check it, as upstream.  This server presents the kubelet client
certificate; the kubelet's serving certificate is verified against the
configured CA for the address connected to, and not verified at all when no
CA is configured, as kube-apiserver without ``--kubelet-certificate-authority``.
Streams to pods and to other ports of a node (``pods/proxy``,
``services/proxy``, ``nodes/proxy`` with a port) use upstream's proxy
transport instead: TLS when the scheme says so, never verified, no client
certificate.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from twisted.internet import defer, ssl
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import (IAddress, IHostnameResolver, IHostResolution, IOpenSSLClientConnectionCreator,
                                         IResolutionReceiver)
from zope.interface import implementer

from kapiserver.machinery import errors, validation

DEFAULT_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")


class KubeletClientConfig(NamedTuple):
    """kube-apiserver's ``--kubelet-*`` settings, with the credentials loaded."""

    client_certificate: Optional[ssl.PrivateCertificate] = None
    # PEM bundle the kubelets' serving certificates must chain to; b"" = not verified
    certificate_authority: bytes = b""
    preferred_address_types: tuple[str, ...] = DEFAULT_ADDRESS_TYPES
    timeout_seconds: float = 5.0
    port: int = 10250


class KubeletEndpoint(NamedTuple):
    """Where one node's kubelet answers."""

    host: str
    port: int


def _go_addresses(addresses: list) -> str:
    """``%v`` of a []NodeAddress, as upstream's NoMatchError prints it."""
    return "[" + " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses
                          if isinstance(a, dict)) + "]"


def kubelet_endpoint(node: dict, config: KubeletClientConfig) -> KubeletEndpoint:
    """Upstream's NodeConnectionInfoGetter.GetConnectionInfo for a Node object."""
    status = node.get("status") or {}
    addresses = [a for a in status.get("addresses") or [] if isinstance(a, dict)]
    host = ""
    for wanted in config.preferred_address_types:
        host = next((str(a.get("address", "")) for a in addresses if a.get("type") == wanted), "")
        if host:
            break
    if not host:
        raise errors.unexpected_error(f"no preferred addresses found; known addresses: {_go_addresses(addresses)}")
    endpoint = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {})
    port = endpoint.get("Port")
    return KubeletEndpoint(host, port if isinstance(port, int) and port > 0 else config.port)


@implementer(IResolutionReceiver)
class _Addresses:
    """Collects what a name resolves to."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.done: defer.Deferred[list[str]] = defer.Deferred()

    def resolutionBegan(self, resolutionInProgress: IHostResolution) -> None:
        pass

    def addressResolved(self, address: IAddress) -> None:
        if isinstance(address, (IPv4Address, IPv6Address)):
            self.hosts.append(address.host)

    def resolutionComplete(self) -> None:
        self.done.callback(self.hosts)


async def proxyable_host_problem(resolver: IHostnameResolver, host: str) -> Optional[str]:
    """upstream's isProxyableHostname for ``nodes/proxy``: every address the node's host
    resolves to must be global unicast (an IP address resolves to itself).  The problem in
    upstream's words, or None."""
    literal = validation.parse_ip_sloppy(host)
    if literal is not None:
        addresses = [literal]
    else:
        receiver = _Addresses()
        resolver.resolveHostName(receiver, host)
        found = await receiver.done
        if not found:
            return f"lookup {host}: no such host"
        addresses = [a for a in (validation.parse_ip_sloppy(h.split("%")[0]) for h in found) if a is not None]
        if not addresses:
            return "no addresses for hostname"
    if not all(validation.is_global_unicast(address) for address in addresses):
        return "address not allowed"
    return None


def _pem_certificates(bundle: bytes) -> list[ssl.Certificate]:
    marker = b"-----END CERTIFICATE-----"
    return [ssl.Certificate.loadPEM(chunk.strip() + b"\n" + marker + b"\n") for chunk in bundle.split(marker)[:-1]]


def kubelet_tls(config: KubeletClientConfig, host: str) -> IOpenSSLClientConnectionCreator:
    """TLS towards a kubelet at ``host``: our client certificate; its certificate verified for
    ``host`` against the kubelet CA, or not at all without one."""
    client = config.client_certificate
    if not config.certificate_authority:
        kwargs = {}
        if client is not None:
            kwargs = {"privateKey": client.privateKey.original, "certificate": client.original}
        return ssl.CertificateOptions(verify=False, raiseMinimumTo=ssl.TLSVersion.TLSv1_2, **kwargs)
    trust = ssl.trustRootFromCertificates(_pem_certificates(config.certificate_authority))
    return ssl.optionsForClientTLS(host, trustRoot=trust, clientCertificate=client)


def proxy_tls() -> IOpenSSLClientConnectionCreator:
    """Upstream's proxy transport: proxying is by IP, so nothing can be verified."""
    return ssl.CertificateOptions(verify=False, raiseMinimumTo=ssl.TLSVersion.TLSv1_2)

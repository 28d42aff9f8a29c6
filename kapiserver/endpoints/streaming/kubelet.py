"""The kubelet connection (upstream's ``pkg/kubelet/client``): where a node's kubelet is and how to talk TLS to it.

A node's kubelet is reached at the first of its ``status.addresses`` whose
type comes first in ``preferred_address_types`` (``GetPreferredNodeAddress``),
on the port its Node reports in ``status.daemonEndpoints.kubeletEndpoint``
(or the configured default).  This server presents the kubelet client
certificate; the kubelet's serving certificate is verified against the
configured CA for the address connected to, and not verified at all when no
CA is configured, as kube-apiserver without ``--kubelet-certificate-authority``.
Streams to pods and to other ports of a node (``pods/proxy``,
``services/proxy``, ``nodes/proxy`` with a port) use upstream's proxy
transport instead: TLS when the scheme says so, never verified, no client
certificate.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Optional

from twisted.internet import ssl
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from kapiserver.machinery import errors

DEFAULT_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")


@dataclass(frozen=True)
class KubeletClientConfig:
    """kube-apiserver's ``--kubelet-*`` settings, with the credentials loaded."""

    client_certificate: Optional[ssl.PrivateCertificate] = None
    # PEM bundle the kubelets' serving certificates must chain to; b"" = not verified
    certificate_authority: bytes = b""
    preferred_address_types: tuple[str, ...] = DEFAULT_ADDRESS_TYPES
    timeout_seconds: float = 5.0
    port: int = 10250


@dataclass(frozen=True)
class KubeletEndpoint:
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


_LINK_LOCAL_MULTICAST = (ipaddress.ip_network("224.0.0.0/24"), ipaddress.ip_network("ff02::/16"))
_INTERFACE_LOCAL_MULTICAST = ipaddress.ip_network("ff01::/16")


def is_proxyable_host(host: str) -> bool:
    """upstream's IsProxyableIP for an address: not loopback, link-local (unicast or multicast)
    or interface-local multicast (a name is left to resolve)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return True
    if address.is_loopback or address.is_link_local:
        return False
    if any(address in net for net in _LINK_LOCAL_MULTICAST):
        return False
    return address not in _INTERFACE_LOCAL_MULTICAST


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


@implementer(IPolicyForHTTPS)
class FixedTLSPolicy:
    """An Agent's TLS policy that uses one connection creator (built for the one host it dials)."""

    def __init__(self, creator: IOpenSSLClientConnectionCreator) -> None:
        self.creator = creator

    def creatorForNetloc(self, hostname: bytes, port: int) -> IOpenSSLClientConnectionCreator:
        return self.creator

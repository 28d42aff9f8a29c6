"""The address a server advertises to the cluster (the ``kubernetes`` Service's endpoints).

kube-apiserver's ``--advertise-address``: when it is not set the bind
address is used, and when that is unspecified (``0.0.0.0`` / ``::``) the
address of the host's default-route interface (upstream's
ChooseHostInterface).  The route is looked up by ``connect()`` on a UDP
socket, which sends nothing.  A host without a default route gets the
loopback address and a warning (upstream refuses to start).
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Optional

from twisted.logger import Logger

log = Logger()

# Documentation addresses (RFC 5737, RFC 3849): only their route is looked up.
_PROBE = {4: ("192.0.2.1", socket.AF_INET), 6: ("2001:db8::1", socket.AF_INET6)}


def default_route_address(version: int) -> Optional[str]:
    """The source address the host would use toward the rest of the network, or None."""
    target, family = _PROBE[version]
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((target, 9))
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if ipaddress.ip_address(address).is_unspecified else address


def advertise_address(configured: str, bind_address: str) -> str:
    if configured:
        return configured
    bind = ipaddress.ip_address(bind_address)
    if not bind.is_unspecified:
        return bind_address
    found = default_route_address(bind.version)
    if found is None:
        fallback = "127.0.0.1" if bind.version == 4 else "::1"
        log.warn("no default route to choose an advertise address from; advertising {address} (set "
                 "advertise_address)", address=fallback)
        return fallback
    return found

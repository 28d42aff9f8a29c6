"""The two ranges Services allocate from, as offsets into a bitmap.

* :class:`IPRange`: the service cluster IP range (``--service-cluster-ip-range``).
  As upstream's ipallocator: offset 0 is the network address + 1, the network
  address itself and (IPv4) the broadcast address are never handed out, an
  IPv6 range is capped at 65536 addresses, and the lowest
  ``min(max(16, size/16), 256)`` offsets form the band reserved for IPs
  asked for by number (the ``kubernetes`` Service takes the first one).
* :class:`PortRange`: the node port range, 30000-32767 (``--service-node-port-range``),
  reserved band ``min(max(16, size/32), 128)``.
"""
from __future__ import annotations

import ipaddress
from typing import Optional, Union

DEFAULT_SERVICE_CIDR = "10.0.0.0/24"  # kube-apiserver's default when none is given
NODE_PORT_MIN, NODE_PORT_MAX = 30000, 32767
MAX_IPV6_SIZE = 65536


def _band(size: int, step: int, low: int, high: int) -> int:
    """Upstream's calculateRangeOffset: ``min(max(low, size/step), high)``, 0 for tiny ranges."""
    if size <= low:
        return 0
    return min(max(low, size // step), high)


class IPRange:
    def __init__(self, cidr: str) -> None:
        self.network: Union[ipaddress.IPv4Network, ipaddress.IPv6Network] = ipaddress.ip_network(cidr, strict=False)
        self.family = "IPv4" if self.network.version == 4 else "IPv6"
        self.spec = str(self.network)
        total = self.network.num_addresses if self.network.prefixlen < self.network.max_prefixlen - 1 else 0
        size = total - 1 if self.network.version == 4 else min(total, MAX_IPV6_SIZE)
        self.size = max(0, size - 1)
        self.reserved = _band(total, 16, 16, 256)
        self.base = int(self.network.network_address) + 1

    @property
    def first_ip(self) -> str:
        """The address upstream gives the ``kubernetes`` Service."""
        return str(self.network.network_address + 1)

    def offset_of(self, ip: str) -> Optional[int]:
        """The bitmap offset of ``ip``, or None when it is not an allocatable address of the range."""
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return None
        if addr.version != self.network.version or addr not in self.network:
            return None
        offset = int(addr) - self.base
        return offset if 0 <= offset < self.size else None

    def value_at(self, offset: int) -> str:
        return str(ipaddress.ip_address(self.base + offset))

    def not_in_range(self, ip: str) -> str:
        """Upstream's ErrNotInRange text."""
        return f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {self.spec}"


class PortRange:
    def __init__(self, low: int = NODE_PORT_MIN, high: int = NODE_PORT_MAX) -> None:
        self.low, self.high = low, high
        self.spec = f"{low}-{high}"
        self.size = high - low + 1
        self.reserved = _band(self.size, 32, 16, 128)

    def offset_of(self, port: object) -> Optional[int]:
        if isinstance(port, bool) or not isinstance(port, int) or not self.low <= port <= self.high:
            return None
        return port - self.low

    def value_at(self, offset: int) -> int:
        return self.low + offset

    def not_in_range(self, port: object) -> str:
        return f"provided port is not in the valid range. The range of valid ports is {self.spec}"

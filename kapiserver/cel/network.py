"""The Kubernetes CEL IP and CIDR libraries (upstream's library/ip.go and cidr.go).

``ip('10.0.0.1')``, ``isIP(s)``, ``ip.isCanonical(s)``, ``<ip>.family()``,
``isUnspecified()``, ``isLoopback()``, ``isLinkLocalMulticast()``,
``isLinkLocalUnicast()``, ``isGlobalUnicast()``; ``cidr('10.0.0.0/8')``,
``isCIDR(s)``, ``<cidr>.containsIP(ip or string)``, ``containsCIDR(cidr or
string)``, ``ip()``, ``masked()``, ``prefixLength()``; ``string(ip)`` and
``string(cidr)``.  As everywhere in this library, values the engine cannot
hold are carried as small marker maps (canonical text inside, so ``==``
compares them as upstream's types do).
"""
from __future__ import annotations

import ipaddress
from typing import Any, Callable, Union

IP = "__kapiserver_ip__"
CIDR = "__kapiserver_cidr__"

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


def _parse_ip(text: Any) -> Address:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    if "%" in text:
        raise ValueError(f"IP address {text!r} with zone value is not allowed")
    try:
        addr = ipaddress.ip_address(text)
    except ValueError as e:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string: {e}") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return addr


def _parse_cidr(text: Any) -> Network:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    if "%" in text:
        raise ValueError(f"CIDR {text!r} with zone value is not allowed")
    try:
        net = ipaddress.ip_network(text, strict=False)
        _parse_ip(text.split("/", 1)[0])
        if "/" not in text:
            raise ValueError("no prefix length")
    except ValueError as e:
        raise ValueError(f"network address parse error during conversion from string: {e}") from None
    return net


def _ip_value(v: Any) -> Address:
    if isinstance(v, dict) and IP in v:
        return ipaddress.ip_address(v[IP])
    raise TypeError("no such overload")


def _cidr_text(v: Any) -> str:
    if isinstance(v, dict) and CIDR in v:
        return v[CIDR]
    raise TypeError("no such overload")


def _cidr_value(v: Any) -> tuple[Address, Network]:
    text = _cidr_text(v)
    addr_text, _, prefix = text.partition("/")
    return ipaddress.ip_address(addr_text), ipaddress.ip_network(f"{addr_text}/{prefix}", strict=False)


def make_ip(text: Any) -> dict:
    return {IP: str(_parse_ip(text))}


def make_cidr(text: Any) -> dict:
    net = _parse_cidr(text)
    addr = _parse_ip(text.split("/", 1)[0])
    return {CIDR: f"{addr}/{net.prefixlen}"}


def _is(parse: Callable[[Any], Any]) -> Callable[[Any], bool]:
    def check(text: Any) -> bool:
        try:
            parse(text)
            return True
        except ValueError:
            return False
    return check


def _is_canonical(text: Any) -> bool:
    return str(_parse_ip(text)) == text


def _is_global_unicast(addr: Address) -> bool:
    """Go's net.IP.IsGlobalUnicast (private ranges count, unlike Python's is_global)."""
    if isinstance(addr, ipaddress.IPv4Address) and addr == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (addr.is_unspecified or addr.is_loopback or addr.is_multicast or addr.is_link_local)


def _contains_ip(c: Any, other: Any) -> bool:
    _, net = _cidr_value(c)
    addr = _parse_ip(other) if isinstance(other, str) else _ip_value(other)
    return addr.version == net.version and addr in net


def _contains_cidr(c: Any, other: Any) -> bool:
    _, net = _cidr_value(c)
    inner_net = _parse_cidr(other) if isinstance(other, str) else _cidr_value(other)[1]
    return inner_net.version == net.version and inner_net.subnet_of(net)  # type: ignore[arg-type]


def _masked(c: Any) -> dict:
    _, net = _cidr_value(c)
    return {CIDR: str(net)}


def to_string(v: Any) -> str:
    """``string()`` of the values the engine leaves to us (IPs, CIDRs, booleans)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict) and IP in v:
        return v[IP]
    if isinstance(v, dict) and CIDR in v:
        return v[CIDR]
    raise TypeError("no such overload")


FUNCTIONS: dict[str, Callable] = {
    "ip": lambda v: cidr_ip(v) if isinstance(v, dict) else make_ip(v),  # ip(s) and <cidr>.ip()
    "isIP": _is(_parse_ip),
    "ip.isCanonical": _is_canonical,
    "family": lambda v: _ip_value(v).version,
    "isUnspecified": lambda v: _ip_value(v).is_unspecified,
    "isLoopback": lambda v: _ip_value(v).is_loopback,
    "isLinkLocalMulticast": lambda v: (lambda a: a.is_multicast and (
        a in ipaddress.ip_network("224.0.0.0/24") if a.version == 4 else a in ipaddress.ip_network("ff02::/16")))(
        _ip_value(v)),
    "isLinkLocalUnicast": lambda v: (lambda a: a.is_link_local and not a.is_multicast)(_ip_value(v)),
    "isGlobalUnicast": lambda v: _is_global_unicast(_ip_value(v)),
    "cidr": make_cidr,
    "isCIDR": _is(_parse_cidr),
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "prefixLength": lambda c: _cidr_value(c)[1].prefixlen,
    "masked": _masked,
    "string": to_string,
}


def cidr_ip(c: Any) -> dict:
    """``<cidr>.ip()``: the address the CIDR was written with."""
    return {IP: str(_cidr_value(c)[0])}

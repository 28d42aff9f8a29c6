"""A network namespace joined to this one by a veth pair, for tests of servers reached by address.

Some addresses may not point at loopback (EndpointSlices refuse it, as
upstream's validation does), so a test that needs a server "elsewhere" runs
it in a namespace of its own: ``ip netns add``, a veth pair (a /30 of 10.201.0.0/16) with
``host_address`` on this side and ``peer_address`` inside, and
``exec_prefix`` to start a process in it.  Traffic stays on this machine, on
the pair the test created.  Needs the right to create namespaces (root, or
CAP_NET_ADMIN); :func:`unavailable_reason` says why not.
"""
from __future__ import annotations

import ipaddress
import os
import subprocess
from typing import Optional


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def pair_addresses(seed: int) -> tuple[str, str]:
    """A /30 of 10.201.0.0/16 chosen by ``seed`` (the process id): two test runs at once get
    different pairs.  (host side, namespace side)"""
    base = int(ipaddress.IPv4Address("10.201.0.0")) + (seed % 16384) * 4
    return str(ipaddress.IPv4Address(base + 1)), str(ipaddress.IPv4Address(base + 2))


class NetworkNamespace:
    def __init__(self, name: str, host_address: str = "", peer_address: str = "", prefix_length: int = 30,
                 index: int = 0) -> None:
        """``index`` tells apart namespaces one process has at once (their pairs and link names)."""
        self.name = name
        default_host, default_peer = pair_addresses(os.getpid() + index * 4099)
        self.host_address = host_address or default_host
        self.peer_address = peer_address or default_peer
        self.prefix_length = prefix_length
        # interface names are at most 15 bytes
        suffix = f"{os.getpid() % 100000}" + (f"x{index}" if index else "")
        self.host_link = f"vh{suffix}"
        self.peer_link = f"vp{suffix}"

    @property
    def exec_prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)

    def create(self) -> "NetworkNamespace":
        self.delete()
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.host_link, "type", "veth", "peer", "name", self.peer_link)
            _ip("link", "set", self.peer_link, "netns", self.name)
            _ip("addr", "add", f"{self.host_address}/{self.prefix_length}", "dev", self.host_link)
            _ip("link", "set", self.host_link, "up")
            _ip("netns", "exec", self.name, "ip", "addr", "add", f"{self.peer_address}/{self.prefix_length}",
                "dev", self.peer_link)
            _ip("netns", "exec", self.name, "ip", "link", "set", self.peer_link, "up")
            _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
        except subprocess.CalledProcessError:
            self.delete()
            raise
        return self

    def cut(self) -> None:
        """Partition the namespace: its end of the pair stays up, ours goes down (no packet passes)."""
        _ip("link", "set", self.host_link, "down")

    def cut_except(self, port: int) -> None:
        """Partition the namespace but for TCP ``port`` inside it: a server there stays reachable
        on that port while every other connection in or out is cut (iptables rules of the namespace's own)."""
        for rule in (("INPUT", "-p", "tcp", "--dport", str(port), "-j", "ACCEPT"),
                     ("OUTPUT", "-p", "tcp", "--sport", str(port), "-j", "ACCEPT"),
                     ("INPUT", "-i", self.peer_link, "-j", "DROP"),
                     ("OUTPUT", "-o", self.peer_link, "-j", "DROP")):
            _ip("netns", "exec", self.name, "iptables", "-A", *rule)

    def heal(self) -> None:
        """Undo :meth:`cut` and :meth:`cut_except` (the address and its route come back with the link)."""
        _ip("netns", "exec", self.name, "iptables", "-F")
        _ip("link", "set", self.host_link, "up")

    def delete(self) -> None:
        _ip("link", "del", self.host_link, check=False)
        _ip("netns", "del", self.name, check=False)


def unavailable_reason() -> Optional[str]:
    """None when network namespaces can be created here, else why not."""
    probe = f"kapiserver-probe-{os.getpid()}"
    try:
        result = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`ip netns` cannot run: {e}"
    if result.returncode != 0:
        return f"`ip netns add` is not permitted here: {result.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None

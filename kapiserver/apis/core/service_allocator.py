"""Cluster IPs and node ports of Services.

Upstream keeps allocation bitmaps in storage; here the set of used values is
read from the Services themselves (a consistent list through the watch cache)
on each allocation, plus the values this process handed out in the last
minute that may not be stored yet.  Two servers sharing one etcd can therefore
race and hand out the same IP; one server cannot.
"""
from __future__ import annotations

import ipaddress
import random
import time
from typing import Any, Awaitable, Callable, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.errors import Cause

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
NODE_PORT_MIN, NODE_PORT_MAX = 30000, 32767
RESERVE_SECONDS = 60.0


def _go_strings(values: list[str]) -> str:
    """A ``[]string`` the way Go's %#v prints it in upstream's messages."""
    return "[]string{" + ", ".join(errors.render_value(v) for v in values) + "}"


class ServiceAllocator:
    """Hands out cluster IPs from one IPv4 or IPv6 range and node ports from 30000-32767."""

    def __init__(self, cidr: str = DEFAULT_SERVICE_CIDR) -> None:
        self.network = ipaddress.ip_network(cidr, strict=False)
        self.family = "IPv4" if self.network.version == 4 else "IPv6"
        self._list_services: Optional[Callable[[], Awaitable[list[dict]]]] = None
        self._recent: dict[Any, float] = {}

    def attach(self, list_services: Callable[[], Awaitable[list[dict]]]) -> None:
        """Where the existing Services come from (the server's Services Store)."""
        self._list_services = list_services

    @property
    def first_ip(self) -> str:
        """The address upstream gives the ``kubernetes`` Service."""
        return str(self.network.network_address + 1)

    def in_range(self, ip: str) -> bool:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return (addr in self.network and addr != self.network.network_address
                and (self.network.version == 6 or addr != self.network.broadcast_address))

    async def _used(self, skip_uid: str) -> tuple[set[str], set[int]]:
        now = time.monotonic()
        self._recent = {k: t for k, t in self._recent.items() if now - t < RESERVE_SECONDS}
        ips: set[str] = set()
        ports: set[int] = set()
        for svc in await self._list_services() if self._list_services else []:
            if (svc.get("metadata") or {}).get("uid") == skip_uid:
                continue
            spec = svc.get("spec") or {}
            ips.update(ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None")
            ports.update(p["nodePort"] for p in spec.get("ports") or () if isinstance(p, dict) and p.get("nodePort"))
            if spec.get("healthCheckNodePort"):
                ports.add(spec["healthCheckNodePort"])
        # a value now stored is no longer pending: deleting its Service frees it
        for value in list(self._recent):
            if value in ips or value in ports:
                del self._recent[value]
        ips.update(k for k in self._recent if isinstance(k, str))
        ports.update(k for k in self._recent if isinstance(k, int))
        return ips, ports

    def _pick_ip(self, used: set[str]) -> Optional[str]:
        # offsets 2..last: offset 1 (the first IP) is kept for the kubernetes Service
        last = self.network.num_addresses - (2 if self.network.version == 4 else 1)
        count = min(last - 1, 2 ** 32)
        if count <= 0:
            return None
        start = random.randrange(count)
        for step in range(min(count, 2 ** 20)):
            ip = str(self.network.network_address + 2 + (start + step) % count)
            if ip not in used:
                return ip
        return None

    def _pick_port(self, used: set[int]) -> Optional[int]:
        span = NODE_PORT_MAX - NODE_PORT_MIN + 1
        start = random.randrange(span)
        for step in range(span):
            port = NODE_PORT_MIN + (start + step) % span
            if port not in used:
                return port
        return None

    async def allocate(self, svc: dict, old: Optional[dict]) -> list[Cause]:
        """Fill ``spec.clusterIP(s)``, ``ipFamilies``, ``ipFamilyPolicy``, node ports and the
        health-check node port (in place); causes when the request cannot be served."""
        spec = svc.get("spec")
        if not isinstance(spec, dict):
            return []
        kind = spec.get("type") or "ClusterIP"
        old_spec = (old or {}).get("spec") or {}
        causes: list[Cause] = []
        if kind != "ExternalName":
            causes = self._init_ip_families(spec, old_spec if old is not None else None)
            if causes:
                return causes
        uid = (svc.get("metadata") or {}).get("uid", "") if old is not None else ""
        ips, ports = await self._used(uid)
        if kind != "ExternalName":
            causes.extend(self._allocate_ip(spec, old_spec, ips))
        if kind in ("NodePort", "LoadBalancer") and not (kind == "LoadBalancer"
                                                        and spec.get("allocateLoadBalancerNodePorts") is False):
            causes.extend(self._allocate_ports(spec, old_spec, ports))
        if kind == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local":
            causes.extend(self._allocate_health_check_port(spec, old_spec, ports))
        return causes

    def _init_ip_families(self, spec: dict, old_spec: Optional[dict]) -> list[Cause]:
        """upstream's initIPFamilyFields on a single-family cluster."""
        from kapiserver.apis.core import services  # the checks live with the kind

        if spec.get("ipFamilyPolicy") is None:
            if old_spec is not None and old_spec.get("ipFamilyPolicy") is not None:
                spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"]
            elif spec.get("clusterIP") == "None" and not spec.get("selector"):
                spec["ipFamilyPolicy"] = "RequireDualStack"
            else:
                spec["ipFamilyPolicy"] = "SingleStack"
        causes = services.validate_cluster_ips_related_fields(spec)
        if causes:
            return causes
        policy = spec["ipFamilyPolicy"]
        ips = list(spec.get("clusterIPs") or [])
        families = spec.get("ipFamilies") if isinstance(spec.get("ipFamilies"), list) else []
        if old_spec is not None:
            if policy == "SingleStack":
                if ips == list(old_spec.get("clusterIPs") or []) and len(ips) > 1:
                    spec["clusterIPs"] = ips = ips[:1]
                if families == list(old_spec.get("ipFamilies") or []) and len(families) > 1:
                    spec["ipFamilies"] = families = families[:1]
            else:
                if len(ips) < len(old_spec.get("clusterIPs") or []):
                    causes.append(errors.field_invalid("spec.ipFamilyPolicy", policy,
                                                       "must be 'SingleStack' to release the secondary cluster IP"))
                if len(families) < len(old_spec.get("ipFamilies") or []):
                    causes.append(errors.field_invalid("spec.ipFamilyPolicy", policy,
                                                       "must be 'SingleStack' to release the secondary IP family"))
        if policy == "SingleStack":
            if len(ips) == 2:
                causes.append(errors.field_invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or "
                                                   "'PreferDualStack' when multiple cluster IPs are specified"))
            if len(families) == 2:
                causes.append(errors.field_invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or "
                                                   "'PreferDualStack' when multiple IP families are specified"))
        for i, ip in enumerate(ips):
            if ip == "None":
                break
            family = "IPv6" if ":" in ip else "IPv4"
            if i >= len(families):
                if family != self.family:
                    causes.append(Cause(errors.INVALID, f"Invalid value: {_go_strings(ips)}: {family} is not "
                                        "configured on this cluster", f"spec.clusterIPs[{i}]"))
                else:
                    families = families + [family]
                    spec["ipFamilies"] = families
        if causes:
            return causes
        if spec.get("clusterIP") == "None" and not spec.get("selector"):
            if not families:
                spec["ipFamilies"] = families = [self.family]
            if len(families) < 2 and policy != "SingleStack":
                spec["ipFamilies"] = families + ["IPv6" if families[0] == "IPv4" else "IPv4"]
            return []
        if policy == "RequireDualStack":
            causes.append(errors.field_invalid("spec.ipFamilyPolicy", policy,
                                               "this cluster is not configured for dual-stack services"))
        for i, family in enumerate(families):
            if family != self.family:
                causes.append(errors.field_invalid(f"spec.ipFamilies[{i}]", family, "not configured on this cluster"))
        if causes:
            return causes
        if not families:
            spec["ipFamilies"] = [self.family]
        return []

    def _allocate_health_check_port(self, spec: dict, old_spec: dict, used: set[int]) -> list[Cause]:
        port = spec.get("healthCheckNodePort")
        if port and port == old_spec.get("healthCheckNodePort"):
            return []
        taken = used | {p.get("nodePort") for p in spec.get("ports") or () if isinstance(p, dict)}
        path = "spec.healthCheckNodePort"
        if port:
            if not isinstance(port, int) or not NODE_PORT_MIN <= port <= NODE_PORT_MAX:
                return [errors.field_invalid(path, port, f"provided port is not in the valid range. The range of "
                                                         f"valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}")]
            if port in taken:
                return [errors.field_invalid(path, port, "provided port is already allocated")]
            self._recent[port] = time.monotonic()
            return []
        picked = self._pick_port(taken)
        if picked is None:
            return [errors.field_invalid(path, 0, "range is full")]
        spec["healthCheckNodePort"] = picked
        self._recent[picked] = time.monotonic()
        return []

    def _allocate_ip(self, spec: dict, old_spec: dict, used: set[str]) -> list[Cause]:
        requested = spec.get("clusterIP") or ((spec.get("clusterIPs") or [None])[0])
        if old_spec.get("clusterIP") and requested == old_spec.get("clusterIP"):
            pass  # already this Service's
        elif requested == "None":
            pass
        elif requested:
            if not self.in_range(requested):
                return [Cause(errors.INVALID, f"Invalid value: {_go_strings([requested])}: failed to allocate IP "
                              f"{requested}: the provided IP ({requested}) is not in the valid range. The range of "
                              f"valid IPs is {self.network}", "spec.clusterIPs")]
            if requested in used:
                return [Cause(errors.INVALID, f"Invalid value: {_go_strings([requested])}: failed to allocate IP "
                              f"{requested}: provided IP is already allocated", "spec.clusterIPs")]
            self._recent[requested] = time.monotonic()
        else:
            requested = self._pick_ip(used)
            if requested is None:
                return [Cause(errors.INVALID, f"Invalid value: {_go_strings([])}: failed to allocate a serviceIP: "
                              f"range is full", "spec.clusterIPs")]
            self._recent[requested] = time.monotonic()
        spec["clusterIP"] = requested
        spec["clusterIPs"] = [requested]
        if not spec.get("ipFamilies"):
            spec["ipFamilies"] = [self.family]
        return []

    def _allocate_ports(self, spec: dict, old_spec: dict, used: set[int]) -> list[Cause]:
        causes = []
        mine = {p.get("nodePort") for p in old_spec.get("ports") or () if isinstance(p, dict)}
        taken_here: set[int] = set()
        for i, port in enumerate(spec.get("ports") or ()):
            if not isinstance(port, dict):
                continue
            node_port = port.get("nodePort")
            path = f"spec.ports[{i}].nodePort"
            if node_port:
                if node_port in mine and node_port not in taken_here:
                    taken_here.add(node_port)
                    continue
                if not isinstance(node_port, int) or not NODE_PORT_MIN <= node_port <= NODE_PORT_MAX:
                    causes.append(errors.field_invalid(
                        path, node_port, f"provided port is not in the valid range. The range of valid ports is "
                                         f"{NODE_PORT_MIN}-{NODE_PORT_MAX}"))
                elif node_port in used or node_port in taken_here:
                    causes.append(errors.field_invalid(path, node_port, "provided port is already allocated"))
                else:
                    taken_here.add(node_port)
                    self._recent[node_port] = time.monotonic()
                continue
            picked = self._pick_port(used | taken_here)
            if picked is None:
                causes.append(errors.field_invalid(path, 0, "range is full"))
                continue
            port["nodePort"] = picked
            taken_here.add(picked)
            self._recent[picked] = time.monotonic()
        return causes

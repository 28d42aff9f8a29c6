"""Cluster IPs and node ports of Services, allocated from ranges kept in storage.

Upstream's Service REST allocators (pkg/registry/core/service/storage/alloc.go)
over two ``RangeAllocation`` records (``range_allocation.py``): the cluster IP
range at ``/ranges/serviceips`` and the node ports at ``/ranges/servicenodeports``.
An allocation is a compare-and-swap of the bitmap, so it costs one write
however many Services exist, and servers sharing one etcd never hand out the
same value.

Allocation is a transaction around the Store's write, as upstream's
BeginCreate/BeginUpdate hooks: what ``begin_create``/``begin_update`` took is
given back when the write fails; what an update gave up (a Service turned
ExternalName or ClusterIP, a removed port) is released once it succeeded;
``release`` frees everything when a Service is deleted.  A value lost
between the two (a server killed mid-request) is found and freed by the
repair (``controllers/service_repair.py``).  Dry runs write nothing and
answer as upstream's dry-run allocators do: an IP asked for is only checked
against the range, a node port asked for also against the node port bitmap;
values the server would pick are stand-ins (the range's network address,
node ports from 32769 up).

Single-stack only: the range's family is the only one served.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.apis.core.range_allocation import StoredRange
from kapiserver.apis.core.service_cluster_ips import validate_cluster_ips_related_fields
from kapiserver.apis.core.service_ranges import DEFAULT_SERVICE_CIDR, IPRange, PortRange
from kapiserver.machinery import errors, gorepr
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.jsonvalues import as_list
from kapiserver.storage.interface import Storage

log = Logger()

SERVICE_IPS_KEY = "/ranges/serviceips"
NODE_PORTS_KEY = "/ranges/servicenodeports"
ALREADY_ALLOCATED_IP = "provided IP is already allocated"
ALREADY_ALLOCATED_PORT = "provided port is already allocated"

Finish = Callable[[bool], Awaitable[None]]
Change = Callable[[AllocationBitmap], tuple[Any, list[int]]]


def _kind(spec: dict) -> str:
    return spec.get("type") or "ClusterIP"


def _has_cluster_ip(spec: dict) -> bool:
    """A Service that holds an address of the range (not ExternalName, not headless)."""
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return _kind(spec) != "ExternalName" and bool(ips) and ips[0] != "None"


def _should_allocate_node_ports(spec: dict) -> bool:
    kind = _kind(spec)
    return kind == "NodePort" or (kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)


def _needs_health_check(spec: dict) -> bool:
    """Upstream's NeedsHealthCheck: a LoadBalancer keeping the client's source address."""
    return _kind(spec) == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def node_ports_of(spec: dict) -> list[int]:
    """Every node port a Service holds (its ports' and its health check's)."""
    ports = [p["nodePort"] for p in spec.get("ports") or () if isinstance(p, dict) and p.get("nodePort")]
    if _needs_health_check(spec) and spec.get("healthCheckNodePort"):
        ports.append(spec["healthCheckNodePort"])
    return ports


def cluster_ips_of(spec: dict) -> list[str]:
    if not _has_cluster_ip(spec):
        return []
    return list(spec.get("clusterIPs") or [spec["clusterIP"]])


class _Transaction:
    """What one create or update took (given back on failure) and gives up (released on success)."""

    def __init__(self, allocator: "ServiceAllocator", dry_run: bool) -> None:
        self.allocator = allocator
        self.dry_run = dry_run
        self.taken: dict[str, list[int]] = {"ips": [], "ports": []}
        self.given_up: dict[str, list[int]] = {"ips": [], "ports": []}

    def _range(self, which: str) -> StoredRange:
        return self.allocator.ips if which == "ips" else self.allocator.ports

    async def run(self, which: str, change: Change) -> Any:
        """Apply ``change`` (returns (result, offsets it took)) to the stored range."""
        stored = self._range(which)
        if self.dry_run:
            return (await stored.peek(change))[0]
        result, offsets = await stored.change(change)
        self.taken[which].extend(offsets)
        return result

    async def finish(self, success: bool) -> None:
        if self.dry_run:
            return
        for which, offsets in (self.given_up if success else self.taken).items():
            if offsets:
                await self.allocator.release_offsets(self._range(which), offsets)


class ServiceAllocator:
    """Hands out cluster IPs from one IPv4 or IPv6 range and node ports from 30000-32767."""

    def __init__(self, storage: Storage, cidr: str = DEFAULT_SERVICE_CIDR, reactor: Optional[IReactorTime] = None) -> None:
        self.ip_range = IPRange(cidr)
        self.port_range = PortRange()
        self.family = self.ip_range.family
        self.ips = StoredRange(storage, SERVICE_IPS_KEY, "serviceipallocations", self.ip_range.spec,
                               self.ip_range.size, self.ip_range.reserved, reactor)
        self.ports = StoredRange(storage, NODE_PORTS_KEY, "servicenodeportallocations", self.port_range.spec,
                                 self.port_range.size, self.port_range.reserved, reactor)

    @property
    def first_ip(self) -> str:
        """The address upstream gives the ``kubernetes`` Service."""
        return self.ip_range.first_ip

    # ------------------------------------------------------------ the Store's hooks

    async def begin_create(self, svc: dict, dry_run: bool) -> Optional[Finish]:
        spec = svc.get("spec")
        if not isinstance(spec, dict):
            return None
        name = (svc.get("metadata") or {}).get("name") or ""
        self._check_families(name, spec, None)
        txn = _Transaction(self, dry_run)
        try:
            await self._cluster_ip(name, spec, txn)
            await self._node_ports(name, spec, {}, txn)
        except BaseException:
            await txn.finish(False)
            raise
        return txn.finish

    async def begin_update(self, new: dict, old: dict, dry_run: bool) -> Optional[Finish]:
        spec, old_spec = new.get("spec"), old.get("spec") or {}
        if not isinstance(spec, dict):
            return None
        name = (new.get("metadata") or {}).get("name") or ""
        self._check_families(name, spec, old_spec)
        txn = _Transaction(self, dry_run)
        try:
            if _kind(spec) == "ExternalName":
                self._drop_ip_fields(spec)
                txn.given_up["ips"].extend(self._ip_offsets(old_spec))
            elif _kind(old_spec) == "ExternalName" or not (old_spec.get("clusterIPs") or old_spec.get("clusterIP")):
                await self._cluster_ip(name, spec, txn)
            else:  # the address cannot change (validated before): keep the fields complete
                requested = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
                self._set_ip_fields(spec, requested or old_spec.get("clusterIP"))
            await self._node_ports(name, spec, old_spec, txn)
        except BaseException:
            await txn.finish(False)
            raise
        return txn.finish

    async def release(self, svc: dict) -> None:
        """Give back everything a deleted Service held."""
        spec = svc.get("spec") or {}
        if offsets := self._ip_offsets(spec):
            await self.release_offsets(self.ips, offsets)
        if offsets := self._port_offsets(node_ports_of(spec)):
            await self.release_offsets(self.ports, offsets)

    async def release_offsets(self, stored: StoredRange, offsets: list[int]) -> None:
        def give_back(bitmap: AllocationBitmap) -> tuple[None, list[int]]:
            for offset in offsets:
                bitmap.release(offset)
            return None, []
        try:
            await stored.change(give_back)
        except Exception as e:  # the repair frees what stays allocated without an owner
            log.warn("releasing {n} {resource} failed: {err}", n=len(offsets), resource=stored.resource, err=e)

    # ------------------------------------------------------------ cluster IPs

    def _ip_offsets(self, spec: dict) -> list[int]:
        return [o for o in (self.ip_range.offset_of(ip) for ip in cluster_ips_of(spec)) if o is not None]

    def _port_offsets(self, ports: list[int]) -> list[int]:
        return [o for o in (self.port_range.offset_of(p) for p in ports) if o is not None]

    @staticmethod
    def _drop_ip_fields(spec: dict) -> None:
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            spec.pop(key, None)

    def _set_ip_fields(self, spec: dict, ip: Optional[str]) -> None:
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
        if not spec.get("ipFamilyPolicy"):
            headless_no_selector = ip == "None" and not spec.get("selector")
            spec["ipFamilyPolicy"] = "RequireDualStack" if headless_no_selector else "SingleStack"
        if not spec.get("ipFamilies"):
            spec["ipFamilies"] = [self.family]

    def _check_families(self, name: str, spec: dict, old_spec: Optional[dict]) -> None:
        """Fill and check the IP family fields before anything is allocated (422 when they cannot be served)."""
        if _kind(spec) != "ExternalName":
            if causes := self._init_ip_families(spec, old_spec):
                raise errors.invalid("Service", "", name, causes)

    def _init_ip_families(self, spec: dict, old_spec: Optional[dict]) -> list[Cause]:
        """upstream's initIPFamilyFields on a single-family cluster."""
        if spec.get("ipFamilyPolicy") is None:
            if old_spec is not None and old_spec.get("ipFamilyPolicy") is not None:
                spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"]
            elif spec.get("clusterIP") == "None" and not spec.get("selector"):
                spec["ipFamilyPolicy"] = "RequireDualStack"
            else:
                spec["ipFamilyPolicy"] = "SingleStack"
        causes = validate_cluster_ips_related_fields(spec)
        if causes:
            return causes
        policy = spec["ipFamilyPolicy"]
        ips = list(spec.get("clusterIPs") or [])
        families = as_list(spec.get("ipFamilies"))
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
                    causes.append(Cause(errors.INVALID, f"Invalid value: {gorepr.string_slice(ips)}: {family} is not "
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

    async def _cluster_ip(self, name: str, spec: dict, txn: _Transaction) -> None:
        if _kind(spec) == "ExternalName":
            self._drop_ip_fields(spec)
            return
        requested = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
        if requested == "None":
            self._set_ip_fields(spec, requested)
            return
        if requested:
            offset = self.ip_range.offset_of(requested)
            shown = gorepr.string_slice(spec.get("clusterIPs") or [requested])

            def invalid(why: str) -> errors.StatusError:
                return errors.invalid("Service", "", name, [Cause(
                    errors.INVALID, f"Invalid value: {shown}: failed to allocate IP {requested}: {why}",
                    "spec.clusterIPs")])
            if offset is None:
                raise invalid(self.ip_range.not_in_range(requested))
            if txn.dry_run:  # upstream's dry run checks the range only
                self._set_ip_fields(spec, requested)
                return
            static = offset

            def take(bitmap: AllocationBitmap) -> tuple[int, list[int]]:
                if not bitmap.allocate(static):
                    raise invalid(ALREADY_ALLOCATED_IP)
                return static, [static]
            await txn.run("ips", take)
        elif txn.dry_run:  # upstream's dry run answers with the network address
            requested = str(self.ip_range.network.network_address)
        else:
            def take_next(bitmap: AllocationBitmap) -> tuple[int, list[int]]:
                found = bitmap.allocate_next()
                if found is None:
                    raise errors.internal_error("failed to allocate a serviceIP: range is full")
                return found, [found]
            requested = self.ip_range.value_at(await txn.run("ips", take_next))
        self._set_ip_fields(spec, requested)

    # ------------------------------------------------------------ node ports

    async def _node_ports(self, name: str, spec: dict, old_spec: dict, txn: _Transaction) -> None:
        """Node ports of the ports and the health check: upstream's initNodePorts on create,
        updateNodePorts on update (``old_spec`` not empty)."""
        ports = [p for p in spec.get("ports") or () if isinstance(p, dict)]
        old_held = set(node_ports_of(old_spec)) if old_spec else set()
        allocate = _should_allocate_node_ports(spec)
        wanted_hc = _needs_health_check(spec)
        hc_requested = spec.get("healthCheckNodePort") or 0
        if not wanted_hc:
            spec.pop("healthCheckNodePort", None)
        keep_hc = wanted_hc and _needs_health_check(old_spec) and bool(old_spec.get("healthCheckNodePort"))
        port_range = self.port_range
        dry_run = txn.dry_run

        def plan(bitmap: AllocationBitmap) -> tuple[tuple[dict[int, int], int], list[int]]:
            """(nodePort per port index, health check port), offsets taken; raises on the first problem."""
            taken: list[int] = []
            assigned: dict[int, int] = {}
            by_port: dict[Any, int] = {}

            def take(value: Any, path: str) -> None:
                offset = port_range.offset_of(value)
                if offset is None:
                    raise errors.invalid("Service", "", name, [errors.field_invalid(
                        path, value, port_range.not_in_range(value))])
                if not bitmap.allocate(offset):
                    raise errors.invalid("Service", "", name, [errors.field_invalid(
                        path, value, ALREADY_ALLOCATED_PORT)])
                taken.append(offset)

            def take_next() -> int:
                if dry_run:  # upstream's stand-in: one above the highest port of this operation, or 32769
                    values = [port_range.value_at(o) for o in taken]
                    stand_in = (max(values) if values else 32768) + 1
                    taken.append(stand_in - port_range.low)
                    return stand_in
                offset = bitmap.allocate_next()
                if offset is None:
                    raise errors.internal_error("failed to allocate a nodePort: range is full")
                taken.append(offset)
                return port_range.value_at(offset)

            for i, port in enumerate(ports):
                requested = port.get("nodePort") or 0
                if not requested and not allocate:
                    continue
                path = f"spec.ports[{i}].nodePort"
                if old_spec:  # update: keep what the Service held, take what is new
                    if not requested:
                        assigned[i] = take_next()
                        continue
                    offset = port_range.offset_of(requested)
                    if requested not in old_held and (offset is None or offset not in taken):
                        take(requested, path)
                    assigned[i] = requested
                    continue
                # create: ports with the same number (TCP and UDP 53) share one node port
                shared = by_port.get(port.get("port"))
                if shared is None:
                    first = next((p.get("nodePort") for p in ports
                                  if p.get("port") == port.get("port") and p.get("nodePort")), 0)
                    if first:
                        take(first, path)
                        assigned[i] = first
                    else:
                        assigned[i] = take_next()
                    by_port[port.get("port")] = assigned[i]
                elif requested and requested != shared:
                    take(requested, path)
                    assigned[i] = requested
                else:
                    assigned[i] = shared
            health = 0
            if wanted_hc and not keep_hc:
                if hc_requested:
                    offset = port_range.offset_of(hc_requested)
                    if offset is None or not bitmap.allocate(offset):
                        why = port_range.not_in_range(hc_requested) if offset is None else ALREADY_ALLOCATED_PORT
                        raise errors.internal_error(f"failed to allocate requested HealthCheck NodePort "
                                                    f"{hc_requested}: {why}")
                    taken.append(offset)
                    health = hc_requested
                else:
                    health = take_next()
            return (assigned, health), taken

        def needs_work(port: dict) -> bool:
            if not port.get("nodePort"):
                return allocate
            return not old_spec or port["nodePort"] not in old_held
        if (wanted_hc and not keep_hc) or any(needs_work(p) for p in ports):
            assigned, health = await txn.run("ports", plan)
            for i, value in assigned.items():
                ports[i]["nodePort"] = value
            if health:
                spec["healthCheckNodePort"] = health
        if old_spec:
            still_held = set(node_ports_of(spec))
            txn.given_up["ports"].extend(self._port_offsets([p for p in old_held if p not in still_held]))

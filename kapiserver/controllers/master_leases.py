"""The endpoints of the ``kubernetes`` Service: every live API server (upstream's lease endpoint reconciler).

Each server keeps a record under ``/masterleases/`` with a storage TTL of 15 s
and renews it every 10 s (``kubernetes_service.py``); a server that dies
stops renewing and its record expires.  Reconciling lists the records and
writes the ``kubernetes`` Endpoints in ``default`` (labelled
``endpointslice.kubernetes.io/skip-mirror: "true"``) and the EndpointSlice
``kubernetes`` (label ``kubernetes.io/service-name``) to list exactly those
servers.  A server that shuts down cleanly removes its record and reconciles
at once.

Upstream keys a record by the server's IP (``/registry/masterleases/<ip>``)
and assumes every server serves one port.  Here the key is ``<ip>:<port>``
and the record carries the port, so several servers on one host (different
ports) each appear: servers on one port share one subset and one
EndpointSlice, as upstream; each further port gets its own subset and a
slice ``kubernetes-<port>``.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Optional

import orjson
from twisted.logger import Logger

from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.store import Store
from kapiserver.storage import interface as st

log = Logger()

LEASE_PREFIX = "/masterleases/"
LEASE_TTL_SECONDS = 15  # upstream's DefaultEndpointReconcilerTTL
SERVICE_NAME = "kubernetes"
NAMESPACE = "default"
PORT_NAME = "https"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_EXTRA_SLICE = re.compile(r"^kubernetes-\d+$")


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


class MasterLeases:
    """The per-server records with a TTL (``/masterleases/<ip>:<port>``)."""

    def __init__(self, storage: st.Storage, ttl: int = LEASE_TTL_SECONDS) -> None:
        self.storage = storage
        self.ttl = ttl

    @staticmethod
    def key(ip: str, port: int) -> str:
        return f"{LEASE_PREFIX}{_host(ip)}:{port}"

    @staticmethod
    def _record(ip: str, port: int) -> bytes:
        return orjson.dumps({"kind": "Endpoints", "apiVersion": "v1", "metadata": {"name": f"{_host(ip)}:{port}"},
                             "subsets": [{"addresses": [{"ip": ip}],
                                          "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}]})

    async def renew(self, ip: str, port: int) -> None:
        """Write this server's record with a fresh TTL."""
        key, value = self.key(ip, port), self._record(ip, port)
        lease = await self.storage.grant_lease(self.ttl)
        for _ in range(5):
            current = await self.storage.get(key)
            try:
                if current is None:
                    await self.storage.create(key, value, lease=lease)
                else:
                    await self.storage.update(key, value, current.mod_revision, lease=lease)
                return
            except (st.KeyExistsError, st.ConflictError, st.KeyNotFoundError):
                continue  # another writer (this server's previous life) in between

    async def remove(self, ip: str, port: int) -> None:
        try:
            await self.storage.delete(self.key(ip, port))
        except st.KeyNotFoundError:
            pass

    async def count(self) -> int:
        """How many API servers are alive now."""
        return len(await self.servers())

    async def servers(self) -> list[tuple[str, int]]:
        """(ip, port) of every live server."""
        found = []
        for kv in (await self.storage.list(LEASE_PREFIX)).items:
            try:
                subset = orjson.loads(kv.value)["subsets"][0]
                found.append((subset["addresses"][0]["ip"], int(subset["ports"][0]["port"])))
            except (ValueError, KeyError, IndexError, TypeError):
                log.warn("ignoring a malformed API server lease record at {key}", key=kv.key)
        return found


def desired_subsets(servers: list[tuple[str, int]]) -> list[dict]:
    """The Endpoints subsets listing ``servers``: one subset per port, addresses sorted."""
    by_port: dict[int, set[str]] = {}
    for ip, port in servers:
        by_port.setdefault(port, set()).add(ip)
    return [{"addresses": [{"ip": ip} for ip in sorted(ips, key=lambda a: (ipaddress.ip_address(a).version,
                                                                             ipaddress.ip_address(a)))],
             "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}
            for port, ips in sorted(by_port.items())]


def slice_for(name: str, subset: Optional[dict]) -> dict:
    """The EndpointSlice mirroring one subset (upstream's endpointSliceFromEndpoints)."""
    addresses = [a["ip"] for a in (subset or {}).get("addresses") or ()]
    ipv6 = bool(addresses) and all(ipaddress.ip_address(a).version == 6 for a in addresses)
    address_type = "IPv6" if ipv6 else "IPv4"
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: SERVICE_NAME}},
            "addressType": address_type,
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses
                          if (ipaddress.ip_address(a).version == 6) == ipv6],
            "ports": [dict(p) for p in (subset or {}).get("ports") or ()]}


class EndpointsReconciler:
    """Writes the ``kubernetes`` Endpoints and EndpointSlices from the lease records."""

    def __init__(self, endpoints: Store, slices: Store, leases: MasterLeases) -> None:
        self.endpoints = endpoints
        self.slices = slices
        self.leases = leases

    async def reconcile(self, ip: str, port: int, removing: bool = False) -> None:
        """Renew (or, ``removing``, drop) this server's record, then make the endpoints list the live ones."""
        if removing:
            await self.leases.remove(ip, port)
        else:
            await self.leases.renew(ip, port)
        servers = await self.leases.servers()
        if not servers and not removing:
            raise RuntimeError("no API server IP addresses were listed in storage, refusing to erase all "
                               "endpoints for the kubernetes Service")
        subsets = desired_subsets(servers)
        await self._write_endpoints(subsets)
        await self._write_slices(subsets)

    async def _write_endpoints(self, subsets: list[dict]) -> None:
        try:
            current: Optional[dict] = await self.endpoints.get(NAMESPACE, SERVICE_NAME)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            current = None
        if current is None:
            try:
                await self.endpoints.create(NAMESPACE, {
                    "apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE, "labels": {SKIP_MIRROR: "true"}},
                    "subsets": subsets})
                log.info("created the endpoints of the kubernetes service: {servers}", servers=_describe(subsets))
            except errors.StatusError as e:
                if e.code != 409:
                    raise
            return
        labels = (current.get("metadata") or {}).get("labels") or {}
        if (current.get("subsets") or []) == subsets and labels.get(SKIP_MIRROR) == "true":
            return

        def change(obj: Optional[dict]) -> dict:
            assert obj is not None
            obj.setdefault("metadata", {}).setdefault("labels", {})[SKIP_MIRROR] = "true"
            obj["subsets"] = subsets
            return obj
        await self.endpoints.guaranteed_update(NAMESPACE, SERVICE_NAME, change)
        log.info("reset the endpoints of the kubernetes service to {servers}", servers=_describe(subsets))

    async def _write_slices(self, subsets: list[dict]) -> None:
        wanted = {SERVICE_NAME: slice_for(SERVICE_NAME, subsets[0] if subsets else None)}
        for subset in subsets[1:]:
            name = f"{SERVICE_NAME}-{subset['ports'][0]['port']}"
            wanted[name] = slice_for(name, subset)
        for name, desired in wanted.items():
            await self._write_slice(name, desired)
        selector = ListOptions(parse_label_selector(f"{SERVICE_NAME_LABEL}={SERVICE_NAME}"), parse_field_selector(""))
        for item in (await self.slices.list(NAMESPACE, selector))["items"]:
            name = item["metadata"]["name"]
            if name not in wanted and _EXTRA_SLICE.match(name):
                try:
                    await self.slices.delete(NAMESPACE, name, DeleteOptions())
                except errors.StatusError as e:
                    if e.code != 404:
                        raise

    async def _write_slice(self, name: str, desired: dict) -> None:
        try:
            current: Optional[dict] = await self.slices.get(NAMESPACE, name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            current = None
        if current is not None and current.get("addressType") != desired["addressType"]:
            await self.slices.delete(NAMESPACE, name, DeleteOptions())  # addressType is immutable
            current = None
        if current is None:
            try:
                await self.slices.create(NAMESPACE, desired)
            except errors.StatusError as e:
                if e.code != 409:
                    raise
            return
        same = all(current.get(k) == desired[k] for k in ("endpoints", "ports")) and \
            (current.get("metadata") or {}).get("labels") == desired["metadata"]["labels"]
        if same:
            return

        def change(obj: Optional[dict]) -> dict:
            assert obj is not None
            obj.setdefault("metadata", {})["labels"] = dict(desired["metadata"]["labels"])
            obj["endpoints"], obj["ports"] = desired["endpoints"], desired["ports"]
            return obj
        await self.slices.guaranteed_update(NAMESPACE, name, change)


def _describe(subsets: list[dict]) -> str:
    return ", ".join(f"{_host(a['ip'])}:{s['ports'][0]['port']}" for s in subsets for a in s["addresses"]) or "none"

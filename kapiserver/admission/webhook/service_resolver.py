"""Where a webhook's ``clientConfig.service`` is (upstream's endpoint service resolver, the
``--enable-aggregator-routing`` semantics).

The Service must exist and be of type ClusterIP, NodePort or LoadBalancer and
have the port; the call goes to a ready address of its endpoints with the
matching port name: the EndpointSlices labelled
``kubernetes.io/service-name`` first, else the Endpoints object.  kapiserver
runs no service proxy, so a cluster IP would lead nowhere.  Objects are read
from the watch cache (memory), not from storage, per call.
"""
from __future__ import annotations

import random
from typing import Any, Callable

from kapiserver.machinery import errors

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_ROUTABLE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


class ServiceResolver:
    def __init__(self, store: Callable[[str, str, str], Any]) -> None:
        self._store = store

    async def resolve(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        """``(address, port)`` of one ready endpoint; raises StatusError worded as upstream."""
        services = self._store("", "v1", "services")
        service = await services.get(namespace, name, resource_version="0")
        spec = service.get("spec") or {}
        svc_type = spec.get("type") or "ClusterIP"
        if svc_type not in _ROUTABLE_TYPES:
            raise errors.StatusError(500, "", f'unsupported service type "{svc_type}"')
        svc_port = next((p for p in spec.get("ports") or () if p.get("port") == port), None)
        if svc_port is None:
            raise errors.service_unavailable(f'no service port {port} found for service "{name}"')
        port_name = svc_port.get("name") or ""
        candidates = await self._from_slices(namespace, name, port_name)
        if candidates is None:
            candidates = await self._from_endpoints(namespace, name, port_name)
        if not candidates:
            raise errors.service_unavailable(f'no endpoints available for service "{name}"')
        return random.choice(candidates)

    async def _from_slices(self, namespace: str, name: str, port_name: str) -> Any:
        """Ready addresses of the Service's EndpointSlices; None when it has none."""
        from kapiserver.machinery.labels import parse_label_selector
        from kapiserver.machinery.fields import parse_field_selector
        from kapiserver.registry.options import ListOptions
        slices = self._store("discovery.k8s.io", "v1", "endpointslices")
        listed = await slices.list(namespace, ListOptions(parse_label_selector(f"{SERVICE_NAME_LABEL}={name}"),
                                                          parse_field_selector(""), resource_version="0"))
        items = listed.get("items") or []
        if not items:
            return None
        out: list[tuple[str, int]] = []
        for item in items:
            port = next((p.get("port") for p in item.get("ports") or () if (p.get("name") or "") == port_name), None)
            if not isinstance(port, int):
                continue
            for endpoint in item.get("endpoints") or ():
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                out.extend((address, port) for address in endpoint.get("addresses") or ())
        return out

    async def _from_endpoints(self, namespace: str, name: str, port_name: str) -> list[tuple[str, int]]:
        endpoints = self._store("", "v1", "endpoints")
        try:
            found = await endpoints.get(namespace, name, resource_version="0")
        except errors.StatusError as e:
            if e.code == 404:
                return []
            raise
        out: list[tuple[str, int]] = []
        for subset in found.get("subsets") or ():
            port = next((p.get("port") for p in subset.get("ports") or () if (p.get("name") or "") == port_name),
                        None)
            if not isinstance(port, int):
                continue
            out.extend((a.get("ip"), port) for a in subset.get("addresses") or () if a.get("ip"))
        return out

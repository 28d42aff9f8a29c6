"""Where an APIService's Service is served: its port, then a ready address of its EndpointSlices.

Like kube-apiserver with ``--enable-aggregator-routing``, requests go to an
endpoint, not to the cluster IP (nothing here routes cluster IPs).  The
Services and EndpointSlices come from informers kept on every server, so a
proxied request costs no storage read.  EndpointSlice addresses are validated
on write (no loopback, link-local or unspecified address can be stored), so
an endpoint never points back at this machine's own services.
"""
from __future__ import annotations

import random
from typing import Callable, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.registry.informer import Informer
from kapiserver.registry.store import Store

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class ResolveError(Exception):
    """The Service cannot be reached: ``reason`` is upstream's availability reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class ServiceResolver:
    def __init__(self, services: Store, endpointslices: Store, reactor: IReactorTime,
                 on_change: Optional[Callable[[str, str], None]] = None) -> None:
        self.on_change = on_change  # (namespace, service name) whenever its Service or a slice of it changes
        self.services: dict[tuple[str, str], dict] = {}
        # (namespace, service name) -> slice name -> slice
        self.slices: dict[tuple[str, str], dict[str, dict]] = {}
        self._slice_owner: dict[tuple[str, str], tuple[str, str]] = {}
        self.informers = [Informer(services, self._on_service, reactor),
                          Informer(endpointslices, self._on_slice, reactor)]

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    @property
    def synced(self):
        from twisted.internet import defer
        return defer.gatherResults([i.synced for i in self.informers])

    def _notify(self, key: tuple[str, str]) -> None:
        if self.on_change is not None:
            self.on_change(*key)

    def _on_service(self, event_type: str, obj: dict) -> None:
        md = obj.get("metadata") or {}
        key = (md.get("namespace", ""), md.get("name", ""))
        if event_type == "DELETED":
            self.services.pop(key, None)
        else:
            self.services[key] = obj
        self._notify(key)

    def _on_slice(self, event_type: str, obj: dict) -> None:
        md = obj.get("metadata") or {}
        namespace, name = md.get("namespace", ""), md.get("name", "")
        previous = self._slice_owner.pop((namespace, name), None)
        if previous is not None:
            self.slices.get(previous, {}).pop(name, None)
            self._notify(previous)
        service = (md.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if event_type == "DELETED" or not service:
            return
        key = (namespace, service)
        self.slices.setdefault(key, {})[name] = obj
        self._slice_owner[(namespace, name)] = key
        if key != previous:
            self._notify(key)

    # ------------------------------------------------------------ lookups

    def service_port(self, namespace: str, name: str, port: int) -> tuple[dict, str]:
        """The Service and the name of its port ``port``; ResolveError with upstream's reasons."""
        service = self.services.get((namespace, name))
        if service is None:
            raise ResolveError("ServiceNotFound", f'service/{name} in "{namespace}" is not present')
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return service, ""
        for entry in spec.get("ports") or ():
            if entry.get("port") == port:
                return service, entry.get("name") or ""
        raise ResolveError("ServicePortError", f'service/{name} in "{namespace}" is not listening on port {port}')

    def endpoints(self, namespace: str, name: str, port_name: str) -> list[tuple[str, int]]:
        """Every ready (address, port) of the Service's EndpointSlices for the named port."""
        found: list[tuple[str, int]] = []
        for endpoint_slice in self.slices.get((namespace, name), {}).values():
            ports = [p.get("port") for p in endpoint_slice.get("ports") or ()
                     if (p.get("name") or "") == port_name and isinstance(p.get("port"), int)]
            if not ports:
                continue
            for endpoint in endpoint_slice.get("endpoints") or ():
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or ():
                    found.extend((address, p) for p in ports)
        return found

    def resolve(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        """One ready endpoint (address, port) of the Service's port ``port``, chosen at random."""
        service, port_name = self.service_port(namespace, name, port)
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            raise ResolveError("ServiceNotFound", f'service/{name} in "{namespace}" is an ExternalName Service, '
                                                  f'which kapiserver does not route to')
        candidates = self.endpoints(namespace, name, port_name)
        if not candidates:
            raise ResolveError("MissingEndpoints", f'endpoints for service/{name} in "{namespace}" have no addresses '
                                                   f'with port name "{port_name}"')
        return random.choice(candidates)

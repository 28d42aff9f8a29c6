"""The aggregator (kube-aggregator in process): APIServices, their controllers and the proxy.

It serves ``apiregistration.k8s.io`` from the first link of the delegation
chain and runs, on every server as kube-apiserver runs them:

* APIService registration: the routing table (``apiservice_registration.py``);
* autoregistration of the built-in group versions and CRD registration
  (``autoregister.py``, ``crd_registration.py``);
* availability (``availability.py``), which also fetches the extension
  servers' resource lists for discovery;
* OpenAPI aggregation (``openapi_aggregation.py``).

None is leader-only: upstream runs each in every kube-apiserver, and each
write here is a compare-and-swap made only when something changed.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.aggregator import priorities
from kapiserver.aggregator.apiservice_registration import APIServiceRegistration
from kapiserver.aggregator.autoregister import AutoRegisterController, local_apiservice
from kapiserver.aggregator.availability import AvailabilityController
from kapiserver.aggregator.crd_registration import CRDRegistrationController
from kapiserver.aggregator.discovery import RemoteResources
from kapiserver.aggregator.openapi_aggregation import OpenAPIAggregationController
from kapiserver.aggregator.proxy import ProxyResource
from kapiserver.aggregator.service_resolver import ServiceResolver
from kapiserver.aggregator.transport import ExtensionTransport, load_client_certificate
from kapiserver.apis.apiregistration import apiservices
from kapiserver.registry.groups import APIGroupSet
from kapiserver.registry.admission import AdmissionChain
from kapiserver.registry.leases import LeaseReuser
from kapiserver.registry.store import Store
from kapiserver.server.healthz import HealthChecks
from kapiserver.storage.interface import Storage

log = Logger()
AUTOREGISTER_CHECK = "autoregister-completion"


class AggregatorServerDeps(NamedTuple):
    """What the aggregator needs of the server that runs it (``app/apiserver.py``)."""

    # the proxy connects with it (TCP, TLS); the controllers time with it
    reactor: IReactorTime
    storage: Storage
    admission: AdmissionChain
    leases: LeaseReuser
    # apiregistration.k8s.io, served by the aggregator link: the APIService kind is added to it
    groups: APIGroupSet
    # the built-in groups: each group version gets a local APIService
    kube_groups: APIGroupSet
    # any served kind's Store: ``store(group, version, plural)`` (Services, EndpointSlices)
    store: Callable[[str, str, str], Store]
    # the apiextensions server's CRD Store (each CRD's versions get an APIService)
    crd_store: Store
    health: HealthChecks
    # the front-proxy client certificate and key presented to extension servers
    proxy_client_cert: str
    proxy_client_key: str


class Aggregator:
    def __init__(self, deps: AggregatorServerDeps) -> None:
        self.deps = deps
        reactor = deps.reactor
        self.rtype = apiservices.resource_type()
        self.store = Store(self.rtype, deps.storage, deps.admission, deps.leases)
        deps.groups.add(self.rtype, self.store)
        self.registration = APIServiceRegistration(self.store, reactor)
        self.resolver = ServiceResolver(deps.store("", "v1", "services"),
                                        deps.store("discovery.k8s.io", "v1", "endpointslices"), reactor,
                                        on_change=self._service_changed)
        self.transport = ExtensionTransport(reactor, load_client_certificate(deps.proxy_client_cert,
                                                                             deps.proxy_client_key))
        # extension servers' resource lists by group version, and a counter of their changes
        self.remote_resources: RemoteResources = {}
        self.generation = 0
        self.openapi_parts: tuple[list[dict], dict[str, bytes]] = ([], {})
        self.openapi_generation = 0
        self.autoregister: Optional[AutoRegisterController] = None
        self.crd_registration: Optional[CRDRegistrationController] = None
        self.availability: Optional[AvailabilityController] = None
        self.openapi: Optional[OpenAPIAggregationController] = None
        self.proxy = ProxyResource(self.registration, self.resolver, self.transport, self._unreachable)
        self.registration.listeners.append(self._apiservice_changed)
        self._registered_builtins: list[str] = []
        deps.health.add(AUTOREGISTER_CHECK, self._autoregister_check, kinds=("readyz",))

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        reactor = self.deps.reactor
        self.resolver.start()
        self.registration.start()
        await self.resolver.synced
        await self.registration.synced
        self.autoregister = AutoRegisterController(self.store, reactor)
        self.crd_registration = CRDRegistrationController(self.deps.crd_store, self.autoregister, reactor)
        # the CRDs' versions are known before the first sync, so it does not delete their APIServices
        self.crd_registration.start()
        await self.crd_registration.synced
        for group, version in self.builtin_group_versions():
            group_priority, version_priority = priorities.BUILTIN_PRIORITIES[(group, version)]
            self.autoregister.add_on_start(local_apiservice(group, version, group_priority, version_priority))
            self._registered_builtins.append(apiservices.name_for(group, version))
        self.autoregister.start()
        self.availability = AvailabilityController(self.store, self.registration, self.resolver, self.transport,
                                                   reactor, on_resources=self._resources)
        self.availability.start()
        self.openapi = OpenAPIAggregationController(self.registration, self.resolver, self.transport, reactor,
                                                    self._openapi_changed)
        self.openapi.start()

    async def stop(self) -> None:
        for part in (self.openapi, self.availability, self.autoregister, self.crd_registration):
            if part is not None:
                part.stop()
        self.registration.stop()
        self.resolver.stop()
        await self.transport.close()

    def builtin_group_versions(self) -> list[tuple[str, str]]:
        """The group versions served here that upstream registers at start (kube and apiextensions links)."""
        served = {(t.group, t.version) for t in self.deps.kube_groups.types()}
        crds = self.deps.crd_store.rtype
        served.add((crds.group, crds.version))
        return sorted(gv for gv in served if priorities.builtin_priority(*gv) is not None)

    def _autoregister_check(self) -> None:
        """upstream's autoregister-completion: every built-in APIService was seen available."""
        missing = [n for n in self._registered_builtins
                   if not apiservices.is_available(self.registration.apiservices.get(n) or {})]
        if self.autoregister is None or missing:
            raise RuntimeError(f"missing APIService: {missing}")

    # ------------------------------------------------------------ events

    def _service_changed(self, namespace: str, name: str) -> None:
        if self.availability is not None:
            self.availability.service_changed(namespace, name)

    def _unreachable(self, name: str) -> None:
        if self.availability is not None:
            self.availability.recheck(name)

    def _apiservice_changed(self, name: str) -> None:
        remote = {(t.group, t.version) for t in self.registration.remote_targets()}
        for gv in [gv for gv in self.remote_resources if gv not in remote]:
            del self.remote_resources[gv]
        self.generation += 1

    def _resources(self, gv: tuple[str, str], document: Optional[dict]) -> None:
        if document is None:
            if self.remote_resources.pop(gv, None) is not None:
                self.generation += 1
        elif self.remote_resources.get(gv) != document:
            self.remote_resources[gv] = document
            self.generation += 1

    def _openapi_changed(self, v2_parts: list[dict], v3_documents: dict[str, bytes]) -> None:
        self.openapi_parts = (v2_parts, v3_documents)
        self.openapi_generation += 1

    def apiservices(self) -> list[dict[str, Any]]:
        return self.registration.all()

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

from typing import TYPE_CHECKING, Any, Optional

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
from kapiserver.registry.store import Store
from kapiserver.server.certs import credential_files

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.server.apiserver import APIServer

log = Logger()
AUTOREGISTER_CHECK = "autoregister-completion"


class Aggregator:
    def __init__(self, api: "APIServer") -> None:
        self.api = api
        reactor = api.reactor
        self.rtype = apiservices.resource_type()
        self.store = Store(self.rtype, api.storage, api.admission, api.leases)
        api.aggregator_groups.add(self.rtype, self.store)
        self.registration = APIServiceRegistration(self.store, reactor)
        self.resolver = ServiceResolver(api.store("", "v1", "services"),
                                        api.store("discovery.k8s.io", "v1", "endpointslices"), reactor,
                                        on_change=self._service_changed)
        files = credential_files(api.config)
        self.transport = ExtensionTransport(reactor, load_client_certificate(files.proxy_client_cert,
                                                                             files.proxy_client_key))
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
        try:
            api.health.add(AUTOREGISTER_CHECK, self._autoregister_check, kinds=("readyz",))
        except ValueError:
            pass  # a second server on the same health registry (tests)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        reactor = self.api.reactor
        self.resolver.start()
        self.registration.start()
        await self.resolver.synced
        await self.registration.synced
        self.autoregister = AutoRegisterController(self.store, reactor)
        self.crd_registration = CRDRegistrationController(self.api.apiextensions.store, self.autoregister, reactor)
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
        served = {(t.group, t.version) for t in self.api.kube_groups.types()}
        served.add((self.api.apiextensions.rtype.group, self.api.apiextensions.rtype.version))
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

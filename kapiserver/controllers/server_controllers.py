"""What one API server runs in the background, and which of it only the leader runs.

Every server (as every kube-apiserver does):

* the repair of the Service IP and node port bitmaps (``service_repair.py``);
* the ``kubernetes`` Service and its endpoints, each server renewing its own
  record (``kubernetes_service.py``);
* serving the stored CRDs (``apiextensions/server.py``, started by the API server).

Only the leader of the ``controllers.leader_elect_resource_*`` Lease (as
kube-controller-manager's controllers; all of them on every server when
``controllers.leader_elect`` is false):

* the namespace controller and the namespace defaults (ServiceAccount ``default``,
  ``kube-root-ca.crt``);
* the CRD status and finalizing controller;
* the garbage collector.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.logger import Logger

from kapiserver.apis.core.service_allocator import ServiceAllocator
from kapiserver.controllers.garbage_collector import GarbageCollector
from kapiserver.controllers.kubernetes_service import KubernetesServiceController
from kapiserver.controllers.leader_election import LeaderElector, default_identity
from kapiserver.controllers.manager import ControllerManager
from kapiserver.controllers.master_leases import EndpointsReconciler, MasterLeases
from kapiserver.controllers.namespace import NamespaceController
from kapiserver.controllers.namespace_defaults import NamespaceDefaultsController
from kapiserver.controllers.service_repair import READY_CHECK, ServiceRepair
from kapiserver.server.advertise import advertise_address
from kapiserver.server.config import setting as _setting

log = Logger()


class ServerControllers:
    def __init__(self, api: Any) -> None:
        self.api = api
        config, reactor = api.config, api.reactor
        services = api.store("", "v1", "services")
        allocator: ServiceAllocator = services.strategy.allocator
        self.repair = ServiceRepair(allocator, services, reactor)
        try:
            api.health.add(READY_CHECK, self.repair.check, kinds=("readyz",))
        except ValueError:
            pass  # a second server on the same health registry (tests)
        self.advertise_address = advertise_address(_setting(config, "advertise_address", ""),
                                                   _setting(config, "bind_address", "127.0.0.1"))
        reconciler = EndpointsReconciler(api.store("", "v1", "endpoints"),
                                         api.store("discovery.k8s.io", "v1", "endpointslices"),
                                         MasterLeases(api.storage))
        self.kubernetes_service = KubernetesServiceController(
            services, reconciler, allocator.first_ip, self.advertise_address, self._secure_port, reactor)
        namespaces = api.store("", "v1", "namespaces")
        self.manager = ControllerManager([
            lambda: NamespaceController(namespaces, api.all_stores, reactor),
            lambda: NamespaceDefaultsController(namespaces, api.store("", "v1", "serviceaccounts"),
                                                api.store("", "v1", "configmaps"), api.ca_pem, reactor),
            api.apiextensions.status_controller,
            lambda: GarbageCollector(api.all_stores,
                                     lambda: (api.kube_groups.generation, api.crd_groups.generation), reactor),
        ])
        self.elector: Optional[LeaderElector] = None
        if _setting(config, "controllers.leader_elect", True):
            self.elector = LeaderElector(
                api.store("coordination.k8s.io", "v1", "leases"),
                _setting(config, "controllers.leader_elect_resource_namespace", "kube-system"),
                _setting(config, "controllers.leader_elect_resource_name", "kapiserver-controllers"),
                default_identity(), reactor, self.manager.start, self.manager.stop,
                lease_duration=float(_setting(config, "controllers.leader_elect_lease_duration_seconds", 15)),
                renew_deadline=float(_setting(config, "controllers.leader_elect_renew_deadline_seconds", 10)),
                retry_period=float(_setting(config, "controllers.leader_elect_retry_period_seconds", 2)))

    def _secure_port(self) -> Optional[int]:
        return self.api.secure_port or _setting(self.api.config, "secure_port", None) or None

    async def start(self) -> None:
        """Per-server work first (each first run is awaited), then the leader-only controllers."""
        await self.repair.start()
        await self.kubernetes_service.start()
        if self.elector is not None:
            await self.elector.start()
        else:
            self.manager.start()

    async def stop(self) -> None:
        if self.elector is not None:
            await self.elector.stop()
        self.manager.stop()
        self.repair.stop()
        await self.kubernetes_service.stop()

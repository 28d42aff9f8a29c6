"""What one API server runs in the background, and which of it only the leader runs.

Every server (as every kube-apiserver does):

* the repair of the Service IP and node port bitmaps (``service_repair.py``);
* the ``kubernetes`` Service and its endpoints, each server renewing its own
  record (``kubernetes_service.py``);
* serving the stored CRDs (``apiextensions/server.py``, started by the API server);
* the ``extension-apiserver-authentication`` ConfigMap, each server adding its trust
  (``cluster_authentication_trust.py``);
* the aggregator's controllers: APIService registration, autoregistration, CRD
  registration, availability and OpenAPI aggregation (``aggregator/server.py``, started by
  the API server, as kube-apiserver runs them in every instance).
* the built-in PriorityClasses (``system_priority_classes.py``), the legacy token
  tracking ConfigMap (``legacy_token_tracking.py``) and this server's identity Lease
  (``apiserver_identity.py``).
* the API Priority and Fairness bootstrap FlowSchemas and PriorityLevelConfigurations
  (``apf_bootstrap.py``; their consumer, the priority-and-fairness filter's
  configuration, is started by the API server).

Only the leader of the ``controllers.leader_elect_resource_*`` Lease (all of
them on every server when ``controllers.leader_elect`` is false): the CRD status
and finalizing controller (the apiextensions server's), and those of
kube-controller-manager's controllers that ``controllers.enabled`` /
``controllers.names`` select (``server/controller_names.py``; none when a real
kube-controller-manager runs against this server):

* the namespace controller and the namespace defaults (ServiceAccount ``default``,
  ``kube-root-ca.crt``);
* the garbage collector;
* the tokens controller filling legacy ServiceAccount token Secrets (with a signing key);
* ClusterRole aggregation (``clusterrole_aggregation.py``);
* the CSR signers for ``kubernetes.io/kube-apiserver-client(-kubelet)``, with
  the cluster CA of ``cert_dir`` (when its key is there), and the approver of
  kubelet client certificate requests (``csr_approving.py``);
* the bootstrap token cleaner and the ``cluster-info`` signer (``bootstrap_tokens.py``;
  off unless named, as upstream);
* the ValidatingAdmissionPolicy status controller (given by the API server, which owns the policies);
* the resource quota controller (``resource_quota.py``): ``status.hard`` and ``status.used``;
* the PVC and PV protection controllers (``storage_protection.py``).
"""
from __future__ import annotations

from typing import Awaitable, Callable, Optional, Sequence

from twisted.logger import Logger

from kapiserver.apis.core.service_allocator import ServiceAllocator
from kapiserver.apis.deps import RegistryDeps
from kapiserver.controllers.apf_bootstrap import READY_CHECK as APF_BOOTSTRAP_CHECK, APFBootstrapEnsurer
from kapiserver.controllers.apiserver_identity import APIServerIdentityController
from kapiserver.controllers.bootstrap_tokens import BootstrapSigner, TokenCleaner
from kapiserver.controllers.certificate_authority import CertificateAuthority
from kapiserver.controllers.cluster_authentication_trust import ClusterAuthenticationTrustController
from kapiserver.controllers.clusterrole_aggregation import ClusterRoleAggregationController
from kapiserver.controllers.csr_approving import CSRApprovingController
from kapiserver.controllers.csr_signing import CSRSigningController
from kapiserver.controllers.garbage_collector import GarbageCollector
from kapiserver.controllers.kubernetes_service import KubernetesServiceController
from kapiserver.controllers.leader_election import LeaderElector, default_identity
from kapiserver.controllers.legacy_token_tracking import LegacyTokenTrackingController
from kapiserver.controllers.manager import Controller, ControllerManager
from kapiserver.controllers.master_leases import EndpointsReconciler, MasterLeases
from kapiserver.controllers.namespace import NamespaceController
from kapiserver.controllers.namespace_defaults import NamespaceDefaultsController
from kapiserver.controllers.resource_quota import ResourceQuotaController
from kapiserver.controllers.service_repair import READY_CHECK, ServiceRepair
from kapiserver.controllers.serviceaccount_tokens import ServiceAccountTokensController
from kapiserver.controllers.storage_protection import PVCProtectionController, PVProtectionController
from kapiserver.controllers.system_priority_classes import READY_CHECK as PRIORITY_CLASSES_CHECK
from kapiserver.controllers.system_priority_classes import SystemPriorityClasses
from kapiserver.flowcontrol import bootstrap
from kapiserver.registry.groups import ServedResources
from kapiserver.server.advertise import advertise_address
from kapiserver.server.certs import CertificateError, load_signing_ca
from kapiserver.server.config import Config
from kapiserver.server.controller_names import (BOOTSTRAP_SIGNER, CLUSTERROLE_AGGREGATION, CSR_APPROVING, CSR_SIGNING,
                                                GARBAGE_COLLECTOR, NAMESPACE, PVC_PROTECTION, PV_PROTECTION,
                                                RESOURCE_QUOTA, ROOT_CA_PUBLISHER, SERVICE_ACCOUNT,
                                                SERVICE_ACCOUNT_TOKEN, TOKEN_CLEANER,
                                                VALIDATING_ADMISSION_POLICY_STATUS, ControllerSelection)
from kapiserver.server.healthz import HealthChecks

log = Logger()


class ServerControllers:
    """Built from the registry's dependencies plus what only the server knows: its health
    checks, every served resource (CRDs come and go), the CRD status
    controller's factory and the port it listens on."""

    def __init__(self, config: Config, deps: RegistryDeps, health: HealthChecks,
                 served: ServedResources,
                 crd_status_controller: Callable[[Callable[[], Awaitable[int]]], Controller],
                 secure_port: Callable[[], Optional[int]],
                 policy_status_controllers: Sequence[Callable[[], Controller]] = ()) -> None:
        reactor = deps.reactor
        services = deps.store("", "v1", "services")
        allocator: ServiceAllocator = services.strategy.bound_allocator()
        self.repair = ServiceRepair(allocator, services, reactor)
        health.add(READY_CHECK, self.repair.check, kinds=("readyz",))
        self.advertise_address = advertise_address(config.advertise_address, config.bind_address)
        leases = MasterLeases(deps.storage)
        reconciler = EndpointsReconciler(deps.store("", "v1", "endpoints"),
                                         deps.store("discovery.k8s.io", "v1", "endpointslices"), leases)
        self.kubernetes_service = KubernetesServiceController(
            services, reconciler, allocator.first_ip, self.advertise_address,
            lambda: secure_port() or config.secure_port or None, reactor)
        authn = deps.authentication
        election = config.controllers
        self.trust = ClusterAuthenticationTrustController(
            deps.store("", "v1", "configmaps"), authn.client_ca_pem if authn else b"",
            authn.requestheader if authn else None, reactor)
        self.legacy_token_tracking = LegacyTokenTrackingController(deps.store("", "v1", "configmaps"), reactor)
        self.identity = APIServerIdentityController(deps.store("coordination.k8s.io", "v1", "leases"), reactor)
        self.priority_classes = SystemPriorityClasses(deps.store("scheduling.k8s.io", "v1", "priorityclasses"),
                                                      reactor)
        health.add(PRIORITY_CLASSES_CHECK, self.priority_classes.check, kinds=("readyz",))
        self.apf_bootstrap = APFBootstrapEnsurer(
            deps.store(bootstrap.GROUP, bootstrap.VERSION, "flowschemas"),
            deps.store(bootstrap.GROUP, bootstrap.VERSION, "prioritylevelconfigurations"), reactor)
        health.add(APF_BOOTSTRAP_CHECK, self.apf_bootstrap.check, kinds=("healthz", "readyz"))
        namespaces = deps.store("", "v1", "namespaces")
        selection = ControllerSelection(election.enabled, election.names)
        ns_defaults = (SERVICE_ACCOUNT in selection, ROOT_CA_PUBLISHER in selection)
        # the apiextensions server's own controllers, then kube-controller-manager's that are selected
        factories: list[Callable[[], Controller]] = [lambda: crd_status_controller(leases.count)]
        if NAMESPACE in selection:
            factories.append(lambda: NamespaceController(namespaces, served.stores, reactor))
        if any(ns_defaults):
            factories.append(lambda: NamespaceDefaultsController(
                namespaces, deps.store("", "v1", "serviceaccounts"), deps.store("", "v1", "configmaps"),
                deps.ca_pem, reactor, service_account=ns_defaults[0], root_ca=ns_defaults[1]))
        if GARBAGE_COLLECTOR in selection:
            factories.append(lambda: GarbageCollector(served, reactor))
        if CSR_SIGNING in selection:
            factories.extend(self._csr_signers(config, deps))
        csrs = deps.store("certificates.k8s.io", "v1", "certificatesigningrequests")
        if CSR_APPROVING in selection:
            factories.append(lambda: CSRApprovingController(csrs, deps.authorizer, reactor))
        secrets = deps.store("", "v1", "secrets")
        if TOKEN_CLEANER in selection:
            factories.append(lambda: TokenCleaner(secrets, reactor))
        if BOOTSTRAP_SIGNER in selection:
            factories.append(lambda: BootstrapSigner(deps.store("", "v1", "configmaps"), secrets, reactor))
        if CLUSTERROLE_AGGREGATION in selection:
            factories.append(lambda: ClusterRoleAggregationController(
                deps.store("rbac.authorization.k8s.io", "v1", "clusterroles"), reactor))
        if RESOURCE_QUOTA in selection:
            factories.append(lambda: ResourceQuotaController(deps.store("", "v1", "resourcequotas"), served.stores,
                                                             reactor))
        if PVC_PROTECTION in selection:
            factories.append(lambda: PVCProtectionController(
                deps.store("", "v1", "persistentvolumeclaims"), deps.store("", "v1", "pods"), reactor))
        if PV_PROTECTION in selection:
            factories.append(lambda: PVProtectionController(deps.store("", "v1", "persistentvolumes"), reactor))
        if VALIDATING_ADMISSION_POLICY_STATUS in selection:
            factories.extend(policy_status_controllers)
        tokens = authn.service_accounts if authn else None
        if tokens is not None and SERVICE_ACCOUNT_TOKEN in selection:
            factories.append(lambda: ServiceAccountTokensController(
                deps.store("", "v1", "serviceaccounts"), deps.store("", "v1", "secrets"), tokens.legacy_signer,
                deps.ca_pem, reactor))
        self.manager = ControllerManager(factories)
        self.elector: Optional[LeaderElector] = None
        if election.leader_elect:
            self.elector = LeaderElector(
                deps.store("coordination.k8s.io", "v1", "leases"), election.leader_elect_resource_namespace,
                election.leader_elect_resource_name, default_identity(), reactor,
                self.manager.start, self.manager.stop,
                lease_duration=election.leader_elect_lease_duration_seconds,
                renew_deadline=election.leader_elect_renew_deadline_seconds,
                retry_period=election.leader_elect_retry_period_seconds)

    @staticmethod
    def _csr_signers(config: Config, deps: RegistryDeps) -> list[Callable[[], Controller]]:
        """The CSR signing controller, when the cluster CA's key is here to sign with."""
        try:
            ca = load_signing_ca(config.cert_dir)
        except CertificateError as e:
            log.warn("CSR signing disabled: {error}", error=str(e))
            return []
        if ca is None:
            log.info("CSR signing disabled: no ca.key in {dir}", dir=config.cert_dir)
            return []
        authority = CertificateAuthority(ca)
        csrs = deps.store("certificates.k8s.io", "v1", "certificatesigningrequests")
        seconds = config.controllers.cluster_signing_duration_seconds
        return [lambda: CSRSigningController(csrs, authority, seconds, deps.reactor)]

    async def start(self) -> None:
        """Per-server work first (each first run is awaited), then the leader-only controllers."""
        await self.repair.start()
        await self.kubernetes_service.start()
        await self.priority_classes.start()
        self.trust.start()
        self.legacy_token_tracking.start()
        self.identity.start()
        await self.apf_bootstrap.start()
        if self.elector is not None:
            await self.elector.start()
        else:
            self.manager.start()

    async def stop(self) -> None:
        if self.elector is not None:
            await self.elector.stop()
        self.manager.stop()
        self.trust.stop()
        self.legacy_token_tracking.stop()
        self.identity.stop()
        self.priority_classes.stop()
        self.apf_bootstrap.stop()
        self.repair.stop()
        await self.kubernetes_service.stop()

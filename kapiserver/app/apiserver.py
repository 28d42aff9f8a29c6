"""The API server: the handler and delegation chains, bootstrap and controllers.

The resource tree is the handler chain (server/handler_chain.py) around
literal kube-apiserver delegation:

    AggregatorResource  (/apis merged discovery)
      └─ KubeAPIResource  (/api, built-in groups, /healthz /livez /readyz /version /metrics /openapi)
           └─ CRDResource  (groups of Established CRDs; 503 until the stored CRDs are installed)
                └─ 404 Status
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.web import resource

from kapiserver.admission.config import read_admission_configuration
from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.admission.plugins import enabled_plugin_names, new_chain
from kapiserver.aggregator.resource import AggregatorResource
from kapiserver.apiextensions.server import SYNC_CHECK as CRD_SYNC_CHECK, APIExtensionsDeps, APIExtensionsServer
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.apis.deps import RegistryDeps
from kapiserver.audit.build import build_auditing
from kapiserver.audit.metrics import AuditMetrics
from kapiserver.aggregator.resource import AggregatorDeps
from kapiserver.aggregator.server import Aggregator, AggregatorServerDeps
from kapiserver.auth.authorization_modes import build_authorizer
from kapiserver.auth.authorizer import Authorizer, Closeable
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.auth.node.graph import Graph
from kapiserver.auth.node.graph_populator import GraphPopulator
from kapiserver.auth.rbac.policy_informers import PolicyInformers
from kapiserver.auth.rbac.reconciliation import ensure_bootstrap_policy
from kapiserver.controllers.server_controllers import ServerControllers
from kapiserver.endpoints.connection.policy import ConnectionPolicy
from kapiserver.endpoints.connection.site import APISite
from kapiserver.endpoints.streaming.on_first_use import StreamsOnFirstUse
from kapiserver.app.authentication import build_authentication
from kapiserver.server.flowcontrol_debug import APFDebugResource
from kapiserver.server.testing_reset import DebugResource, SnapshotResource
from kapiserver.server.kubelet_connection import kubelet_client_config
from kapiserver.endpoints.deps import EndpointDeps, WatchRegistry
from kapiserver.endpoints.filters.inflight import InflightLimiter
from kapiserver.endpoints.filters.waitgroup import RequestWaitGroup
from kapiserver.registry.groups import APIGroupSet, ServedResources
from kapiserver.endpoints.openapi_endpoint import OpenAPIEndpoint
from kapiserver.endpoints.static import DocumentEndpoint
from kapiserver.flowcontrol import bootstrap
from kapiserver.flowcontrol.metrics import FlowControlCollector
from kapiserver.flowcontrol.controller import APFController
from kapiserver.machinery import errors
from kapiserver.machinery.metrics import Metrics, MetricsResource
from kapiserver.registry.leases import LeaseReuser
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store
from kapiserver.server import healthz, version
from kapiserver.server.certs import credential_files
from kapiserver.server.config import Config
from kapiserver.server.handler_chain import HandlerChainDeps, build_handler_chain
from kapiserver.server.crd_api import CRDAPIDeps, CRDResource
from kapiserver.server.kube_api import KubeAPIDeps, KubeAPIResource
from kapiserver.server.advertise import advertise_address
from kapiserver.server.kubeconfig import server_url
from kapiserver.server.openid_metadata import issuer_discoverable, openid_resources
from kapiserver.storage.interface import Storage

log = Logger()

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
OBJECT_COUNT_INTERVAL_SECONDS = 60.0
# upstream's post-start hooks of API Priority and Fairness, as /readyz lists them
APF_CONSUMER_CHECK = "poststarthook/priority-and-fairness-config-consumer"
APF_FILTER_CHECK = "poststarthook/priority-and-fairness-filter"


class APIServer:
    """The delegation chain, wrapped in the handler chain, over one storage; plus what runs beside it.

    Built from the completed configuration: each link of the chain and each
    kind's storage receives a small typed dependency object, never this class.
    """

    def __init__(self, config: Config, storage: Storage, ca_cert_pem: bytes | str, health: healthz.HealthChecks,
                 metrics: Metrics, reactor: Optional[IReactorTime] = None, authorizer: Authorizer | None = None,
                 bootstrap_rbac: bool = True) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.config = config
        self.storage = storage
        self.reactor = reactor
        self.health = health
        self.metrics = metrics
        self.ca_pem = ca_cert_pem.decode() if isinstance(ca_cert_pem, bytes) else ca_cert_pem
        self._definitions: Any = None
        self._openapi: Any = None
        self._openapi_generation: Any = None
        self._openapi_aggregated = 0
        # stored objects per resource (apiserver_storage_objects), refreshed by _counter once started
        self._object_counts: dict[str, int] = {}
        self._counter: Optional[task.LoopingCall] = None

        # what RBAC grants whom, in memory (fed by informers once started); the RBAC
        # authorizer and the RBAC kinds' escalation checks read it
        self.rbac = PolicyIndex()
        self.rbac_bootstrapped = False
        # the in-process test server skips the bootstrap policy when it does not use RBAC (a faster start)
        self.bootstrap_rbac = bootstrap_rbac
        health.add("poststarthook/rbac/bootstrap-roles", self._rbac_bootstrap_check)
        # which objects each node's pods reach, for the Node authorizer (fed by informers once started)
        self.node_graph: Graph | None = Graph() if "Node" in config.authorization.modes else None
        self.node_graph_populator: GraphPopulator | None = None
        # requests, impersonation and access reviews ask the same authorizer
        self.authorizer: Authorizer = (authorizer if authorizer is not None
                                       else build_authorizer(config.authorization, self.rbac, reactor,
                                                             node_graph=self.node_graph))
        self.kube_groups = APIGroupSet()
        self.crd_groups = APIGroupSet()
        self.aggregator_groups = APIGroupSet()  # apiregistration.k8s.io, served by the aggregator link
        self.served = ServedResources(self.aggregator_groups, self.kube_groups, self.crd_groups)
        # the authenticators the configuration names (reads their files; CredentialsError if one is bad)
        self.authentication = build_authentication(config, self.served.store, reactor=reactor)
        self.authenticator = self.authentication.request
        self._advertised: str | None = None  # the address in the default jwks_uri, found on first use
        self.leases = LeaseReuser(storage)
        self.admission = new_chain(
            enabled_plugin_names(config.admission.enable_plugins, config.admission.disable_plugins),
            read_admission_configuration(config.admission.config_file),
            AdmissionDeps(reactor=reactor, authorizer=self.authorizer, store=self.served.store, served=self.served,
                          schema_resolver=self.resolve_schema_ref))
        self.registry = RegistryDeps(storage=storage, admission=self.admission, leases=self.leases,
                                     authorizer=self.authorizer, reactor=reactor, ca_pem=self.ca_pem,
                                     store=self.served.store, health=health, authentication=self.authentication,
                                     rule_resolver=self.rbac)
        for rtype in builtin_resource_types():
            if rtype.ttl_seconds:
                rtype.ttl_seconds = config.storage.event_ttl_seconds
            if rtype.make_store is not None:
                store = rtype.make_store(rtype, self.registry)
            else:
                store = Store(rtype, storage, self.admission, self.leases)
            rtype.strategy.bind(rtype, store, config)
            if rtype.bind_deps is not None:
                rtype.bind_deps(rtype, self.registry)
            self.kube_groups.add(rtype, store)

        self.watches = WatchRegistry(self._count_watch)
        self.apiextensions = APIExtensionsServer(APIExtensionsDeps(
            reactor=reactor, storage=storage, admission=self.admission, leases=self.leases,
            groups=self.crd_groups, builtin_groups=self.kube_groups, stop_serving=self.watches.stop_serving))
        health.add(CRD_SYNC_CHECK, self.apiextensions.readiness.check, kinds=("readyz",))
        files = credential_files(config)
        self.aggregator = Aggregator(AggregatorServerDeps(
            reactor=reactor, storage=storage, admission=self.admission, leases=self.leases,
            groups=self.aggregator_groups, kube_groups=self.kube_groups, store=self.served.store,
            crd_store=self.apiextensions.store, health=health,
            proxy_client_cert=files.proxy_client_cert, proxy_client_key=files.proxy_client_key))
        limits = config.limits
        # API Priority and Fairness: the server's concurrency shared among priority levels
        self.flow_control: APFController | None = None
        metrics.registry.register(FlowControlCollector(lambda: self.flow_control))
        if limits.enable_priority_and_fairness:
            self.flow_control = APFController(
                limits.max_requests_inflight + limits.max_mutating_requests_inflight, reactor)
            for name, check in ((APF_CONSUMER_CHECK, self._apf_synced_check), (APF_FILTER_CHECK, lambda: None)):
                health.add(name, check, kinds=("healthz", "readyz"))

        self.streams = StreamsOnFirstUse(reactor, kubelet_client_config(config))
        endpoints = EndpointDeps(reactor=reactor, bookmark_interval=float(config.watch.bookmark_interval_seconds),
                                 schema_resolver=self.resolve_schema_ref, watches=self.watches, stores=self.served.store,
                                 streams=self.streams)
        crd = CRDResource(CRDAPIDeps(self.crd_groups, endpoints, self.apiextensions.readiness))
        kube = KubeAPIResource(KubeAPIDeps(self.kube_groups, endpoints, self._server_paths(), self._root_paths), crd)
        self.root = AggregatorResource(AggregatorDeps(
            all_types=self.served.types, groups=self.aggregator_groups, endpoints=endpoints,
            routing=self.aggregator.registration, proxy=self.aggregator.proxy,
            remote_resources=lambda: self.aggregator.remote_resources), kube)

        self.inflight = InflightLimiter(limits.max_requests_inflight, limits.max_mutating_requests_inflight,
                                        on_change=self._publish_inflight)
        self.wait_group = RequestWaitGroup()
        self.auditing = build_auditing(config.audit, AuditMetrics(metrics.registry), reactor)  # raises AuditConfigError
        # kept so that an in-memory test can build the same chain with a fake clock for its deadlines
        self.handler_chain_deps = HandlerChainDeps(
            reactor=reactor, authenticator=self.authenticator, authorizer=self.authorizer,
            inflight=self.inflight, wait_group=self.wait_group, record_metrics=metrics.record,
            request_timeout_seconds=float(limits.request_timeout_seconds),
            max_body_bytes=limits.max_request_body_bytes, auditing=self.auditing,
            flow_control=self.flow_control, object_count=self.object_count)
        self.handler = build_handler_chain(self.root, self.handler_chain_deps)
        # the connection authenticates with the chain's authenticator, before reading a body
        self.site = APISite(self.handler, limits.max_request_body_bytes, authenticator=self.authenticator,
                            policy=ConnectionPolicy.from_config(config), reactor=reactor,
                            authorizer=self.authorizer, access_log=config.log_level == "debug")
        self.secure_port: int | None = None  # the bound port, set by whoever listens (the kubernetes Service)
        self.controllers: ServerControllers | None = None
        self.rbac_informers: PolicyInformers | None = None

    # ------------------------------------------------------------ wiring

    def _server_paths(self) -> dict[str, resource.Resource]:
        tokens = self.authentication.service_accounts
        discovery = {}
        if tokens is not None and issuer_discoverable(tokens.issuer):
            discovery = openid_resources(tokens, lambda: tokens.jwks_uri or self._jwks_uri())
        debug: dict[str, resource.Resource] = {}
        if self.flow_control is not None:
            debug["api_priority_and_fairness"] = APFDebugResource(self.flow_control)
        snapshots = self.storage.snapshots()
        if self.config.testing.enable_reset and snapshots is not None:
            debug["kapiserver"] = SnapshotResource(snapshots)
        return {
            **discovery,
            "healthz": healthz.health_resource("healthz", self.health),
            "livez": healthz.health_resource("livez", self.health),
            "readyz": healthz.health_resource("readyz", self.health),
            "version": DocumentEndpoint(lambda request, target: version.version_info()),
            "metrics": MetricsResource(self.metrics),
            "openapi": OpenAPIEndpoint(self.openapi),
            **({"debug": DebugResource(debug)} if debug else {}),
        }

    def _publish_inflight(self, readonly: int, mutating: int) -> None:
        self.metrics.set_inflight("readOnly", readonly)
        self.metrics.set_inflight("mutating", mutating)

    def _count_watch(self, rtype: ResourceType, delta: int) -> None:
        if delta > 0:
            self.metrics.watcher_added(rtype.group, rtype.version, rtype.kind)
        else:
            self.metrics.watcher_removed(rtype.group, rtype.version, rtype.kind)

    def _jwks_uri(self) -> str:
        """Upstream's default: the JWKS path at the advertised address and the port served on."""
        if self._advertised is None:
            self._advertised = advertise_address(self.config.advertise_address, self.config.bind_address)
        return server_url(self._advertised, self.secure_port or self.config.secure_port) + "/openid/v1/jwks"

    def _root_paths(self) -> list[str]:
        paths = {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/metrics", "/openapi/v2",
                 "/openapi/v3", "/version"}
        tokens = self.authentication.service_accounts
        if tokens is not None and issuer_discoverable(tokens.issuer):
            paths |= {"/.well-known/openid-configuration", "/openid/v1/jwks"}
        for rtype in self.served.types():
            if rtype.group:
                paths.add(f"/apis/{rtype.group}")
                paths.add(f"/apis/{rtype.group}/{rtype.version}")
        return sorted(paths)

    def definitions(self) -> Any:
        if self._definitions is None:
            from kapiserver.machinery.openapi_definitions import load_definitions
            self._definitions = load_definitions()
        return self._definitions

    def resolve_schema_ref(self, ref: str) -> dict:
        """The built-in schema a ``$ref`` names (the definitions load on first use)."""
        return self.definitions().resolve_ref(ref)

    def openapi(self) -> Any:
        """The OpenAPI service, current with the served types.

        Built on the first OpenAPI request (the definitions load lazily, off the
        start-up path) and refreshed when a group set changed (CRDs).
        """
        if self._openapi is None:
            from kapiserver.endpoints.openapi import OpenAPIService
            self._openapi = OpenAPIService(self.definitions())
        if self._openapi_generation != self.served.generation:
            self._openapi.set_types(self.served.types())
            self._openapi_generation = self.served.generation
        if self._openapi_aggregated != self.aggregator.openapi_generation:
            self._openapi.set_aggregated(*self.aggregator.openapi_parts)
            self._openapi_aggregated = self.aggregator.openapi_generation
        return self._openapi

    async def _count_objects(self) -> None:
        """Refresh apiserver_storage_objects (upstream refreshes it about once a minute)."""
        counts = {}
        seen = set()
        for store in self.served.stores():
            rtype = store.rtype
            if rtype.storage_resource in seen:
                continue
            seen.add(rtype.storage_resource)
            name = f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural
            try:
                counts[name] = await self.storage.count(rtype.storage_prefix())
            except Exception as e:  # storage down or stopping: keep the last counts
                log.warn("counting stored {resource} failed: {err}", resource=name, err=e)
                return
        self._object_counts = counts

    def _rbac_bootstrap_check(self) -> None:
        if not self.rbac_bootstrapped:
            raise RuntimeError("not finished")
    def object_count(self, group: str, resource: str) -> int | None:
        """How many objects of a resource are stored (the seats a LIST takes): the watch
        cache's count when it holds the resource, else the last periodic count."""
        for rtype in self.served.types():
            if rtype.group == group and rtype.plural == resource and rtype.stored:
                count = self.storage.cached_count(rtype.storage_prefix())
                if count is not None:
                    return count
                break
        return self._object_counts.get(f"{resource}.{group}" if group else resource)

    def _apf_synced_check(self) -> None:
        if self.flow_control is None or not self.flow_control.synced.called:
            raise RuntimeError("the API Priority and Fairness configuration is not read yet")

    def requests_in_flight(self) -> int:
        """Requests being answered now, watches excepted (what a graceful shutdown waits for)."""
        return self.wait_group.count

    # ------------------------------------------------------------ graceful shutdown (app/service.py)

    def begin_drain(self) -> None:
        """Take no new request: the wait group turns them away (503), idle connections close,
        busy ones close after their answers (HTTP/1.1 ``Connection: close``, HTTP/2 GOAWAY)."""
        self.wait_group.close()
        self.site.connections.drain()

    def end_watches(self) -> None:
        """End every watch with a clean end of stream (clients re-list and watch elsewhere)."""
        self.watches.stop_all()

    def unfinished_connections(self) -> int:
        """Connections still answering, or writing their last bytes."""
        return self.site.connections.unfinished()

    def abort_unfinished_connections(self) -> None:
        self.site.connections.abort_unfinished()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.auditing is not None:
            self.auditing.start()
        # admission's informers (webhook configurations, policies): every write, the server's
        # own bootstrap ones too, goes through the chain
        await self.admission.start()
        namespaces = self.served.store("", "v1", "namespaces")
        for name in BOOTSTRAP_NAMESPACES:
            # read first, as upstream's system namespaces controller does: a restart does not
            # send four creates through admission, defaulting and managedFields to be refused
            try:
                await namespaces.get_stored("", name)
                continue
            except errors.StatusError as e:
                if e.code != 404:
                    raise
            try:
                await namespaces.create("", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
        self.authentication.start()
        # RBAC on every server: the authorizer's informers, then the bootstrap policy
        # (upstream's rbac/bootstrap-roles post-start hook)
        self.rbac_informers = PolicyInformers(self.rbac, self.served.store, self.reactor)
        self.rbac_informers.start()
        if self.node_graph is not None:  # the Node authorizer's pods, volumes and attachments
            self.node_graph_populator = GraphPopulator(self.node_graph, self.served.store, self.reactor)
            self.node_graph_populator.start()
            await self.node_graph_populator.synced
        await self.rbac_informers.synced
        if self.bootstrap_rbac:
            await ensure_bootstrap_policy(self.served.store, self.reactor)
        self.rbac_bootstrapped = True
        if self.flow_control is not None:
            self.flow_control.start(self.served.store(bootstrap.GROUP, bootstrap.VERSION, "flowschemas"),
                                    self.served.store(bootstrap.GROUP, bootstrap.VERSION, "prioritylevelconfigurations"))
        await self.apiextensions.start()
        # the aggregator's controllers run on every server, as kube-apiserver runs them
        await self.aggregator.start()
        if self.flow_control is not None:  # classify with the stored configuration from the first request on
            await self.flow_control.synced
        # after the stored CRDs are served, so the garbage collector's first sync sees every kind
        self.controllers = ServerControllers(
            self.config, self.registry, self.health, self.served,
            self.apiextensions.status_controller, lambda: self.secure_port,
            policy_status_controllers=[self._policy_status_controller])
        await self.controllers.start()
        await self._count_objects()
        await self._prepare_caches()
        self.metrics.set_storage_objects_source(lambda: self._object_counts)
        self._counter = task.LoopingCall(lambda: defer.Deferred.fromCoroutine(self._count_objects()))
        self._counter.clock = self.reactor
        self._counter.start(OBJECT_COUNT_INTERVAL_SECONDS, now=False).addErrback(
            lambda f: log.failure("counting stored objects failed", f))

    async def _prepare_caches(self) -> None:
        """Build the watch cache of every resource that has stored objects, with its standard
        indexes (``Store.cache_indexes``), before the server is ready, as kube-apiserver builds its
        watch caches before it is: the first list after a (re)start is then served from memory at
        once.  The caches build side by side, their indexes a chunk per reactor turn, so the
        server keeps answering meanwhile (``/readyz`` says it is not ready).  An empty resource's
        cache is left to its first use (a store without objects is ready at once), except for the
        kinds with standard indexes (pods): their cache and indexes are made empty, and kept
        current from the first write, so a node's first list of its pods costs what it returns
        on a server that started empty too.  The other
        kinds' label indexes (``Store.label_indexes``) follow in the background, the smallest
        kinds first."""
        prepared = []
        labels = []
        seen = set()
        for store in self.served.stores():
            rtype = store.rtype
            if rtype.storage_resource in seen or not rtype.stored:
                continue
            seen.add(rtype.storage_resource)
            count = self._object_counts.get(f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural)
            indexes = store.cache_indexes()
            if count or indexes:
                prefix = rtype.storage_prefix()
                prepared.append(self.storage.prepare(prefix, indexes))
                later = store.label_indexes()
                if later:
                    labels.append((count or 0, prefix, later))
        for result in await defer.DeferredList(prepared, consumeErrors=True):
            if not result[0]:  # built by its first use instead
                log.warn("building a watch cache at startup failed: {err}", err=result[1].value)
        labels.sort(key=lambda entry: entry[0])
        defer.Deferred.fromCoroutine(self._prepare_label_indexes([(p, i) for _, p, i in labels]))

    async def _prepare_label_indexes(self, indexes: list[tuple[str, list]]) -> None:
        for prefix, named in indexes:
            try:
                await self.storage.prepare(prefix, named)
            except Exception as e:  # stopping, storage down: the first label-selected list builds it
                log.info("building the label index of {prefix} failed: {err}", prefix=prefix, err=e)

    def _policy_status_controller(self) -> Any:
        from kapiserver.controllers.validating_admission_policy_status import PolicyStatusController
        return PolicyStatusController(self.served.store("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
                                      self._policy_type_checker, self.reactor)

    def _policy_type_checker(self) -> Any:
        from kapiserver.admission.policy.typecheck import TypeChecker
        from kapiserver.admission.resources import ResourceMapper
        mapper = ResourceMapper(self.served)
        return TypeChecker(mapper, self.resolve_schema_ref)

    async def stop(self) -> None:
        if self._counter is not None and self._counter.running:
            self._counter.stop()
        if self.controllers is not None:
            await self.controllers.stop()
        if self.flow_control is not None:
            self.flow_control.stop()
        await self.admission.stop()
        if self.rbac_informers is not None:
            self.rbac_informers.stop()
        if self.node_graph_populator is not None:
            self.node_graph_populator.stop()
        await self.aggregator.stop()
        self.apiextensions.stop()
        self.authentication.stop()
        self.watches.stop_all()
        if isinstance(self.authorizer, Closeable):  # a webhook's kept-alive connections
            await self.authorizer.close()
        # let the watch streams' final writes go out
        await defer.succeed(None)
        if self.auditing is not None:  # last: the requests drained above are recorded
            await self.auditing.shutdown()

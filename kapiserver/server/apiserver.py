"""The API server: the delegation chain, the request filters' settings, bootstrap and controllers.

The resource tree is literal kube-apiserver delegation:

    AggregatorResource  (/apis merged discovery)
      └─ KubeAPIResource  (/api, built-in groups, /healthz /livez /readyz /version /metrics /openapi)
           └─ CRDResource  (groups of Established CRDs; 503 until the stored CRDs are installed)
                └─ 404 Status
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from twisted.internet import defer, task
from twisted.logger import Logger
from twisted.web import resource

from kapiserver.admission.interface import AdmissionChain
from kapiserver.admission.namespace_lifecycle import NamespaceLifecycle
from kapiserver.aggregator.resource import AggregatorResource
from kapiserver.apiextensions.crd_resource import CRDResource
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.auth import impersonation
from kapiserver.auth.authorizer import AlwaysAllow, Attributes
from kapiserver.controllers.garbage_collector import GarbageCollector
from kapiserver.controllers.namespace import NamespaceController
from kapiserver.controllers.namespace_defaults import NamespaceDefaultsController
from kapiserver.endpoints.filters.request import APISite
from kapiserver.endpoints.groups import APIGroupSet
from kapiserver.endpoints.openapi_endpoint import OpenAPIEndpoint
from kapiserver.endpoints.request_info import RequestInfo
from kapiserver.endpoints.static import DocumentEndpoint
from kapiserver.machinery import errors
from kapiserver.registry.leases import LeaseReuser
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store
from kapiserver.server import healthz, metrics, version
from kapiserver.server.kube_api import KubeAPIResource
from kapiserver.storage.interface import Storage

log = Logger()

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
OBJECT_COUNT_INTERVAL_SECONDS = 60.0


def _setting(config: Any, dotted: str, default: Any) -> Any:
    """A config value by dotted path, or ``default`` (tests pass partial configs)."""
    node = config
    for part in dotted.split("."):
        node = getattr(node, part, None) if node is not None else None
    return default if node is None else node


class InflightLimiter:
    """Max-in-flight (upstream's --max-requests-inflight / --max-mutating-requests-inflight).

    Long-running requests (watches) are exempt.  Over the limit: 429 with Retry-After.
    """

    class Token:
        def __init__(self, limiter: "InflightLimiter", mutating: bool) -> None:
            self.limiter, self.mutating, self.released = limiter, mutating, False

        def release(self) -> None:
            if not self.released:
                self.released = True
                self.limiter.counts[self.mutating] -= 1

    def __init__(self, readonly: int, mutating: int) -> None:
        self.limits = {False: readonly, True: mutating}
        self.counts = {False: 0, True: 0}

    def admit(self, info: RequestInfo) -> Optional["InflightLimiter.Token"]:
        if info.is_long_running:
            return None
        mutating = info.verb in ("create", "update", "patch", "delete", "deletecollection")
        if self.limits[mutating] and self.counts[mutating] >= self.limits[mutating]:
            raise errors.too_many_requests()
        self.counts[mutating] += 1
        return InflightLimiter.Token(self, mutating)

    def total(self) -> int:
        return self.counts[False] + self.counts[True]


class APIServer:
    def __init__(self, config: Any, storage: Storage, ca_cert_pem: bytes, health: "healthz.HealthChecks",
                 reactor: Any = None, authenticator: Optional[Callable[[Any], Any]] = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.config = config
        self.storage = storage
        self.reactor = reactor
        self.health = health
        self.ca_pem = ca_cert_pem.decode() if isinstance(ca_cert_pem, bytes) else ca_cert_pem
        self.bookmark_interval = float(_setting(config, "watch.bookmark_interval_seconds", 60))
        self.max_body_bytes = int(_setting(config, "limits.max_request_body_bytes", 3 * 1024 * 1024))
        self.request_timeout = float(_setting(config, "limits.request_timeout_seconds", 60))
        self.anonymous = bool(_setting(config, "authentication.anonymous", False))
        self.limiter = InflightLimiter(int(_setting(config, "limits.max_requests_inflight", 400)),
                                       int(_setting(config, "limits.max_mutating_requests_inflight", 200)))
        self._authenticator = authenticator
        self.watches: set = set()
        self.crds_synced = True  # set False while stored CRDs are being installed
        self._definitions = None
        self._openapi = None
        self._openapi_generation = None

        self.authorizer = AlwaysAllow()  # requests and access reviews ask the same authorizer
        self.kube_groups = APIGroupSet()
        self.crd_groups = APIGroupSet()
        self.leases = LeaseReuser(storage)
        self.admission = AdmissionChain([NamespaceLifecycle(lambda: self.store("", "v1", "namespaces"))])
        event_ttl = int(_setting(config, "storage.event_ttl_seconds", 3600))
        for rtype in builtin_resource_types():
            if rtype.ttl_seconds:
                rtype.ttl_seconds = event_ttl
            if rtype.make_store is not None:
                store = rtype.make_store(rtype, self)
            else:
                store = Store(rtype, storage, self.admission, self.leases)
            rtype.strategy.bind(rtype, store, config)
            self.kube_groups.add(rtype, store)

        crd = CRDResource(self.crd_groups, self, lambda: self.crds_synced)
        kube = KubeAPIResource(self.kube_groups, self, crd, self._server_paths(), self._root_paths)
        self.root = AggregatorResource(self.all_types, kube)
        self.site = APISite(self.root, self)
        self.controllers: list = []
        from kapiserver.apiextensions.server import APIExtensionsServer
        self.apiextensions = APIExtensionsServer(self)

    # ------------------------------------------------------------ wiring

    def _server_paths(self) -> dict[str, resource.Resource]:
        return {
            "healthz": healthz.health_resource("healthz", self.health),
            "livez": healthz.health_resource("livez", self.health),
            "readyz": healthz.health_resource("readyz", self.health),
            "version": DocumentEndpoint(lambda request, target: version.version_info()),
            "metrics": metrics.metrics_resource(),
            "openapi": OpenAPIEndpoint(self.openapi),
        }

    def _root_paths(self) -> list[str]:
        paths = {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/metrics", "/openapi/v2",
                 "/openapi/v3", "/version"}
        for rtype in self.all_types():
            if rtype.group:
                paths.add(f"/apis/{rtype.group}")
                paths.add(f"/apis/{rtype.group}/{rtype.version}")
        return sorted(paths)

    def all_types(self) -> list[ResourceType]:
        return self.kube_groups.types() + self.crd_groups.types()

    def store(self, group: str, version: str, plural: str) -> Store:
        found = self.kube_groups.lookup(group, version, plural) or self.crd_groups.lookup(group, version, plural)
        if found is None:
            raise KeyError((group, version, plural))
        return found[1]

    def all_stores(self) -> list[Store]:
        return [s for _, s in self.kube_groups] + [s for _, s in self.crd_groups]

    def definitions(self):
        if self._definitions is None:
            from kapiserver.apis.definitions import load_definitions
            self._definitions = load_definitions()
        return self._definitions

    def schema_resolver(self) -> Callable[[str], dict]:
        return lambda ref: self.definitions().resolve_ref(ref)

    def openapi(self):
        """The OpenAPI service, current with the served types.

        Built on the first OpenAPI request (the definitions load lazily, off the
        start-up path) and refreshed when a group set changed (CRDs).
        """
        if self._openapi is None:
            from kapiserver.endpoints.openapi import OpenAPIService
            self._openapi = OpenAPIService(self.definitions())
        generation = (self.kube_groups.generation, self.crd_groups.generation)
        if self._openapi_generation != generation:
            self._openapi.set_types(self.all_types())
            self._openapi_generation = generation
        return self._openapi

    # ------------------------------------------------------------ filter settings

    def authenticate(self, request) -> Any:
        user = self._authenticator(request) if self._authenticator else None
        if user is None:
            from kapiserver.auth import x509
            user = x509.authenticate_client_certificate(request)
        if user is None:
            if not self.anonymous:
                raise errors.unauthorized()
            from kapiserver.auth.user import ANONYMOUS
            user = ANONYMOUS
        return impersonation.apply(request, user, self.authorizer)

    def authorize(self, user: Any, info: RequestInfo) -> Optional[str]:
        """None when ``user`` may make the request, else why not (a 403)."""
        decision = self.authorizer.authorize(user, Attributes(
            verb=info.verb, resource_request=info.is_resource_request, namespace=info.namespace,
            api_group=info.group, api_version=info.version, resource=info.resource,
            subresource=info.subresource, name=info.name, path=info.path))
        return None if decision.allowed else (decision.reason or "access denied")

    def admit_inflight(self, info: RequestInfo):
        token = self.limiter.admit(info)
        self._publish_inflight()
        return token

    def _publish_inflight(self) -> None:
        metrics.METRICS.set_inflight("readOnly", self.limiter.counts[False])
        metrics.METRICS.set_inflight("mutating", self.limiter.counts[True])

    def record(self, request, code: int, seconds: float) -> None:
        self._publish_inflight()
        info = getattr(request, "request_info", None)
        if info is None:
            return
        metrics.record_request(info, code, seconds)

    def register_watch(self, watch) -> Callable[[], None]:
        rtype = watch.rtype
        self.watches.add(watch)
        metrics.METRICS.watcher_added(rtype.group, rtype.version, rtype.kind)

        def unregister() -> None:
            if watch in self.watches:
                self.watches.discard(watch)
                metrics.METRICS.watcher_removed(rtype.group, rtype.version, rtype.kind)
        return unregister

    async def _count_objects(self) -> None:
        """Refresh apiserver_storage_objects (upstream refreshes it about once a minute)."""
        counts = {}
        seen = set()
        for store in self.all_stores():
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

    def inflight(self) -> int:
        return self.limiter.total()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        namespaces = self.store("", "v1", "namespaces")
        for name in BOOTSTRAP_NAMESPACES:
            try:
                await namespaces.create("", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
        self.controllers = [
            NamespaceController(namespaces, self.all_stores, self.reactor),
            NamespaceDefaultsController(namespaces, self.store("", "v1", "serviceaccounts"),
                                        self.store("", "v1", "configmaps"), self.ca_pem, self.reactor),
        ]
        for controller in self.controllers:
            controller.start()
        await self.apiextensions.start()
        # after the stored CRDs are served, so its first sync sees every kind
        collector = GarbageCollector(self.all_stores,
                                     lambda: (self.kube_groups.generation, self.crd_groups.generation), self.reactor)
        self.controllers.append(collector)
        collector.start()
        self._object_counts: dict = {}
        metrics.METRICS.set_storage_objects_source(lambda: self._object_counts)
        self._counter = task.LoopingCall(lambda: defer.Deferred.fromCoroutine(self._count_objects()))
        self._counter.clock = self.reactor
        self._counter.start(OBJECT_COUNT_INTERVAL_SECONDS, now=True).addErrback(
            lambda f: log.failure("counting stored objects failed", f))

    async def stop(self) -> None:
        if getattr(self, "_counter", None) is not None and self._counter.running:
            self._counter.stop()
        self.apiextensions.stop()
        for controller in self.controllers:
            controller.stop()
        for watch in list(self.watches):
            watch.stop()
        # let the watch streams' final writes go out
        await defer.succeed(None)

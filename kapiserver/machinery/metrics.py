"""Prometheus metrics with upstream's names and labels, in the server's own registry.

The names and label sets follow kube-apiserver (``apiserver_request_total``,
``apiserver_request_duration_seconds`` ...), so existing dashboards and
alerts work.  The registry is per :class:`Metrics` instance (not
prometheus_client's global one): the composition root makes one per server
and passes it in, so several servers in one test process do not collide.

This is upstream's component-base metrics registry (``legacyregistry``): it
sits on the ground floor so that every layer may record into it, and a part
with metrics of its own registers them in the server's registry
(``audit/metrics.py``, ``flowcontrol/metrics.py``).  The in-process
controllers' client-side metrics (leader election, work queues) are
process-wide, as client-go's metrics providers are: :data:`CLIENT_METRICS`,
shown by every server of the process.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Optional

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from twisted.logger import Logger
from twisted.web import resource, server

log = Logger()

# Upstream's buckets for apiserver_request_duration_seconds.
DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
                    4, 5, 6, 8, 10, 15, 20, 30, 45, 60)

StorageCounts = Callable[[], Mapping[str, int]]

# RequestInfo verbs -> upstream's metric verbs
_METRIC_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                 "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}


class _StorageObjectsCollector:
    """``apiserver_storage_objects{resource}``, read from a callback at scrape time."""

    def __init__(self) -> None:
        self.source: Optional[StorageCounts] = None

    def describe(self) -> Iterable:
        return [GaugeMetricFamily("apiserver_storage_objects",
                                  "Number of stored objects at the time of last check split by kind.",
                                  labels=["resource"])]

    def collect(self) -> Iterable:
        family = GaugeMetricFamily("apiserver_storage_objects",
                                   "Number of stored objects at the time of last check split by kind.",
                                   labels=["resource"])
        if self.source is not None:
            try:
                counts = self.source()
            except Exception as e:
                log.warn("storage object counts unavailable: {error}", error=e)
                counts = {}
            for name, count in sorted(counts.items()):
                family.add_metric([name], count)
        yield family


class ClientMetrics:
    """client-go's leader election and workqueue metrics, for the in-process controllers."""

    def __init__(self) -> None:
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            ["name"], registry=None)
        self.workqueue_adds = Counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", ["name"], registry=None)

    def collectors(self) -> list[Any]:
        return [self.leader, self.workqueue_adds]

    def set_leader(self, lease: str, leading: bool) -> None:
        self.leader.labels(name=lease).set(1 if leading else 0)

    def queue_add(self, queue: str) -> None:
        self.workqueue_adds.labels(name=queue).inc()


# Process-wide, as client-go's metrics providers are (workqueue.SetProvider, leaderelection.SetProvider).
CLIENT_METRICS = ClientMetrics()


class Metrics:
    """One server's metrics; call :meth:`record` once per finished request."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, "
            "resource, scope, component, and HTTP response code.",
            ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"],
            registry=self.registry)
        self.duration = Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, "
            "resource, subresource, scope and component.",
            ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"],
            buckets=DURATION_BUCKETS, registry=self.registry)
        # (request counter, duration histogram) children by their label values
        self._request_series: dict[tuple, tuple[Any, Any]] = {}
        self.inflight = Gauge(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind "
            "in last second.",
            ["request_kind"], registry=self.registry)
        self.watchers = Gauge(
            "apiserver_registered_watchers",
            "Number of currently registered watchers for a given resources",
            ["group", "version", "kind"], registry=self.registry)
        for collector in CLIENT_METRICS.collectors():
            self.registry.register(collector)
        self._storage = _StorageObjectsCollector()
        self.registry.register(self._storage)
        for kind in ("readOnly", "mutating"):
            self.inflight.labels(request_kind=kind).set(0)

    def record_request(self, verb: str, group: str, version: str, resource: str, subresource: str,
                       scope: str, code: int, duration: float, dry_run: bool = False,
                       component: str = "apiserver") -> None:
        """Count one finished request and observe its latency.

        ``verb`` is upstream's metric verb (GET, LIST, WATCH, POST, PUT, PATCH,
        DELETE, APPLY, CONNECT); ``scope`` is ``resource``, ``namespace`` or
        ``cluster`` (empty for non-resource paths).
        """
        series = (verb, dry_run, group, version, resource, subresource, scope, component, code)
        children = self._request_series.get(series)
        if children is None:
            # labels() validates and locks on every call: each request's pair of series is found once
            dry = "All" if dry_run else ""
            children = self._request_series[series] = (
                self.requests.labels(verb, dry, group, version, resource, subresource, scope, component, str(code)),
                self.duration.labels(verb, dry, group, version, resource, subresource, scope, component))
        children[0].inc()
        children[1].observe(duration)

    def set_inflight(self, request_kind: str, count: int) -> None:
        """``request_kind`` is ``readOnly`` or ``mutating``."""
        self.inflight.labels(request_kind=request_kind).set(count)

    def watcher_added(self, group: str, version: str, kind: str) -> None:
        self.watchers.labels(group=group, version=version, kind=kind).inc()

    def watcher_removed(self, group: str, version: str, kind: str) -> None:
        self.watchers.labels(group=group, version=version, kind=kind).dec()

    def record(self, info: Any, code: int, seconds: float, dry_run: bool = False) -> None:
        """Record one finished request described by a RequestInfo (kapiserver.request.info)."""
        verb = _METRIC_VERBS.get(info.verb, info.verb.upper())
        if info.is_resource_request:
            self.record_request(verb, info.group, info.version, info.resource, info.subresource, info.scope,
                                code, seconds, dry_run=dry_run)
        else:
            self.record_request(verb, "", "", "", "", "", code, seconds, dry_run=dry_run)

    def set_storage_objects_source(self, source: Optional[StorageCounts]) -> None:
        """``source()`` returns {resource (e.g. ``pods``, ``deployments.apps``): count}; called per scrape."""
        self._storage.source = source

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsResource(resource.Resource):
    """``GET /metrics`` in the Prometheus text format."""

    isLeaf = True

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self.metrics = metrics

    def render_GET(self, request: server.Request) -> bytes:
        request.setHeader(b"content-type", CONTENT_TYPE_LATEST.encode("ascii"))
        return self.metrics.render()



"""Prometheus metrics with upstream's names and labels, in the server's own registry.

The names and label sets follow kube-apiserver (``apiserver_request_total``,
``apiserver_request_duration_seconds`` ...), so existing dashboards and
alerts work.  The registry is per :class:`Metrics` instance (not a
process-wide one): the composition root makes one per server and passes it
in, so several servers in one test process do not collide.

This is upstream's component-base metrics registry (``legacyregistry``): it
sits on the ground floor so that every layer may record into it, and a part
with metrics of its own registers them in the server's registry
(``audit/metrics.py``, ``flowcontrol/metrics.py``).  The in-process
controllers' client-side metrics (leader election, work queues) are
process-wide, as client-go's metrics providers are: :data:`CLIENT_METRICS`,
shown by every server of the process.

The counters, gauges and histograms here only record values; what a scrape
sees is prometheus_client's text exposition of them (``generate_latest``),
with the samples its own ``Counter``, ``Gauge`` and ``Histogram`` would give
(``_total`` and ``_created``; ``_bucket``, ``_count``, ``_sum`` and
``_created``), so prometheus_client and what it imports (``http.server``,
``wsgiref``, ``gzip``: about 1.1 MiB) load with the first ``/metrics``
request, not in every idle process.
"""
from __future__ import annotations

import bisect
import math
import threading
import time
from typing import (TYPE_CHECKING, Any, Callable, Generic, Iterable, Mapping, Optional, Protocol, Sequence,
                    TypeVar)

from twisted.logger import Logger
from twisted.web import resource, server

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

log = Logger()

# Upstream's buckets for apiserver_request_duration_seconds.
DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
                    4, 5, 6, 8, 10, 15, 20, 30, 45, 60)

StorageCounts = Callable[[], Mapping[str, int]]

# RequestInfo verbs -> upstream's metric verbs
_METRIC_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                 "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}

# Values change on the reactor thread and, for the audit log's write errors, on its writer thread:
# one lock for all (prometheus_client holds one per value).
_lock = threading.Lock()


class Family:
    """One metric family as a scrape reads it: prometheus_client's ``Metric`` (its name, a
    counter's without ``_total``; its samples' names with their suffixes), built without it."""

    __slots__ = ("name", "documentation", "type", "samples")

    def __init__(self, name: str, documentation: str, type: str) -> None:
        self.name = name.removesuffix("_total") if type == "counter" else name
        self.documentation = documentation
        self.type = type
        self.samples: list[tuple[str, dict[str, str], float]] = []

    def add(self, labels: dict[str, str], value: float, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, labels, value))


def gauge_family(name: str, documentation: str, labelnames: Sequence[str]) -> "LabelledFamily":
    """prometheus_client's ``GaugeMetricFamily``: samples added at scrape time by label values."""
    return LabelledFamily(name, documentation, "gauge", labelnames)


def counter_family(name: str, documentation: str, labelnames: Sequence[str]) -> "LabelledFamily":
    """prometheus_client's ``CounterMetricFamily`` (a ``_total`` sample per label values, no ``_created``)."""
    return LabelledFamily(name, documentation, "counter", labelnames)


class LabelledFamily(Family):
    __slots__ = ("labelnames",)

    def __init__(self, name: str, documentation: str, type: str, labelnames: Sequence[str]) -> None:
        super().__init__(name, documentation, type)
        self.labelnames = tuple(labelnames)

    def add_metric(self, values: Sequence[str], value: float) -> None:
        self.add(dict(zip(self.labelnames, values)), value, "_total" if self.type == "counter" else "")


class Collector(Protocol):
    """What a registry reads at each scrape."""

    def collect(self) -> Iterable[Family]: ...


class Registry:
    """A server's metrics, exposed in the order they were registered."""

    def __init__(self) -> None:
        self._collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        self._collectors.append(collector)

    def collect(self) -> Iterable[Family]:
        for collector in self._collectors:
            yield from collector.collect()

    def render(self) -> bytes:
        """The Prometheus text format, as prometheus_client writes it (loaded now, with the first scrape)."""
        from prometheus_client import generate_latest
        return generate_latest(_Exposed(self))


class _Exposed:
    """A registry's families as prometheus_client's ``Metric``s, for its ``generate_latest``."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self) -> Iterable["Metric"]:
        from prometheus_client.metrics_core import Metric
        for family in self.registry.collect():
            metric = Metric(family.name, family.documentation, family.type)
            for name, labels, value in family.samples:
                metric.add_sample(name, labels, value)
            yield metric


class _Series:
    """One label set's values; ``created`` is when it was first used (the ``_created`` sample)."""

    __slots__ = ("labels", "created")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.created = time.time()


class CounterSeries(_Series):
    __slots__ = ("value",)

    def __init__(self, labels: dict[str, str]) -> None:
        super().__init__(labels)
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        with _lock:
            self.value += amount


class GaugeSeries(_Series):
    __slots__ = ("value",)

    def __init__(self, labels: dict[str, str]) -> None:
        super().__init__(labels)
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = float(value)

    def inc(self, amount: float = 1) -> None:
        with _lock:
            self.value += amount

    def dec(self, amount: float = 1) -> None:
        with _lock:
            self.value -= amount


class HistogramSeries(_Series):
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, labels: dict[str, str], bounds: tuple[float, ...]) -> None:
        super().__init__(labels)
        self.bounds = bounds
        self.counts = [0] * len(bounds)  # per bucket, not cumulative
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        with _lock:
            self.sum += amount
            if amount == amount:  # NaN falls in no bucket
                self.counts[bisect.bisect_left(self.bounds, amount)] += 1


_S = TypeVar("_S", bound=_Series)


class _Metric(Generic[_S]):
    """A metric with label names: one series per label values, in the order first used; without
    label names, the metric is its one series (``inc``, ``set``, ``observe`` on it directly)."""

    type = ""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                 registry: Optional[Registry] = None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.series: dict[tuple[str, ...], _S] = {}
        if not self.labelnames:
            self.series[()] = self._new_series({})
        if registry is not None:
            registry.register(self)

    def _new_series(self, labels: dict[str, str]) -> _S:
        raise NotImplementedError

    def labels(self, *values: object, **keywords: object) -> _S:
        if not self.labelnames:
            raise ValueError(f"No label names were set when constructing {self.name}")
        if values and keywords:
            raise ValueError("Can't pass both *args and **kwargs")
        if keywords:
            if set(keywords) != set(self.labelnames):
                raise ValueError("Incorrect label names")
            values = tuple(keywords[name] for name in self.labelnames)
        elif len(values) != len(self.labelnames):
            raise ValueError("Incorrect label count")
        key = tuple(str(value) for value in values)
        series = self.series.get(key)
        if series is None:
            with _lock:
                series = self.series.get(key)
                if series is None:
                    series = self.series[key] = self._new_series(dict(zip(self.labelnames, key)))
        return series

    def _one(self) -> _S:
        if self.labelnames:
            raise ValueError(f"{self.name} has label names: values go to a series of .labels()")
        return self.series[()]

    def collect(self) -> Iterable[Family]:
        family = Family(self.name, self.documentation, self.type)
        for series in list(self.series.values()):
            self._samples(family, series)
        return (family,)

    def _samples(self, family: Family, series: _S) -> None:
        raise NotImplementedError


class Counter(_Metric[CounterSeries]):
    """prometheus_client's ``Counter``: its name ends in ``_total`` or is given one."""

    type = "counter"

    def _new_series(self, labels: dict[str, str]) -> CounterSeries:
        return CounterSeries(labels)

    def inc(self, amount: float = 1) -> None:
        self._one().inc(amount)

    def _samples(self, family: Family, series: CounterSeries) -> None:
        family.add(series.labels, series.value, "_total")
        family.add(series.labels, series.created, "_created")


class Gauge(_Metric[GaugeSeries]):
    type = "gauge"

    def _new_series(self, labels: dict[str, str]) -> GaugeSeries:
        return GaugeSeries(labels)

    def _samples(self, family: Family, series: GaugeSeries) -> None:
        family.add(series.labels, series.value)


class Histogram(_Metric[HistogramSeries]):
    type = "histogram"

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (),
                 registry: Optional[Registry] = None, *, buckets: Sequence[float]) -> None:
        bounds = [float(bound) for bound in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.bounds = tuple(bounds)
        super().__init__(name, documentation, labelnames, registry)

    def _new_series(self, labels: dict[str, str]) -> HistogramSeries:
        return HistogramSeries(labels, self.bounds)

    def _samples(self, family: Family, series: HistogramSeries) -> None:
        from prometheus_client.utils import floatToGoString  # (collected for a scrape, which loads it)
        cumulative = 0.0
        for bound, count in zip(self.bounds, series.counts):
            cumulative += count
            family.add({**series.labels, "le": floatToGoString(bound)}, cumulative, "_bucket")
        family.add(series.labels, cumulative, "_count")
        if series.bounds[0] >= 0:
            family.add(series.labels, series.sum, "_sum")
        family.add(series.labels, series.created, "_created")


class _StorageObjectsCollector:
    """``apiserver_storage_objects{resource}``, read from a callback at scrape time."""

    def __init__(self) -> None:
        self.source: Optional[StorageCounts] = None

    def collect(self) -> Iterable[Family]:
        family = gauge_family("apiserver_storage_objects",
                              "Number of stored objects at the time of last check split by kind.", ["resource"])
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

    def collectors(self) -> list[Collector]:
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
        self.registry = Registry()
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
        self._request_series: dict[tuple, tuple[CounterSeries, HistogramSeries]] = {}
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
            # labels() validates its values: each request's pair of series is found once
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
        return self.registry.render()


class MetricsResource(resource.Resource):
    """``GET /metrics`` in the Prometheus text format."""

    isLeaf = True

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self.metrics = metrics

    def render_GET(self, request: server.Request) -> bytes:
        body = self.metrics.render()  # loads prometheus_client, with its content type
        from prometheus_client import CONTENT_TYPE_LATEST
        request.setHeader(b"content-type", CONTENT_TYPE_LATEST.encode("ascii"))
        return body



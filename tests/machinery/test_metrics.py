"""/metrics: upstream metric names and labels in the Prometheus text format."""
from __future__ import annotations

import re
import time

import prometheus_client
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.trial import unittest
from twisted.web import resource

from kapiserver.flowcontrol.metrics import FlowControlCollector
from kapiserver.machinery import metrics
from kapiserver.request.info import parse_request_info


def _samples(text: str, name: str) -> list:
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


class MetricsTests(unittest.TestCase):
    def setUp(self) -> None:
        self.metrics = metrics.Metrics()

    def test_request_counter_and_histogram(self) -> None:
        info = parse_request_info("GET", "/api/v1/namespaces/default/pods", {})
        self.metrics.record(info, 200, 0.03)
        self.metrics.record(info, 200, 0.5)
        text = self.metrics.render().decode()
        [total] = _samples(text, "apiserver_request_total")
        self.assertEqual(total.value, 2)
        self.assertEqual(total.labels, {"verb": "LIST", "dry_run": "", "group": "", "version": "v1",
                                        "resource": "pods", "subresource": "", "scope": "namespace",
                                        "component": "apiserver", "code": "200"})
        [count] = _samples(text, "apiserver_request_duration_seconds_count")
        self.assertEqual(count.value, 2)
        le_01 = [s for s in _samples(text, "apiserver_request_duration_seconds_bucket") if s.labels["le"] == "0.1"]
        self.assertEqual(le_01[0].value, 1)

    def test_verbs(self) -> None:
        for method, path, verb in (("POST", "/apis/apps/v1/namespaces/a/deployments", "POST"),
                                   ("DELETE", "/api/v1/namespaces/a/pods", "DELETE"),
                                   ("GET", "/healthz", "GET")):
            self.metrics.record(parse_request_info(method, path, {}), 201, 0.01)
        verbs = {s.labels["verb"] for s in _samples(self.metrics.render().decode(), "apiserver_request_total")}
        self.assertEqual(verbs, {"POST", "DELETE", "GET"})

    def test_inflight_watchers_and_storage_objects(self) -> None:
        self.metrics.set_inflight("mutating", 3)
        self.metrics.watcher_added("apps", "v1", "Deployment")
        self.metrics.set_storage_objects_source(lambda: {"pods": 7, "deployments.apps": 2})
        text = self.metrics.render().decode()
        inflight = {s.labels["request_kind"]: s.value for s in _samples(text, "apiserver_current_inflight_requests")}
        self.assertEqual(inflight, {"readOnly": 0, "mutating": 3})
        [watchers] = _samples(text, "apiserver_registered_watchers")
        self.assertEqual((watchers.labels["kind"], watchers.value), ("Deployment", 1))
        objects = {s.labels["resource"]: s.value for s in _samples(text, "apiserver_storage_objects")}
        self.assertEqual(objects, {"pods": 7, "deployments.apps": 2})

    def test_each_server_counts_in_its_own_registry(self) -> None:
        other = metrics.Metrics()
        self.metrics.record(parse_request_info("GET", "/healthz", {}), 200, 0.01)
        self.assertEqual([s.value for s in _samples(self.metrics.render().decode(), "apiserver_request_total")], [1])
        self.assertEqual(_samples(other.render().decode(), "apiserver_request_total"), [])

    @defer.inlineCallbacks
    def test_resource_serves_text_format(self):
        root = resource.Resource()
        root.putChild(b"metrics", metrics.MetricsResource(self.metrics))
        response = yield StubTreq(root).get("https://example.test/metrics")
        self.assertEqual(response.code, 200)
        self.assertTrue(response.headers.getRawHeaders(b"content-type")[0].startswith(b"text/plain"))
        body = yield response.text()
        self.assertIn("# TYPE apiserver_request_total counter", body)


def _created_at(text: str, when: str) -> str:
    """The text with every ``_created`` sample's value (a wall-clock time) replaced by ``when``."""
    return re.sub(r"^(\w+_created(?:\{[^}]*\})?) \S+$", lambda m: f"{m.group(1)} {when}", text, flags=re.M)


class ExpositionTests(unittest.TestCase):
    """A scrape reads what prometheus_client's own metrics would give, line for line."""

    def test_the_text_is_prometheus_clients_for_the_same_values(self) -> None:
        # the client-side metrics are process-wide: in-process servers of other tests fill them
        self.patch(metrics, "CLIENT_METRICS", metrics.ClientMetrics())
        ours = metrics.Metrics()
        ours.registry.register(FlowControlCollector(lambda: None))
        reference = prometheus_client.CollectorRegistry(auto_describe=True)
        requests = prometheus_client.Counter(ours.requests.name, ours.requests.documentation,
                                             ours.requests.labelnames, registry=reference)
        duration = prometheus_client.Histogram(ours.duration.name, ours.duration.documentation,
                                               ours.duration.labelnames, buckets=metrics.DURATION_BUCKETS,
                                               registry=reference)
        inflight = prometheus_client.Gauge(ours.inflight.name, ours.inflight.documentation,
                                           ours.inflight.labelnames, registry=reference)
        watchers = prometheus_client.Gauge(ours.watchers.name, ours.watchers.documentation,
                                           ours.watchers.labelnames, registry=reference)
        leader, adds = (metrics.CLIENT_METRICS.leader, metrics.CLIENT_METRICS.workqueue_adds)
        reference_leader = prometheus_client.Gauge(leader.name, leader.documentation, leader.labelnames,
                                                   registry=reference)
        reference_adds = prometheus_client.Counter(adds.name, adds.documentation, adds.labelnames,
                                                   registry=reference)
        for kind in ("readOnly", "mutating"):
            inflight.labels(request_kind=kind).set(0)

        for method, path, code, seconds, dry_run in (
                ("GET", "/api/v1/namespaces/default/pods", 200, 0.03, False),
                ("GET", "/api/v1/namespaces/default/pods", 200, 0.5, False),
                ("POST", "/apis/apps/v1/namespaces/a/deployments", 201, 0.005, True),
                ("GET", "/healthz", 200, 100.0, False),
                ("DELETE", "/api/v1/namespaces/a/pods/p", 500, 2.0, False)):
            info = parse_request_info(method, path, {})
            ours.record(info, code, seconds, dry_run=dry_run)
            verb = metrics._METRIC_VERBS.get(info.verb, info.verb.upper())
            labels = ((verb, "All" if dry_run else "", info.group, info.version, info.resource, info.subresource,
                       info.scope) if info.is_resource_request else (verb, "", "", "", "", "", ""))
            requests.labels(*labels, "apiserver", str(code)).inc()
            duration.labels(*labels, "apiserver").observe(seconds)
        ours.set_inflight("mutating", 3)
        inflight.labels(request_kind="mutating").set(3)
        for gauge in (ours.watchers, watchers):
            gauge.labels(group="apps", version="v1", kind="Deployment").inc()
            gauge.labels(group="", version="v1", kind="Pod").inc()
            gauge.labels(group="", version="v1", kind="Pod").dec()
        for gauge in (leader, reference_leader):
            gauge.labels(name="a-lease").set(1)
        for counter in (adds, reference_adds):
            counter.labels(name="a-queue").inc()
        ours.set_storage_objects_source(lambda: {"pods": 7, "deployments.apps": 2})
        storage = GaugeMetricFamily(
            "apiserver_storage_objects", "Number of stored objects at the time of last check split by kind.",
            labels=["resource"])
        for name, count in (("deployments.apps", 2), ("pods", 7)):
            storage.add_metric([name], count)
        flow_control = FlowControlCollector(lambda: None).collect()
        reference_flow_control = [
            (CounterMetricFamily if family.type == "counter"
             else GaugeMetricFamily)(family.name, family.documentation, labels=[])
            for family in flow_control]

        class Families:
            def collect(self) -> list:
                return [storage, *reference_flow_control]
        reference.register(Families())

        self.assertEqual(_created_at(ours.render().decode(), "T"),
                         _created_at(prometheus_client.generate_latest(reference).decode(), "T"))

    def test_created_is_when_a_series_was_first_used(self) -> None:
        before = time.time()
        server_metrics = metrics.Metrics()
        server_metrics.record(parse_request_info("GET", "/healthz", {}), 200, 0.01)
        after = time.time()
        [created] = _samples(server_metrics.render().decode(), "apiserver_request_created")
        self.assertTrue(before <= created.value <= after, (before, created.value, after))

    def test_labels_are_checked_as_prometheus_client_checks_them(self) -> None:
        counter = metrics.Counter("things_total", "Things.", ["kind"])
        with self.assertRaises(ValueError):
            counter.labels("a", "b")
        with self.assertRaises(ValueError):
            counter.labels(sort="a")
        with self.assertRaises(ValueError):
            counter.inc()
        with self.assertRaises(ValueError):
            counter.labels(kind="a").inc(-1)
        self.assertIs(counter.labels("a"), counter.labels(kind="a"))

    def test_bucket_bounds_are_written_as_go_writes_them(self) -> None:
        from prometheus_client.utils import floatToGoString
        bounds = (1e-9, 0.005, 2, 60, 1234567.0, 12345678.5, 1e22, float("inf"))
        histogram = metrics.Histogram("demo_seconds", "Demo.", buckets=bounds)
        [family] = histogram.collect()
        written = [labels["le"] for name, labels, _ in family.samples if name.endswith("_bucket")]
        self.assertEqual(written, [floatToGoString(bound) for bound in bounds])
        self.assertIn("1.23456785e+07", written)  # Go switches to an exponent sooner than Python


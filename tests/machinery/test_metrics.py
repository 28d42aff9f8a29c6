"""/metrics: upstream metric names and labels in the Prometheus text format."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.trial import unittest
from twisted.web import resource

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

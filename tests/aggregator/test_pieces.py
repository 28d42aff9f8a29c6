"""Small pieces of the aggregator: discovery order, forwarded headers, OpenAPI parts."""
from __future__ import annotations

from twisted.trial import unittest
from twisted.web.http_headers import Headers

from kapiserver.aggregator import discovery
from kapiserver.aggregator.openapi_aggregation import v2_part
from kapiserver.aggregator.proxy import forwarded_headers
from kapiserver.machinery.user import UserInfo


def apiservice(group: str, version: str, gp: int, vp: int, remote: bool = True) -> dict:
    spec: dict = {"group": group, "version": version, "groupPriorityMinimum": gp, "versionPriority": vp}
    if remote:
        spec["service"] = {"namespace": "ns", "name": "svc", "port": 443}
    return {"metadata": {"name": f"{version}.{group}"}, "spec": spec}


class DiscoveryOrderTests(unittest.TestCase):
    def test_groups_by_priority_then_versions_by_priority_then_kube_order(self):
        services = [apiservice("b.example.com", "v1", 500, 10), apiservice("a.example.com", "v1", 500, 10),
                    apiservice("z.example.com", "v1alpha1", 900, 10), apiservice("z.example.com", "v1", 900, 10),
                    apiservice("z.example.com", "v2beta1", 900, 50)]
        ordered = discovery.ordered_group_versions([], services)
        self.assertEqual([(g, [v for v, _ in vs]) for g, vs in ordered],
                         [("z.example.com", ["v2beta1", "v1", "v1alpha1"]), ("a.example.com", ["v1"]),
                          ("b.example.com", ["v1"])])

    def test_local_apiservice_without_served_version_is_not_listed(self):
        ordered = discovery.ordered_group_versions([], [apiservice("gone.example.com", "v1", 1000, 100, False)])
        self.assertEqual(ordered, [])


class ForwardedHeadersTests(unittest.TestCase):
    def test_user_replaces_client_supplied_identity_headers(self):
        incoming = Headers({b"Authorization": [b"Bearer secret"], b"X-Remote-User": [b"mallory"],
                            b"X-Remote-Extra-Scopes": [b"all"], b"Impersonate-User": [b"root"],
                            b"Connection": [b"keep-alive"], b"Accept": [b"application/json"]})
        user = UserInfo("alice", ("devs", "system:authenticated"), extra={"scopes/x": ("read",)})
        out = forwarded_headers(incoming, user)
        self.assertIsNone(out.getRawHeaders(b"Authorization"))
        self.assertIsNone(out.getRawHeaders(b"Impersonate-User"))
        self.assertIsNone(out.getRawHeaders(b"Connection"))
        self.assertIsNone(out.getRawHeaders(b"X-Remote-Extra-Scopes"))
        self.assertEqual(out.getRawHeaders(b"X-Remote-User"), [b"alice"])
        self.assertEqual(out.getRawHeaders(b"X-Remote-Group"), [b"devs", b"system:authenticated"])
        self.assertEqual(out.getRawHeaders(b"X-Remote-Extra-scopes%2Fx"), [b"read"])
        self.assertEqual(out.getRawHeaders(b"Accept"), [b"application/json"])


class OpenAPIPartTests(unittest.TestCase):
    def test_keeps_the_group_versions_paths_and_the_definitions_they_use(self):
        spec = {"paths": {"/apis/w.io/v1/flunders": {"get": {"responses": {"200": {
                              "schema": {"$ref": "#/definitions/io.w.v1.FlunderList"}}}}},
                          "/api/v1/pods": {"get": {}}},
                "definitions": {"io.w.v1.FlunderList": {"properties": {"items": {"items": {
                                    "$ref": "#/definitions/io.w.v1.Flunder"}}}},
                                "io.w.v1.Flunder": {"type": "object"}, "io.k8s.api.core.v1.Pod": {}}}
        part = v2_part(spec, "w.io", "v1")
        self.assertEqual(list(part["paths"]), ["/apis/w.io/v1/flunders"])
        self.assertEqual(sorted(part["definitions"]), ["io.w.v1.Flunder", "io.w.v1.FlunderList"])

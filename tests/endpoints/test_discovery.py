"""Discovery documents: /api, /apis, /apis/<g>, /apis/<g>/<v> and aggregated discovery."""
from __future__ import annotations

import base64
import hashlib

from twisted.trial import unittest

from kapiserver.endpoints import discovery
from kapiserver.machinery.errors import StatusError
from kapiserver.registry.resource_type import ResourceType, Strategy
from tests.endpoints.test_openapi import sample_types


def _crd_version(version: str) -> ResourceType:
    return ResourceType(group="stable.example.com", version=version, kind="CronTab", plural="crontabs",
                        singular="crontab", namespaced=True, strategy=Strategy(), is_crd=True)


class LegacyDiscoveryTests(unittest.TestCase):
    def setUp(self):
        self.types = sample_types()

    def test_api_versions(self):
        doc = discovery.api_versions("10.0.0.1:6443")
        self.assertEqual(doc, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]})

    def test_group_list_built_ins_first_then_custom(self):
        types = self.types + [ResourceType(group="apps", version="v1", kind="Deployment", plural="deployments",
                                           singular="deployment", namespaced=True, strategy=Strategy())]
        doc = discovery.api_group_list(types)
        self.assertEqual((doc["kind"], doc["apiVersion"]), ("APIGroupList", "v1"))
        self.assertEqual([g["name"] for g in doc["groups"]], ["apps", "coordination.k8s.io", "stable.example.com"])
        self.assertEqual(doc["groups"][1]["preferredVersion"],
                         {"groupVersion": "coordination.k8s.io/v1", "version": "v1"})

    def test_preferred_version_follows_kubernetes_priority(self):
        types = [_crd_version(v) for v in ("v1alpha1", "v1beta1", "v1", "v1beta2", "foo", "v2alpha1")]
        group = discovery.api_group("stable.example.com", types)
        self.assertEqual(group["kind"], "APIGroup")
        self.assertEqual([v["version"] for v in group["versions"]],
                         ["v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1", "foo"])
        self.assertEqual(group["preferredVersion"], {"groupVersion": "stable.example.com/v1", "version": "v1"})

    def test_unknown_group_is_404(self):
        with self.assertRaises(StatusError) as cm:
            discovery.api_group("nope.example.com", self.types)
        self.assertEqual(cm.exception.code, 404)
        self.assertRaises(StatusError, discovery.api_resource_list, "apps", "v1", self.types)

    def test_core_resource_list(self):
        doc = discovery.api_resource_list("", "v1", self.types)
        self.assertEqual((doc["kind"], doc["groupVersion"]), ("APIResourceList", "v1"))
        names = [r["name"] for r in doc["resources"]]
        self.assertEqual(names, ["configmaps", "namespaces", "namespaces/status"])
        cm = doc["resources"][0]
        self.assertEqual(cm["verbs"], ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                       "watch"])
        self.assertEqual(cm["shortNames"], ["cm"])
        self.assertTrue(cm["namespaced"])
        expected = base64.b64encode(hashlib.sha256(b"/v1/ConfigMap").digest()[:8]).decode()
        self.assertEqual(cm["storageVersionHash"], expected)
        status = doc["resources"][2]
        self.assertEqual(status, {"name": "namespaces/status", "singularName": "", "namespaced": False,
                                  "kind": "Namespace", "verbs": ["get", "patch", "update"]})

    def test_scale_subresource_is_autoscaling_scale(self):
        doc = discovery.api_resource_list("stable.example.com", "v1", self.types)
        by_name = {r["name"]: r for r in doc["resources"]}
        self.assertEqual(set(by_name), {"crontabs", "crontabs/scale", "crontabs/status"})
        scale = by_name["crontabs/scale"]
        self.assertEqual((scale["group"], scale["version"], scale["kind"]), ("autoscaling", "v1", "Scale"))
        self.assertEqual(by_name["crontabs"]["categories"], ["all"])


class AggregatedDiscoveryTests(unittest.TestCase):
    def setUp(self):
        self.types = sample_types()

    def test_core_group(self):
        doc = discovery.aggregated_discovery(self.types, legacy=True, version="v2")
        self.assertEqual((doc["kind"], doc["apiVersion"]), ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"))
        [item] = doc["items"]
        self.assertEqual(item["metadata"]["name"], "")
        [v1] = item["versions"]
        self.assertEqual((v1["version"], v1["freshness"]), ("v1", "Current"))
        ns = [r for r in v1["resources"] if r["resource"] == "namespaces"][0]
        self.assertEqual(ns["scope"], "Cluster")
        self.assertEqual(ns["singularResource"], "namespace")
        self.assertEqual(ns["responseKind"], {"group": "", "version": "", "kind": "Namespace"})
        self.assertEqual(ns["subresources"], [{"subresource": "status", "verbs": ["get", "patch", "update"],
                                               "responseKind": {"group": "", "version": "", "kind": "Namespace"}}])
        self.assertNotIn("deletecollection", ns["verbs"])

    def test_named_groups_v2beta1(self):
        doc = discovery.aggregated_discovery(self.types, legacy=False, version="v2beta1")
        self.assertEqual(doc["apiVersion"], "apidiscovery.k8s.io/v2beta1")
        self.assertEqual([i["metadata"]["name"] for i in doc["items"]], ["coordination.k8s.io", "stable.example.com"])
        ct = doc["items"][1]["versions"][0]["resources"][0]
        self.assertEqual((ct["resource"], ct["scope"], ct["shortNames"], ct["categories"]),
                         ("crontabs", "Namespaced", ["ct"], ["all"]))
        subs = {s["subresource"]: s for s in ct["subresources"]}
        self.assertEqual(subs["scale"]["responseKind"], {"group": "autoscaling", "version": "v1", "kind": "Scale"})

    def test_versions_in_priority_order_and_output_deterministic(self):
        types = [_crd_version(v) for v in ("v1beta1", "v1", "v2")]
        doc = discovery.aggregated_discovery(types, legacy=False)
        self.assertEqual([v["version"] for v in doc["items"][0]["versions"]], ["v2", "v1", "v1beta1"])
        self.assertEqual(doc, discovery.aggregated_discovery(list(reversed(types)), legacy=False))

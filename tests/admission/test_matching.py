"""Rule matching as upstream's rules.Matcher: operations, groups, versions, resources with
subresources and wildcards, scope; and the equivalent resources of served kinds."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.admission.predicates import match_object_selector, rule_matches
from kapiserver.admission.resources import ResourceMapper, subresource_kind
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery.groupversion import GroupVersionResource
from kapiserver.machinery.labels import selector_from_label_selector_dict
from kapiserver.registry.admission import Attributes
from kapiserver.registry.groups import FixedTypes

TYPES = {(t.group, t.version, t.plural): t for t in builtin_resource_types()}


def attrs(group: str, version: str, plural: str, operation: str = "CREATE", namespace: str = "ns",
          subresource: str = "", obj=None, old=None) -> Attributes:
    return Attributes(operation, TYPES[(group, version, plural)], namespace, "x", obj, old, subresource)


def rule(resources, operations=("*",), groups=("*",), versions=("*",), scope=None) -> dict:
    out = {"operations": list(operations), "apiGroups": list(groups), "apiVersions": list(versions),
           "resources": list(resources)}
    if scope:
        out["scope"] = scope
    return out


class RuleTests(unittest.TestCase):
    def test_resources_and_subresources(self):
        pods_status = attrs("", "v1", "pods", "UPDATE", subresource="status")
        self.assertFalse(rule_matches(rule(["pods"]), pods_status))
        self.assertTrue(rule_matches(rule(["pods/status"]), pods_status))
        self.assertTrue(rule_matches(rule(["pods/*"]), pods_status))
        self.assertTrue(rule_matches(rule(["*/status"]), pods_status))
        self.assertTrue(rule_matches(rule(["*/*"]), pods_status))
        self.assertFalse(rule_matches(rule(["*"]), pods_status))
        self.assertTrue(rule_matches(rule(["*"]), attrs("", "v1", "pods")))
        self.assertTrue(rule_matches(rule(["*/*"]), attrs("", "v1", "pods")))  # "*" subresource: none too

    def test_operations_groups_versions(self):
        create = attrs("apps", "v1", "deployments")
        self.assertTrue(rule_matches(rule(["deployments"], ["CREATE"], ["apps"], ["v1"]), create))
        self.assertFalse(rule_matches(rule(["deployments"], ["UPDATE"]), create))
        self.assertFalse(rule_matches(rule(["deployments"], groups=[""]), create))
        self.assertFalse(rule_matches(rule(["deployments"], versions=["v1beta1"]), create))

    def test_scope(self):
        namespaced = attrs("", "v1", "configmaps")
        cluster = attrs("", "v1", "nodes", namespace="")
        namespace = attrs("", "v1", "namespaces", namespace="")
        self.assertTrue(rule_matches(rule(["*"], scope="Namespaced"), namespaced))
        self.assertFalse(rule_matches(rule(["*"], scope="Namespaced"), cluster))
        self.assertTrue(rule_matches(rule(["*"], scope="Cluster"), cluster))
        self.assertTrue(rule_matches(rule(["*"], scope="Cluster"), namespace))
        self.assertFalse(rule_matches(rule(["*"], scope="Cluster"), namespaced))

    def test_object_selector_matches_new_or_old_object(self):
        selector = selector_from_label_selector_dict({"matchLabels": {"a": "1"}})
        self.assertTrue(match_object_selector(selector, attrs("", "v1", "configmaps", "DELETE",
                                                              old={"metadata": {"labels": {"a": "1"}}})))
        self.assertFalse(match_object_selector(selector, attrs("", "v1", "configmaps", obj={"metadata": {}})))


class EquivalentResourceTests(unittest.TestCase):
    def setUp(self):
        types = builtin_resource_types()
        self.mapper = ResourceMapper(FixedTypes(types))

    def test_events_and_autoscaling_versions_are_equivalent(self):
        events = TYPES[("", "v1", "events")]
        self.assertEqual(set(self.mapper.equivalents(events, "")),
                         {GroupVersionResource("", "v1", "events"),
                          GroupVersionResource("events.k8s.io", "v1", "events")})
        hpa = TYPES[("autoscaling", "v2", "horizontalpodautoscalers")]
        self.assertEqual(len(self.mapper.equivalents(hpa, "")), 2)
        deployments = TYPES[("apps", "v1", "deployments")]
        self.assertEqual(self.mapper.equivalents(deployments, ""),
                         [GroupVersionResource("apps", "v1", "deployments")])

    def test_subresource_kinds(self):
        self.assertEqual(str(subresource_kind(TYPES[("apps", "v1", "deployments")], "scale")),
                         "autoscaling/v1, Kind=Scale")
        self.assertEqual(str(subresource_kind(TYPES[("", "v1", "pods")], "eviction")), "policy/v1, Kind=Eviction")
        self.assertEqual(str(subresource_kind(TYPES[("", "v1", "pods")], "exec")), "v1, Kind=PodExecOptions")
        self.assertEqual(str(subresource_kind(TYPES[("", "v1", "pods")], "status")), "v1, Kind=Pod")
        self.assertIsNone(subresource_kind(TYPES[("", "v1", "configmaps")], "status"))

"""RuntimeClass: pods get their class's overhead, node selector and tolerations; upstream's 403s."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.runtime_class import RuntimeClass, merge_tolerations, same_resources
from kapiserver.machinery import errors
from kapiserver.testing.cases import ServerTestCase, run
from tests.admission.plugin_fakes import FakeLister, attrs, pod


def runtime_class(name: str, overhead: dict = None, selector: dict = None, tolerations: list = None) -> dict:
    rc: dict = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                "handler": "runc"}
    if overhead is not None:
        rc["overhead"] = {"podFixed": overhead}
    if selector is not None or tolerations is not None:
        rc["scheduling"] = {k: v for k, v in (("nodeSelector", selector), ("tolerations", tolerations)) if v}
    return rc


class RuntimeClassTests(unittest.TestCase):
    def setUp(self):
        self.plugin = RuntimeClass(FakeLister(
            runtime_class("kata", {"cpu": "250m", "memory": "120Mi"}, {"sandbox": "kata"},
                          [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]),
            runtime_class("plain")))

    def admit(self, obj: dict) -> None:
        self.successResultOf(defer.ensureDeferred(self.plugin.admit(attrs(obj))))

    def refused(self, obj: dict, phase: str = "admit") -> str:
        failure = self.failureResultOf(defer.ensureDeferred(getattr(self.plugin, phase)(attrs(obj))),
                                       errors.StatusError)
        self.assertEqual(failure.value.code, 403)
        return failure.value.message

    def test_overhead_selector_and_tolerations_are_applied(self):
        p = pod(runtimeClassName="kata", nodeSelector={"zone": "a"},
                tolerations=[{"key": "x", "operator": "Exists"}])
        self.admit(p)
        self.assertEqual(p["spec"]["overhead"], {"cpu": "250m", "memory": "120Mi"})
        self.assertEqual(p["spec"]["nodeSelector"], {"zone": "a", "sandbox": "kata"})
        self.assertEqual(p["spec"]["tolerations"], [{"key": "x", "operator": "Exists"},
                                                    {"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}])
        self.successResultOf(defer.ensureDeferred(self.plugin.validate(attrs(p))))

    def test_a_class_without_rules_changes_nothing(self):
        p = pod(runtimeClassName="plain")
        before = dict(p["spec"])
        self.admit(p)
        self.assertEqual(p["spec"], before)

    def test_upstream_messages(self):
        self.assertEqual(self.refused(pod("a", runtimeClassName="gone")),
                         'pods "a" is forbidden: pod rejected: RuntimeClass "gone" not found')
        self.assertEqual(self.refused(pod("b", runtimeClassName="kata", overhead={"cpu": "1"})),
                         "pods \"b\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined "
                         "Overhead")
        self.assertEqual(self.refused(pod("c", runtimeClassName="kata", nodeSelector={"sandbox": "gvisor"})),
                         'pods "c" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = kata; '
                         'pod.spec.nodeSelector[sandbox] = gvisor')
        self.assertEqual(self.refused(pod("d", overhead={"cpu": "1"}), "validate"),
                         'pods "d" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass '
                         'defined Overhead')

    def test_an_equal_overhead_is_accepted(self):
        p = pod(runtimeClassName="kata", overhead={"cpu": "0.25", "memory": "120Mi"})
        self.admit(p)
        self.assertEqual(p["spec"]["overhead"], {"cpu": "250m", "memory": "120Mi"})

    def test_resources_compare_semantically(self):
        self.assertTrue(same_resources({"cpu": "1000m"}, {"cpu": "1"}))
        self.assertTrue(same_resources(None, {}))
        self.assertFalse(same_resources({"cpu": "1"}, {"cpu": "1", "memory": "1"}))

    def test_merge_drops_what_another_toleration_covers(self):
        everything = {"operator": "Exists"}
        a = {"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"}
        self.assertEqual(merge_tolerations([a], [everything]), [everything])
        self.assertEqual(merge_tolerations([a], [dict(a)]), [a])
        long = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}
        short = dict(long, tolerationSeconds=60)
        self.assertEqual(merge_tolerations([short], [long]), [long])
        self.assertEqual(merge_tolerations([{"key": "b", "operator": "Exists"}], [a]),
                         [{"key": "b", "operator": "Exists"}, a])


class InProcessTests(ServerTestCase):
    @run
    async def test_a_pod_gets_its_class_overhead(self):
        r = await self.client.post("/apis/node.k8s.io/v1/runtimeclasses",
                                   runtime_class("kata", {"cpu": "250m"}, {"sandbox": "kata"}))
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.post("/api/v1/namespaces/default/pods", pod("k", runtimeClassName="kata"))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["overhead"], r.body["spec"]["nodeSelector"]),
                         ({"cpu": "250m"}, {"sandbox": "kata"}))
        r = await self.client.post("/api/v1/namespaces/default/pods", pod("o", overhead={"cpu": "1"}))
        self.assertEqual(r.code, 403, r.body)

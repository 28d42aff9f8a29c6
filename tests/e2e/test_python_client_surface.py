"""The official ``kubernetes`` Python client's typed APIs for the resources and
subresources kapiserver added: eviction (blocked by a budget, then allowed),
binding, pod logs, component statuses, RuntimeClasses and VolumeAttachments."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server


class PythonClientSurfaceTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.api = self.server.python_client()
        self.core = client.CoreV1Api(self.api)
        self.client = client
        self.ns = "pys-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def pod(self, name: str, labels: dict) -> None:
        self.core.create_namespaced_pod(self.ns, {"metadata": {"name": name, "labels": labels},
                                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        self.core.patch_namespaced_pod_status(name, self.ns, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})

    def test_eviction_blocked_by_a_budget_then_allowed(self):
        from kubernetes.client.rest import ApiException
        policy = self.client.PolicyV1Api(self.api)
        self.pod("web", {"app": "web"})
        policy.create_namespaced_pod_disruption_budget(self.ns, {
            "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        policy.patch_namespaced_pod_disruption_budget_status("web", self.ns, {"status": {
            "observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
            "expectedPods": 1}})
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web", "namespace": self.ns}}
        with self.assertRaises(ApiException) as ctx:
            self.core.create_namespaced_pod_eviction("web", self.ns, eviction)
        self.assertEqual(ctx.exception.status, 429)
        body = json.loads(ctx.exception.body)
        self.assertEqual(body["details"]["causes"], [{"reason": "DisruptionBudget", "message":
                                                      "The disruption budget web needs 1 healthy pods and has 1 "
                                                      "currently"}])
        policy.patch_namespaced_pod_disruption_budget_status("web", self.ns, {"status": {"disruptionsAllowed": 1}})
        self.core.create_namespaced_pod_eviction("web", self.ns, eviction, _preload_content=False)
        self.assertEqual(self.core.list_namespaced_pod(self.ns).items, [])
        budget = policy.read_namespaced_pod_disruption_budget("web", self.ns)
        self.assertEqual((budget.status.disruptions_allowed, list(budget.status.disrupted_pods)), (0, ["web"]))

    def test_binding_and_log(self):
        self.core.create_namespaced_pod(self.ns, {"metadata": {"name": "p"},
                                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        self.assertFalse(self.core.read_namespaced_pod_log("p", self.ns))  # 204: no node, no log yet
        self.core.create_namespaced_binding(self.ns, {"metadata": {"name": "p"}, "target": {"name": "node-1"}},
                                            _preload_content=False)
        pod = self.core.read_namespaced_pod("p", self.ns)
        self.assertEqual(pod.spec.node_name, "node-1")
        self.assertEqual([(c.type, c.status) for c in pod.status.conditions], [("PodScheduled", "True")])

    def test_component_statuses_and_new_kinds(self):
        statuses = self.core.list_component_status()
        self.assertEqual([(s.metadata.name, s.conditions[0].status) for s in statuses.items], [("sqlite-0", "True")])
        node = self.client.NodeV1Api(self.api)
        name = f"rc-{self.ns}"
        node.create_runtime_class({"metadata": {"name": name}, "handler": "runsc"})
        self.addCleanup(lambda: node.delete_runtime_class(name))
        self.assertEqual(node.read_runtime_class(name).handler, "runsc")
        storage = self.client.StorageV1Api(self.api)
        created = storage.create_volume_attachment({"metadata": {"name": name}, "spec": {
            "attacher": "ebs.csi.aws.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}}})
        self.addCleanup(lambda: storage.delete_volume_attachment(name))
        self.assertFalse(created.status.attached)

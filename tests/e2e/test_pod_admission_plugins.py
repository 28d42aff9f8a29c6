"""Priority, TaintNodesByCondition, RuntimeClass and (enabled in the server's configuration)
AlwaysPullImages on a real server, through the kubernetes Python client and kubectl.

The module has a server of its own: a globalDefault PriorityClass and AlwaysPullImages would
change the pods of every other test sharing the default server."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

CONFIG = dict(E2E_CONFIG, admission={"enable_plugins": ["AlwaysPullImages"]})


def pod_body(name: str, image: str = "nginx:1.27", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": image}], **spec}}


class PodAdmissionPluginTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server("pod-admission-plugins", extra_config=CONFIG)
        self.api = self.server.python_client()
        self.core = client.CoreV1Api(self.api)
        self.ns = "podadm-" + uuid.uuid4().hex[:8]
        self.server.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.server.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def create_pod(self, name: str, **spec) -> dict:
        created = self.core.create_namespaced_pod(self.ns, pod_body(name, **spec))
        return self.api.sanitize_for_serialization(created)

    def refused(self, name: str, **spec):
        from kubernetes.client.rest import ApiException
        with self.assertRaises(ApiException) as caught:
            self.core.create_namespaced_pod(self.ns, pod_body(name, **spec))
        return caught.exception.status, json.loads(caught.exception.body)["message"]

    def apply(self, manifest: dict) -> None:
        self.server.kubectl("apply", "-f", "-", input=json.dumps(manifest))
        kind, name = manifest["kind"].lower(), manifest["metadata"]["name"]
        self.addCleanup(lambda: self.server.kubectl("delete", kind, name, "--wait=false", check=False))

    def test_system_cluster_critical_priority(self):
        got = self.create_pod("critical", priorityClassName="system-cluster-critical")
        self.assertEqual((got["spec"]["priority"], got["spec"]["preemptionPolicy"]),
                         (2000000000, "PreemptLowerPriority"))

    def test_unknown_class_is_refused(self):
        self.assertEqual(self.refused("lost", priorityClassName="no-such-class"),
                         (403, 'pods "lost" is forbidden: no PriorityClass with name no-such-class was found'))
        result = self.server.kubectl("-n", self.ns, "run", "lost", "--image=nginx", "--restart=Never",
                                     "--overrides", json.dumps({"spec": {"priorityClassName": "no-such-class"}}),
                                     check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn('pods "lost" is forbidden: no PriorityClass with name no-such-class was found', result.stderr)

    def test_global_default_class_is_applied(self):
        name = "default-" + uuid.uuid4().hex[:6]
        self.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                    "value": 1234, "globalDefault": True, "preemptionPolicy": "Never"})
        got = {}
        for _ in range(50):  # the plugin sees classes through an informer
            got = self.create_pod("d" + uuid.uuid4().hex[:6])
            if got["spec"].get("priorityClassName") == name:
                break
        self.assertEqual((got["spec"].get("priorityClassName"), got["spec"]["priority"],
                          got["spec"]["preemptionPolicy"]), (name, 1234, "Never"))

    def test_new_nodes_are_tainted_not_ready(self):
        name = "node-" + uuid.uuid4().hex[:6]
        self.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        node = json.loads(self.server.kubectl("get", "node", name, "-o", "json").stdout)
        self.assertEqual(node["spec"]["taints"], [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])

    def test_runtime_class_overhead_and_scheduling(self):
        name = "sandbox-" + uuid.uuid4().hex[:6]
        self.apply({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                    "handler": "kata", "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
                    "scheduling": {"nodeSelector": {"runtime": "kata"},
                                   "tolerations": [{"key": "runtime", "operator": "Equal", "value": "kata",
                                                    "effect": "NoSchedule"}]}})
        got = self.create_pod("sandboxed", runtimeClassName=name, nodeSelector={"zone": "a"})
        spec = got["spec"]
        self.assertEqual(spec["overhead"], {"cpu": "250m", "memory": "120Mi"})
        self.assertEqual(spec["nodeSelector"], {"zone": "a", "runtime": "kata"})
        self.assertIn({"key": "runtime", "operator": "Equal", "value": "kata", "effect": "NoSchedule"},
                      spec["tolerations"])
        self.assertEqual(self.refused("conflict", runtimeClassName=name, nodeSelector={"runtime": "runc"}),
                         (403, f'pods "conflict" is forbidden: conflict: runtimeClass.scheduling.nodeSelector'
                               f'[runtime] = kata; pod.spec.nodeSelector[runtime] = runc'))
        self.assertEqual(self.refused("missing", runtimeClassName="no-such-runtime"),
                         (403, 'pods "missing" is forbidden: pod rejected: RuntimeClass "no-such-runtime" not found'))

    def test_always_pull_images_when_enabled(self):
        got = self.create_pod("pulls", initContainers=[{"name": "i", "image": "busybox:1.36",
                                                        "imagePullPolicy": "IfNotPresent"}])
        self.assertEqual([c["imagePullPolicy"] for c in got["spec"]["initContainers"] + got["spec"]["containers"]],
                         ["Always", "Always"])

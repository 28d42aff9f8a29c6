"""The field selectors node components list and watch with, through the official Python client
against a real kapiserver process: the kubelet's Services (``spec.clusterIP!=None``) and its
Pods (``spec.nodeName=<node>``), kube-scheduler's unfinished Pods
(``status.phase!=Succeeded,status.phase!=Failed``).  A watch sees an object ADDED when it starts
matching (a Pod bound to the node) and DELETED when it stops (a Pod that finished), as upstream."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

class NodeFieldSelectorTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.client = client
        self.core = client.CoreV1Api(self.server.python_client())
        self.ns = "fsel-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def watch(self, list_fn, count: int, **kw) -> list[tuple[str, str]]:
        """The first ``count`` events of a watch (the server ends it after a few seconds)."""
        from kubernetes import watch
        w = watch.Watch()
        events = []
        for event in w.stream(list_fn, timeout_seconds=5, **kw):
            events.append((event["type"], event["object"].metadata.name))
            if len(events) == count:
                w.stop()
        return events

    def service(self, name: str, cluster_ip: str = "") -> None:
        c = self.client
        spec = c.V1ServiceSpec(ports=[c.V1ServicePort(port=80)], cluster_ip=cluster_ip or None)
        self.core.create_namespaced_service(self.ns, c.V1Service(metadata=c.V1ObjectMeta(name=name), spec=spec))

    def test_services_with_a_cluster_ip(self):
        start = self.core.list_namespaced_service(self.ns).metadata.resource_version
        self.service("normal")
        self.service("headless", cluster_ip="None")
        listed = self.core.list_service_for_all_namespaces(field_selector="spec.clusterIP!=None")
        names = {(s.metadata.namespace, s.metadata.name) for s in listed.items}
        self.assertIn((self.ns, "normal"), names)
        self.assertIn(("default", "kubernetes"), names)
        self.assertNotIn((self.ns, "headless"), names)
        self.core.delete_namespaced_service("headless", self.ns)
        self.core.delete_namespaced_service("normal", self.ns)
        events = self.watch(self.core.list_namespaced_service, 2, namespace=self.ns, resource_version=start,
                            field_selector="spec.clusterIP!=None")
        self.assertEqual(events, [("ADDED", "normal"), ("DELETED", "normal")])
        # the label conversion's refusal, as upstream words it for Services
        from kubernetes.client.rest import ApiException
        with self.assertRaises(ApiException) as ctx:
            self.core.list_namespaced_service(self.ns, field_selector="spec.ports=80")
        self.assertEqual(ctx.exception.status, 400)
        self.assertEqual(json.loads(ctx.exception.body)["message"], "field label not supported: spec.ports")

    def test_pods_bound_to_a_node_and_pods_not_finished(self):
        c = self.client
        node = "knode-" + self.ns  # pods of other tests are never bound to it
        start = self.core.list_namespaced_pod(self.ns).metadata.resource_version
        pod = c.V1Pod(metadata=c.V1ObjectMeta(name="p"),
                      spec=c.V1PodSpec(containers=[c.V1Container(name="app", image="busybox")]))
        self.core.create_namespaced_pod(self.ns, pod)
        self.assertEqual(self.core.list_namespaced_pod(self.ns, field_selector=f"spec.nodeName={node}").items, [])
        binding = c.V1Binding(metadata=c.V1ObjectMeta(name="p"), target=c.V1ObjectReference(kind="Node", name=node))
        # the generated client cannot read the Status a binding answers with: the raw response instead
        self.assertEqual(self.core.create_namespaced_pod_binding("p", self.ns, binding, _preload_content=False)
                         .status, 201)
        bound = self.core.list_namespaced_pod(self.ns, field_selector=f"spec.nodeName={node}")
        self.assertEqual([p.metadata.name for p in bound.items], ["p"])
        # the old v1 clients' name for spec.nodeName
        self.assertEqual(len(self.core.list_namespaced_pod(self.ns, field_selector=f"spec.host={node}").items), 1)
        self.core.patch_namespaced_pod_status("p", self.ns, {"status": {"phase": "Running", "podIP": "10.244.0.9"}})
        by_ip = self.core.list_pod_for_all_namespaces(field_selector="status.podIP=10.244.0.9")
        self.assertEqual([p.metadata.name for p in by_ip.items], ["p"])
        self.core.patch_namespaced_pod_status("p", self.ns, {"status": {"phase": "Succeeded"}})

        # the kubelet's watch: nothing until the pod is bound to its node, then ADDED
        kubelet = self.watch(self.core.list_pod_for_all_namespaces, 3, resource_version=start,
                             field_selector=f"spec.nodeName={node}")
        self.assertEqual(kubelet, [("ADDED", "p"), ("MODIFIED", "p"), ("MODIFIED", "p")])
        # kube-scheduler's watch: DELETED when the pod finishes
        scheduler = self.watch(self.core.list_namespaced_pod, 4, namespace=self.ns, resource_version=start,
                               field_selector="status.phase!=Succeeded,status.phase!=Failed")
        self.assertEqual(scheduler, [("ADDED", "p"), ("MODIFIED", "p"), ("MODIFIED", "p"), ("DELETED", "p")])
        finished = self.core.list_namespaced_pod(self.ns, field_selector="status.phase!=Succeeded,"
                                                                         "status.phase!=Failed")
        self.assertEqual(finished.items, [])

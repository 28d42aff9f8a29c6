"""Pods, Services and ReplicationControllers on a real server process, driven
by kubectl (apply -f, get, scale, patch) and the official Python client."""
from __future__ import annotations

import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

MANIFEST = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports: [{containerPort: 80, name: http}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30080}]
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: rc
spec:
  replicas: 2
  template:
    metadata: {labels: {app: rc}}
    spec:
      containers: [{name: c, image: busybox}]
"""


class CoreWorkloadsKubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.ns = "core-" + uuid.uuid4().hex[:8]
        self.server.kubectl("create", "namespace", self.ns)
        self.addCleanup(lambda: self.server.kubectl("delete", "namespace", self.ns, "--wait=false", check=False))

    def kubectl(self, *args: str, **kw):
        return self.server.kubectl("-n", self.ns, *args, **kw)

    def test_apply_get_scale_patch_delete(self):
        out = self.kubectl("apply", "-f", "-", input=MANIFEST).stdout
        self.assertIn("pod/web created", out)
        self.assertIn("service/web created", out)
        self.assertIn("replicationcontroller/rc created", out)
        pods = self.kubectl("get", "pods").stdout.splitlines()
        self.assertEqual(pods[0].split(), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"])
        self.assertEqual(pods[1].split()[:4], ["web", "0/1", "Pending", "0"])
        svc = self.kubectl("get", "svc", "-o", "wide").stdout.splitlines()
        self.assertEqual(svc[0].split(), ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"])
        row = svc[1].split()
        self.assertEqual((row[0], row[1], row[3], row[4], row[6]), ("web", "NodePort", "<none>", "80:30080/TCP",
                                                                    "app=web"))
        self.assertTrue(row[2].startswith("10."))
        everything = self.kubectl("get", "all").stdout
        for name in ("pod/web", "service/web", "replicationcontroller/rc"):
            self.assertIn(name, everything)
        # re-applying the same manifest changes nothing, even the allocated cluster IP
        self.assertIn("service/web unchanged", self.kubectl("apply", "-f", "-", input=MANIFEST).stdout)
        self.assertEqual(self.kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout, row[2])
        self.kubectl("scale", "rc/rc", "--replicas=4")
        rc = self.kubectl("get", "rc").stdout.splitlines()
        self.assertEqual(rc[0].split(), ["NAME", "DESIRED", "CURRENT", "READY", "AGE"])
        self.assertEqual(rc[1].split()[:4], ["rc", "4", "0", "0"])
        self.kubectl("patch", "pod", "web", "-p", '{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}')
        self.assertEqual(self.kubectl("get", "pod", "web", "-o", "jsonpath={.spec.containers[0].image}").stdout,
                         "nginx:1.28")
        bad = self.kubectl("patch", "pod", "web", "-p", '{"spec":{"hostname":"x"}}', check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("pod updates may not change fields other than", bad.stderr)
        self.kubectl("delete", "pod", "web", "--wait=false")
        self.assertNotIn("web", self.kubectl("get", "pods", "-o", "name").stdout)


class CoreWorkloadsPythonClientTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.client = client
        self.core = client.CoreV1Api(self.server.python_client())
        self.ns = "corepy-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def test_typed_pod_and_service_api(self):
        c = self.client
        pod = c.V1Pod(metadata=c.V1ObjectMeta(name="p", labels={"app": "p"}),
                      spec=c.V1PodSpec(containers=[c.V1Container(name="app", image="redis:7")]))
        created = self.core.create_namespaced_pod(self.ns, pod)
        self.assertEqual((created.status.phase, created.spec.restart_policy, created.spec.service_account_name),
                         ("Pending", "Always", "default"))
        self.core.patch_namespaced_pod_status("p", self.ns, {"status": {"phase": "Running", "podIP": "10.244.0.5"}})
        self.assertEqual(self.core.read_namespaced_pod("p", self.ns).status.pod_ip, "10.244.0.5")
        svc = c.V1Service(metadata=c.V1ObjectMeta(name="s"),
                          spec=c.V1ServiceSpec(selector={"app": "p"}, ports=[c.V1ServicePort(port=6379)]))
        made = self.core.create_namespaced_service(self.ns, svc)
        self.assertEqual((made.spec.type, made.spec.ports[0].target_port, made.spec.ip_families),
                         ("ClusterIP", 6379, ["IPv4"]))
        self.core.delete_namespaced_pod("p", self.ns)
        self.core.delete_namespaced_service("s", self.ns)
        self.assertEqual(self.core.list_namespaced_pod(self.ns).items, [])

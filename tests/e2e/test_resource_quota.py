"""ResourceQuota against a real kapiserver process (its own quota controller), with kubectl and the
official Python client: a `pods: 2` quota refuses the third Pod with upstream's message,
`kubectl describe quota` shows the usage, and deleting a Pod frees its slot."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, shared_server


class ResourceQuotaKubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "quota-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def used(self, name: str) -> dict:
        quota = json.loads(self.kubectl("-n", self.ns, "get", "quota", name, "-o", "json").stdout)
        return (quota.get("status") or {}).get("used") or {}

    def test_third_pod_is_refused_and_a_delete_frees_the_slot(self):
        self.kubectl("-n", self.ns, "create", "quota", "q", "--hard=pods=2,count/configmaps=10")
        wait_for(lambda: self.used("q").get("pods") == "0")
        for name in ("p1", "p2"):
            self.kubectl("-n", self.ns, "run", name, "--image=nginx", "--restart=Never")
        third = self.kubectl("-n", self.ns, "run", "p3", "--image=nginx", "--restart=Never", check=False)
        self.assertNotEqual(third.returncode, 0)
        self.assertIn('Error from server (Forbidden): pods "p3" is forbidden: exceeded quota: q, requested: pods=1, '
                      'used: pods=2, limited: pods=2', third.stderr)
        described = self.kubectl("-n", self.ns, "describe", "quota", "q").stdout
        rows = {line.split()[0]: line.split()[1:] for line in described.splitlines()
                if line.startswith(("pods ", "count/configmaps "))}
        self.assertEqual(rows["pods"], ["2", "2"], described)
        # the namespace's kube-root-ca.crt ConfigMap counts too
        self.assertEqual(rows["count/configmaps"], ["1", "10"], described)

        self.kubectl("-n", self.ns, "delete", "pod", "p1")
        wait_for(lambda: self.used("q").get("pods") == "1")
        self.kubectl("-n", self.ns, "run", "p3", "--image=nginx", "--restart=Never")
        self.assertEqual(self.used("q")["pods"], "2")

    def test_compute_quota_with_the_python_client(self):
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        core = client.CoreV1Api(self.server.python_client())
        core.create_namespaced_resource_quota(self.ns, client.V1ResourceQuota(
            metadata=client.V1ObjectMeta(name="compute"),
            spec=client.V1ResourceQuotaSpec(hard={"requests.cpu": "1", "limits.memory": "1Gi"})))
        wait_for(lambda: set((core.read_namespaced_resource_quota("compute", self.ns).status.used or {}))
                 == {"requests.cpu", "limits.memory"})

        def pod(name: str, resources):
            return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(
                containers=[client.V1Container(name="app", image="nginx", resources=resources)]))
        with self.assertRaises(ApiException) as caught:
            core.create_namespaced_pod(self.ns, pod("bare", None))
        self.assertEqual(caught.exception.status, 403)
        self.assertEqual(json.loads(caught.exception.body)["message"],
                         'pods "bare" is forbidden: failed quota: compute: must specify limits.memory for: app; '
                         'requests.cpu for: app')
        sized = client.V1ResourceRequirements(requests={"cpu": "600m"}, limits={"memory": "512Mi"})
        core.create_namespaced_pod(self.ns, pod("a", sized))
        status = core.read_namespaced_resource_quota("compute", self.ns).status
        self.assertEqual(status.used, {"requests.cpu": "600m", "limits.memory": "512Mi"})
        self.assertEqual(status.hard, {"requests.cpu": "1", "limits.memory": "1Gi"})
        with self.assertRaises(ApiException) as caught:
            core.create_namespaced_pod(self.ns, pod("b", sized))
        self.assertEqual(json.loads(caught.exception.body)["message"],
                         'pods "b" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, '
                         'used: requests.cpu=600m, limited: requests.cpu=1')

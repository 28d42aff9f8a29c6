"""LimitRanger against a real kapiserver process, with kubectl and the official Python client: a
LimitRange's defaults fill the resources of containers that set none (and the pod says so in
upstream's annotation), and its min/max/ratio refuse pods and claims with upstream's messages."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

LIMIT_RANGE = """
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 256Mi}
    defaultRequest: {cpu: 100m, memory: 128Mi}
    max: {cpu: "1"}
    maxLimitRequestRatio: {memory: "4"}
  - type: PersistentVolumeClaim
    min: {storage: 1Gi}
    max: {storage: 10Gi}
"""


class LimitRangerTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "limits-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))
        self.kubectl("-n", self.ns, "apply", "-f", "-", input=LIMIT_RANGE)

    def test_defaults_fill_container_resources(self):
        self.kubectl("-n", self.ns, "run", "web", "--image=nginx", "--restart=Never")
        pod = json.loads(self.kubectl("-n", self.ns, "get", "pod", "web", "-o", "json").stdout)
        self.assertEqual(pod["spec"]["containers"][0]["resources"],
                         {"limits": {"cpu": "500m", "memory": "256Mi"},
                          "requests": {"cpu": "100m", "memory": "128Mi"}})
        self.assertEqual(pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
                         "LimitRanger plugin set: cpu, memory request for container web; "
                         "cpu, memory limit for container web")
        # the class counts what LimitRanger set (requests below the limits)
        self.assertEqual(pod["status"]["qosClass"], "Burstable")
        # what the container sets is kept; only the rest is defaulted
        from kubernetes import client
        core = client.CoreV1Api(self.server.python_client())
        created = core.create_namespaced_pod(self.ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name="sized"), spec=client.V1PodSpec(containers=[client.V1Container(
                name="app", image="nginx", resources=client.V1ResourceRequirements(limits={"cpu": "800m"}))])))
        resources = created.spec.containers[0].resources
        self.assertEqual(resources.limits, {"cpu": "800m", "memory": "256Mi"})
        self.assertEqual(resources.requests, {"cpu": "800m", "memory": "128Mi"})  # the request defaults to the limit

    def test_max_and_ratio_refuse_a_pod(self):
        refused = self.kubectl("-n", self.ns, "run", "big", "--image=nginx", "--restart=Never",
                               "--overrides", json.dumps({"spec": {"containers": [{
                                   "name": "big", "image": "nginx",
                                   "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                                                 "requests": {"memory": "128Mi"}}}]}}), check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn('Error from server (Forbidden): pods "big" is forbidden: [maximum cpu usage per Container is 1, '
                      'but limit is 2, memory max limit to request ratio per Container is 4, but provided ratio is '
                      '8.000000]', refused.stderr)

    def test_claim_size_bounds(self):
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        core = client.CoreV1Api(self.server.python_client())

        def claim(name: str, size: str):
            return client.V1PersistentVolumeClaim(metadata=client.V1ObjectMeta(name=name),
                                                  spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=client.V1VolumeResourceRequirements(requests={"storage": size})))
        core.create_namespaced_persistent_volume_claim(self.ns, claim("ok", "5Gi"))
        for name, size, why in (("small", "500Mi", "minimum storage usage per PersistentVolumeClaim is 1Gi, "
                                                   "but request is 500Mi"),
                                ("large", "20Gi", "maximum storage usage per PersistentVolumeClaim is 10Gi, "
                                                  "but request is 20Gi")):
            with self.assertRaises(ApiException) as caught:
                core.create_namespaced_persistent_volume_claim(self.ns, claim(name, size))
            self.assertEqual(caught.exception.status, 403)
            self.assertEqual(json.loads(caught.exception.body)["message"],
                             f'persistentvolumeclaims "{name}" is forbidden: {why}')

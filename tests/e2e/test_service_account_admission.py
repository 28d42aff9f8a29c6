"""ServiceAccount admission on a real server, through kubectl and the kubernetes client: pods get the
``default`` service account and the projected ``kube-api-access-...`` token volume mounted in every
container, a pod naming a service account that does not exist is refused as upstream refuses it, and
``automountServiceAccountToken: false`` leaves the token out."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.cases import HANG_GUARD
from kapiserver.testing.process import E2E_CONFIG, shared_server
from tests.admission.test_service_account import TOKEN_VOLUME, TOKEN_VOLUME_PROJECTION

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


class ServiceAccountAdmissionTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.ns = "sa-admission-" + uuid.uuid4().hex[:8]
        self.server.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.server.kubectl("delete", "ns", self.ns, "--wait=false", check=False))
        self.core = client.CoreV1Api(self.server.python_client())

    def run_pod(self, name: str, *overrides: str) -> dict:
        self.server.kubectl("-n", self.ns, "run", name, "--image=nginx", "--restart=Never", *overrides)
        return json.loads(self.server.kubectl("-n", self.ns, "get", "pod", name, "-o", "json").stdout)

    def test_pod_gets_the_default_service_account_and_the_token_volume(self):
        pod = self.run_pod("plain", "--overrides", json.dumps(
            {"spec": {"initContainers": [{"name": "init", "image": "busybox"}]}}))
        spec = pod["spec"]
        self.assertEqual((spec["serviceAccountName"], spec["serviceAccount"]), ("default", "default"))
        [volume] = spec["volumes"]
        self.assertRegex(volume["name"], TOKEN_VOLUME)
        self.assertEqual(volume["projected"], TOKEN_VOLUME_PROJECTION)
        for c in spec["containers"] + spec["initContainers"]:
            self.assertEqual(c["volumeMounts"], [{"name": volume["name"], "readOnly": True, "mountPath": MOUNT_PATH}])

    def test_missing_service_account_is_forbidden(self):
        from kubernetes.client.rest import ApiException
        with self.assertRaises(ApiException) as caught:
            self.core.create_namespaced_pod(self.ns, {
                "metadata": {"name": "lost"},
                "spec": {"serviceAccountName": "nobody", "containers": [{"name": "c", "image": "nginx"}]}})
        self.assertEqual(caught.exception.status, 403)
        body = json.loads(caught.exception.body)
        self.assertEqual((body["reason"], body["message"]), (
            "Forbidden", f'pods "lost" is forbidden: error looking up service account {self.ns}/nobody: '
                         f'serviceaccount "nobody" not found'))

    def test_named_service_account_with_image_pull_secrets(self):
        self.core.create_namespaced_service_account(self.ns, {
            "metadata": {"name": "robot"}, "imagePullSecrets": [{"name": "registry"}]})
        pod = self.core.create_namespaced_pod(self.ns, {
            "metadata": {"name": "robotic"},
            "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "nginx"}]}})
        self.assertEqual(pod.spec.service_account_name, "robot")
        self.assertEqual([s.name for s in pod.spec.image_pull_secrets], ["registry"])
        self.assertEqual([m.mount_path for m in pod.spec.containers[0].volume_mounts], [MOUNT_PATH])

    def test_automount_false_gives_no_volume(self):
        pod = self.run_pod("quiet", "--overrides", json.dumps({"spec": {"automountServiceAccountToken": False}}))
        self.assertEqual(pod["spec"]["serviceAccountName"], "default")
        self.assertNotIn("volumes", pod["spec"])
        self.assertNotIn("volumeMounts", pod["spec"]["containers"][0])
        self.core.create_namespaced_service_account(self.ns, {
            "metadata": {"name": "mute"}, "automountServiceAccountToken": False})
        pod = self.core.create_namespaced_pod(self.ns, {
            "metadata": {"name": "muted"},
            "spec": {"serviceAccountName": "mute", "containers": [{"name": "c", "image": "nginx"}]}})
        self.assertIsNone(pod.spec.volumes)

    def test_a_pod_right_after_its_namespace_waits_for_the_default_service_account(self):
        ns = "sa-fresh-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": ns}})
        self.addCleanup(lambda: self.server.kubectl("delete", "ns", ns, "--wait=false", check=False))
        # admitted (the admission waits for the controller's default ServiceAccount), not refused;
        # how long it waited is not timed: the client's guard against a hang bounds it
        pod = self.core.create_namespaced_pod(ns, {"metadata": {"name": "first"},
                                                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                                              _request_timeout=HANG_GUARD)
        self.assertEqual(pod.spec.service_account_name, "default")

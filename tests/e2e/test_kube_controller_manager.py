"""The real kube-controller-manager (v1.32.13, the anchor build) as kapiserver's controller manager.

kapiserver runs with its own copies of kube-controller-manager's controllers
switched off (``controllers.enabled: false``); kube-controller-manager runs
with the flags a cluster gives it. What it does must show through kapiserver:
the serviceaccount and root CA publisher controllers fill a new namespace, a
Deployment gets its ReplicaSet and Pods, the garbage collector removes them
with it, and its log shows no error coming back again and again. Skipped
where the anchor kit was not built (CI).
"""
from __future__ import annotations

import atexit
import base64
import json
import os
import time
import uuid

from twisted.trial import unittest

from kapiserver.testing import control_plane
from kapiserver.testing.process import ServerProcess

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
}


def wait_for(check, timeout: float = 60.0, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


_cluster: dict = {}


def cluster() -> tuple[ServerProcess, control_plane.ControllerManagerProcess]:
    """One kapiserver process with kube-controller-manager for the module (stopped at exit)."""
    if not _cluster:
        server = ServerProcess(extra_config={"controllers": {"enabled": False}}).start()
        kcm = control_plane.ControllerManagerProcess(server.server_url, os.path.join(server.workdir, "certs"),
                                                     server.workdir).start()
        atexit.register(server.cleanup)
        atexit.register(kcm.stop)  # registered last: runs first
        _cluster.update(server=server, kcm=kcm)
        if not kcm.wait_for_log(r"Started controller", timeout=60):
            raise AssertionError(f"kube-controller-manager did not start its controllers:\n{kcm.log()[-3000:]}")
    return _cluster["server"], _cluster["kcm"]


class KubeControllerManagerTests(unittest.TestCase):
    def setUp(self):
        if not control_plane.available():
            raise unittest.SkipTest(f"{control_plane.KUBE_CONTROLLER_MANAGER} is absent: build kube-controller-manager "
                                    f"with the anchor kit (its README) to run these tests")
        from kubernetes import client
        self.server, self.kcm = cluster()
        self.api = self.server.python_client()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.ns = "kcm-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})

    def test_namespace_gets_its_service_account_and_root_ca_from_kube_controller_manager(self):
        wait_for(lambda: self._get(self.core.read_namespaced_service_account, "default"))
        cm = wait_for(lambda: self._get(self.core.read_namespaced_config_map, "kube-root-ca.crt"))
        with open(os.path.join(self.server.workdir, "certs", "ca.crt")) as f:
            self.assertEqual(cm.data["ca.crt"], f.read())  # --root-ca-file
        self.assertEqual({(e.manager, e.operation) for e in cm.metadata.managed_fields},
                         {("kube-controller-manager", "Update")})

    def test_deployment_gets_replica_set_and_pods_which_go_with_it(self):
        self.apps.create_namespaced_deployment(self.ns, DEPLOYMENT)
        rs = wait_for(lambda: self.apps.list_namespaced_replica_set(self.ns).items)[0]
        self.assertEqual([(o.kind, o.name, o.controller) for o in rs.metadata.owner_references],
                         [("Deployment", "web", True)])
        pods = wait_for(self._pods)
        self.assertEqual({o.name for p in pods for o in p.metadata.owner_references}, {rs.metadata.name})
        self.assertTrue(all(p.metadata.name.startswith(rs.metadata.name + "-") for p in pods))
        wait_for(lambda: self.apps.read_namespaced_deployment("web", self.ns).status.replicas == 2)
        self.assertEqual(self.apps.read_namespaced_deployment("web", self.ns).status.observed_generation, 1)

        self.apps.delete_namespaced_deployment("web", self.ns)  # background: the garbage collector's work
        wait_for(lambda: not self.apps.list_namespaced_replica_set(self.ns).items
                 and not self.core.list_namespaced_pod(self.ns).items)

    def test_job_gets_its_pods(self):
        from kubernetes import client
        batch = client.BatchV1Api(self.api)
        batch.create_namespaced_job(self.ns, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
        pods = wait_for(self._pods)
        self.assertEqual({p.metadata.labels["job-name"] for p in pods}, {"once"})
        wait_for(lambda: batch.read_namespaced_job("once", self.ns).status.active == 2)

    def test_service_gets_endpoints_and_endpoint_slice(self):
        from kubernetes import client
        self.core.create_namespaced_service(self.ns, {
            "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
        endpoints = wait_for(lambda: self._get(self.core.read_namespaced_endpoints, "web"))
        self.assertIsNone(endpoints.subsets)  # no pod is ready
        slices = wait_for(lambda: client.DiscoveryV1Api(self.api).list_namespaced_endpoint_slice(
            self.ns, label_selector="kubernetes.io/service-name=web").items)
        self.assertEqual(slices[0].metadata.labels["endpointslice.kubernetes.io/managed-by"],
                         "endpointslice-controller.k8s.io")

    def test_legacy_token_secret_is_filled_with_a_token_the_server_accepts(self):
        from kubernetes import client
        wait_for(lambda: self._get(self.core.read_namespaced_service_account, "default"))
        self.core.create_namespaced_secret(self.ns, {
            "metadata": {"name": "tok", "annotations": {"kubernetes.io/service-account.name": "default"}},
            "type": "kubernetes.io/service-account-token"})
        secret = wait_for(lambda: (lambda s: s if (s.data or {}).get("token") else None)(
            self.core.read_namespaced_secret("tok", self.ns)))
        token = base64.b64decode(secret.data["token"]).decode()
        review = client.AuthenticationV1Api(self.api).create_token_review({"spec": {"token": token}})
        self.assertTrue(review.status.authenticated, review.status.error)
        self.assertEqual(review.status.user.username, f"system:serviceaccount:{self.ns}:default")

    def test_resource_quota_usage_is_computed(self):
        # the quota first: the controller's first count of a quota made after an object depends on its
        # informer having seen that object (else it is counted at the next full resync, minutes later);
        # an object made after the quota is charged by the server's ResourceQuota admission
        self.core.create_namespaced_resource_quota(self.ns, {
            "metadata": {"name": "q"}, "spec": {"hard": {"count/configmaps": "10", "pods": "5"}}})
        quota = wait_for(lambda: (lambda q: q if q.status and q.status.used else None)(
            self.core.read_namespaced_resource_quota("q", self.ns)))
        self.assertEqual(quota.status.hard, {"count/configmaps": "10", "pods": "5"})
        self.assertEqual(quota.status.used["pods"], "0")
        counted = int(quota.status.used["count/configmaps"])
        self.core.create_namespaced_config_map(self.ns, {"metadata": {"name": "one"}})
        wait_for(lambda: int(self.core.read_namespaced_resource_quota("q", self.ns).status.used["count/configmaps"])
                 > counted)

    def test_validating_admission_policy_gets_its_type_checking_status(self):
        # kube-controller-manager's policy status controller applies status (server-side apply) to a
        # kind that refuses updates without a resourceVersion
        from kubernetes import client
        admission = client.AdmissionregistrationV1Api(self.api)
        name = self.ns + "-policy"
        admission.create_validating_admission_policy({
            "metadata": {"name": name},
            "spec": {"validations": [{"expression": "object.spec.replicass > 0"}], "matchConstraints": {
                "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                   "resources": ["deployments"]}]}}})
        self.addCleanup(admission.delete_validating_admission_policy, name)
        policy = wait_for(lambda: (lambda p: p if p.status and p.status.observed_generation else None)(
            admission.read_validating_admission_policy(name)))
        self.assertEqual([w.field_ref for w in policy.status.type_checking.expression_warnings],
                         ["spec.validations[0].expression"])
        self.assertIn("undefined field 'replicass'", policy.status.type_checking.expression_warnings[0].warning)
        self.assertIn(("validatingadmissionpolicy-status", "Apply", "status"),  # its ControllerName
                      {(e.manager, e.operation, e.subresource) for e in policy.metadata.managed_fields})

    def test_zz_no_error_loops_in_its_log(self):
        # after the other tests' work (trial runs tests in name order), and a few resyncs
        time.sleep(20)
        served = self._served_resources()
        loops = {line: n for line, n in self.kcm.repeated_errors().items()
                 if not self._about_unserved_resource(line, served)}
        self.maxDiff = None
        self.assertEqual(loops, {}, "kube-controller-manager keeps logging errors")

    # ------------------------------------------------------------ helpers

    def _get(self, read, name):
        from kubernetes.client.rest import ApiException
        try:
            return read(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _pods(self) -> list:
        pods = self.core.list_namespaced_pod(self.ns).items
        return pods if len(pods) == 2 else []

    def _served_resources(self) -> set[str]:
        """``Kind`` of every served resource (as client-go's reflector names them: ``*v1.Kind``)."""
        def get(path: str) -> dict:
            return json.loads(self.server.kubectl("get", "--raw", path).stdout)
        kinds = {f"*v1.{r['kind']}" for r in get("/api/v1")["resources"]}
        for group in get("/apis")["groups"]:
            for version in group["versions"]:
                for r in get(f"/apis/{version['groupVersion']}")["resources"]:
                    kinds.add(f"*{version['version']}.{r['kind']}")
        return kinds

    @staticmethod
    def _about_unserved_resource(line: str, served: set[str]) -> bool:
        """A reflector failing to list a kind this server does not serve (yet): not an error loop of
        kube-controller-manager's making."""
        marker = "failed to list "
        if marker not in line or "the server could not find the requested resource" not in line:
            return False
        kind = line.split(marker, 1)[1].split(":", 1)[0]
        return kind not in served

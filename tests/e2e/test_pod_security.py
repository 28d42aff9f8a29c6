"""PodSecurity against a real kapiserver process, as kubectl users meet it: a namespace labelled
``enforce=restricted`` refuses a privileged pod with upstream's message, ``warn`` prints kubectl's
``Warning:`` lines for pods and Deployments, and a server-side dry run of a new enforce label
lists the existing pods that would violate it."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server


class PodSecurityTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "psa-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def label(self, *labels: str):
        return self.kubectl("label", "--overwrite", "ns", self.ns, *labels)

    def test_restricted_refuses_a_privileged_pod(self):
        self.label("pod-security.kubernetes.io/enforce=restricted")
        refused = self.kubectl("-n", self.ns, "run", "root", "--image=nginx", "--restart=Never", "--overrides",
                               json.dumps({"spec": {"containers": [{"name": "root", "image": "nginx",
                                                                    "securityContext": {"privileged": True}}]}}),
                               check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn('Error from server (Forbidden): pods "root" is forbidden: violates PodSecurity '
                      '"restricted:latest": privileged (container "root" must not set securityContext.privileged=true), '
                      'allowPrivilegeEscalation != false (container "root" must set '
                      'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "root" '
                      'must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container '
                      '"root" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "root" '
                      'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
                      refused.stderr)
        # a pod that meets the standard is created, through the official Python client
        from kubernetes import client
        core = client.CoreV1Api(self.server.python_client())
        created = core.create_namespaced_pod(self.ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name="locked-down"),
            spec=client.V1PodSpec(
                security_context=client.V1PodSecurityContext(
                    run_as_non_root=True, seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault")),
                containers=[client.V1Container(name="app", image="nginx", security_context=client.V1SecurityContext(
                    allow_privilege_escalation=False, capabilities=client.V1Capabilities(drop=["ALL"])))])))
        self.assertEqual(created.metadata.name, "locked-down")

    def test_warn_prints_kubectl_warnings_for_pods_and_workloads(self):
        self.label("pod-security.kubernetes.io/warn=baseline")
        made = self.kubectl("-n", self.ns, "run", "host", "--image=nginx", "--restart=Never", "--overrides",
                            json.dumps({"spec": {"hostPID": True}}))
        self.assertIn('Warning: would violate PodSecurity "baseline:latest": host namespaces (hostPID=true)',
                      made.stderr)
        self.assertIn("pod/host created", made.stdout)
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                      "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                          "metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx",
                                                   "ports": [{"containerPort": 80, "hostPort": 8080}]}]}}}}
        made = self.kubectl("-n", self.ns, "apply", "-f", "-", input=json.dumps(deployment))
        self.assertIn('Warning: would violate PodSecurity "baseline:latest": hostPort (container "web" uses '
                      'hostPort 8080)', made.stderr)

    def test_dry_run_of_a_new_level_lists_violating_pods(self):
        self.kubectl("-n", self.ns, "run", "host", "--image=nginx", "--restart=Never", "--overrides",
                     json.dumps({"spec": {"hostNetwork": True}}))
        checked = self.kubectl("label", "--dry-run=server", "--overwrite", "ns", self.ns,
                               "pod-security.kubernetes.io/enforce=baseline")
        self.assertIn(f'Warning: existing pods in namespace "{self.ns}" violate the new PodSecurity enforce level '
                      f'"baseline:latest"', checked.stderr)
        self.assertIn("Warning: host: host namespaces", checked.stderr)
        labels = json.loads(self.kubectl("get", "ns", self.ns, "-o", "json").stdout)["metadata"].get("labels", {})
        self.assertNotIn("pod-security.kubernetes.io/enforce", labels)
        refused = self.kubectl("label", "--overwrite", "ns", self.ns, "pod-security.kubernetes.io/enforce=strict",
                               check=False)
        self.assertIn(f'namespaces "{self.ns}" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
                      f'Invalid value: "strict": must be one of privileged, baseline, restricted', refused.stderr)

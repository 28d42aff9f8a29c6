"""PodSecurity: the standards' checks with upstream's wording, namespace labels and the
plugin's configuration, and the plugin in a real in-process server."""
from __future__ import annotations

import os
import tempfile

import yaml
from twisted.trial import unittest

from kapiserver.admission.pod_security import checks
from kapiserver.admission.pod_security.plugin import (LevelVersion, Policy, PodSecurityConfigError,
                                                      parse_configuration, policy_from_labels)
from kapiserver.testing.cases import ServerTestCase, run


def container(name: str = "app", **security: object) -> dict:
    c: dict = {"name": name, "image": "nginx"}
    if security:
        c["securityContext"] = dict(security)
    return c


RESTRICTED_OK = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [container(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]})]}


def message(level: str, spec: dict, metadata: dict | None = None, minor: int | None = None) -> str:
    return checks.describe(checks.evaluate(level, minor, metadata or {}, spec))


class CheckTests(unittest.TestCase):
    def test_a_plain_pod_against_restricted(self):
        self.assertEqual(
            message("restricted", {"containers": [container("nginx")]}),
            'allowPrivilegeEscalation != false (container "nginx" must set securityContext.allowPrivilegeEscalation'
            '=false), unrestricted capabilities (container "nginx" must set securityContext.capabilities.drop=['
            '"ALL"]), runAsNonRoot != true (pod or container "nginx" must set securityContext.runAsNonRoot=true), '
            'seccompProfile (pod or container "nginx" must set securityContext.seccompProfile.type to '
            '"RuntimeDefault" or "Localhost")')
        self.assertEqual(message("baseline", {"containers": [container("nginx")]}), "")
        self.assertEqual(message("privileged", {"hostPID": True, "containers": [container(privileged=True)]}), "")

    def test_a_compliant_pod_passes_restricted(self):
        self.assertEqual(message("restricted", RESTRICTED_OK), "")

    def test_baseline_violations_in_upstream_order(self):
        spec = {"hostNetwork": True, "hostIPC": True,
                "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "etc", "hostPath": {"path": "/e"}}],
                "containers": [container("a", privileged=True, capabilities={"add": ["SYS_ADMIN", "CHOWN", "BPF"]},
                                         procMount="Unmasked"),
                               container("b", privileged=True)],
                "initContainers": [{"name": "i", "image": "x", "ports": [{"containerPort": 1, "hostPort": 8080},
                                                                          {"containerPort": 2, "hostPort": 443}]}]}
        spec["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "1"},
                                               {"name": "net.ipv4.tcp_syncookies", "value": "1"}],
                                   "seccompProfile": {"type": "Unconfined"},
                                   "seLinuxOptions": {"type": "spc_t", "user": "root"}}
        self.assertEqual(message("baseline", spec), ", ".join([
            'non-default capabilities (container "a" must not include "BPF", "SYS_ADMIN" in '
            'securityContext.capabilities.add)',
            "host namespaces (hostNetwork=true, hostIPC=true)",
            'hostPath volumes (volumes "root", "etc")',
            'hostPort (container "i" uses hostPorts 443, 8080)',
            'privileged (containers "a", "b" must not set '
            'securityContext.privileged=true)',
            'procMount (container "a" must not set securityContext.procMount to "Unmasked")',
            'seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set)',
            'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
            "forbidden sysctls (kernel.msgmax)"]))

    def test_restricted_replaces_the_weaker_baseline_checks(self):
        spec = {"volumes": [{"name": "h", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {"server": "s"}},
                            {"name": "c", "configMap": {"name": "c"}}],
                "securityContext": {"runAsNonRoot": True, "runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
                "containers": [container(allowPrivilegeEscalation=False,
                                         capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "NET_RAW"]})]}
        self.assertEqual(message("restricted", spec), ", ".join([
            'unrestricted capabilities (container "app" must not include "NET_RAW" in securityContext.capabilities.add)',
            'restricted volume types (volumes "h", "n" use restricted volume types "hostPath", "nfs")',
            "runAsUser=0 (pod must not set runAsUser=0)",
            'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")']))

    def test_container_settings_and_pod_settings_combine(self):
        spec = {"securityContext": {"runAsNonRoot": False},
                "containers": [container("a", runAsNonRoot=False, allowPrivilegeEscalation=False,
                                         capabilities={"drop": ["ALL"]}, seccompProfile={"type": "Localhost"})]}
        self.assertEqual(message("restricted", spec), 'runAsNonRoot != true (pod and container "a" must not set '
                                                      'securityContext.runAsNonRoot=false)')

    def test_versions(self):
        sysctl = {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "1 2 3"}]},
                  "containers": [container()]}
        self.assertEqual(message("baseline", sysctl), "")  # allowed since v1.32
        self.assertEqual(message("baseline", sysctl, minor=31), "forbidden sysctls (net.ipv4.tcp_rmem)")
        windows = {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": True},
                   "containers": [container()]}
        self.assertEqual(message("restricted", windows), "")  # windows pods are exempt from these since v1.25
        self.assertIn("allowPrivilegeEscalation != false", message("restricted", windows, minor=24))
        # capabilities joined the restricted level in v1.22
        self.assertNotIn("capabilities", message("restricted", {"containers": [container()]}, minor=21))
        # versions newer than the server's are read as latest
        self.assertEqual(message("restricted", RESTRICTED_OK, minor=99), "")


class LabelAndConfigTests(unittest.TestCase):
    privileged = LevelVersion("privileged", None)
    defaults = Policy(privileged, privileged, privileged)

    def test_labels(self):
        policy, problems = policy_from_labels({"pod-security.kubernetes.io/enforce": "baseline",
                                               "pod-security.kubernetes.io/enforce-version": "v1.29",
                                               "pod-security.kubernetes.io/warn": "restricted"}, self.defaults)
        self.assertEqual(problems, [])
        self.assertEqual((str(policy.enforce), str(policy.warn), str(policy.audit)),
                         ("baseline:v1.29", "restricted:latest", "privileged:latest"))

    def test_invalid_labels_count_as_the_strictest(self):
        policy, problems = policy_from_labels({"pod-security.kubernetes.io/enforce": "strict",
                                               "pod-security.kubernetes.io/enforce-version": "1.29"}, self.defaults)
        self.assertEqual(str(policy.enforce), "restricted:latest")
        self.assertEqual(problems, [
            'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of '
            'privileged, baseline, restricted',
            'metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.29": must be "latest" '
            'or of the form "v1.x"'])

    def test_configuration(self):
        policy, exemptions = parse_configuration(yaml.safe_dump({
            "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "warn": "restricted", "warn-version": "v1.30"},
            "exemptions": {"namespaces": ["kube-system"], "usernames": ["ci"]}}).encode())
        self.assertEqual(str(policy.enforce), "baseline:latest")
        self.assertEqual(str(policy.warn), "restricted:v1.30")
        self.assertEqual(exemptions.namespaces, frozenset({"kube-system"}))
        self.assertEqual(exemptions.usernames, frozenset({"ci"}))
        with self.assertRaises(PodSecurityConfigError):
            parse_configuration(b"apiVersion: v1\nkind: Pod\n")
        with self.assertRaises(PodSecurityConfigError):
            parse_configuration(yaml.safe_dump({"apiVersion": "pod-security.admission.config.k8s.io/v1",
                                                "kind": "PodSecurityConfiguration",
                                                "defaults": {"enforce": "high"}}).encode())


def pod(name: str, spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {f"pod-security.kubernetes.io/{k.replace('_', '-')}": v
                                                  for k, v in labels.items()}}}


class InProcessTests(ServerTestCase):
    @run
    async def test_enforce_refuses_and_warn_warns(self):
        reply = await self.client.post("/api/v1/namespaces", namespace("strict", enforce="restricted"))
        self.assertEqual(reply.code, 201)
        reply = await self.client.post("/api/v1/namespaces/strict/pods",
                                       pod("root", {"containers": [container("c", privileged=True)]}))
        self.assertEqual(reply.code, 403, reply.body)
        self.assertEqual(reply.body["reason"], "Forbidden")
        self.assertTrue(reply.body["message"].startswith(
            'pods "root" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not '
            'set securityContext.privileged=true), allowPrivilegeEscalation != false'), reply.body["message"])
        reply = await self.client.post("/api/v1/namespaces/strict/pods", pod("ok", RESTRICTED_OK))
        self.assertEqual(reply.code, 201, reply.body)

        await self.client.post("/api/v1/namespaces", namespace("warned", enforce="baseline", warn="restricted"))
        reply = await self.client.post("/api/v1/namespaces/warned/pods", pod("plain", {"containers": [container()]}))
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(len(reply.warnings()), 1)
        self.assertTrue(reply.warnings()[0].startswith(
            'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" '),
            reply.warnings())

    @run
    async def test_workloads_are_warned_not_refused(self):
        await self.client.post("/api/v1/namespaces", namespace("wl", enforce="restricted", warn="baseline"))
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                      "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                          "metadata": {"labels": {"a": "b"}},
                          "spec": {"hostNetwork": True, "containers": [container()]}}}}
        reply = await self.client.post("/apis/apps/v1/namespaces/wl/deployments", deployment)
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.warnings(),
                         ['would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)'])

    @run
    async def test_namespace_labels_are_validated_and_changes_report_existing_pods(self):
        reply = await self.client.post("/api/v1/namespaces", namespace("typo", enforce="strict"))
        self.assertEqual(reply.code, 422)
        self.assertEqual(reply.body["message"], 'namespaces "typo" is invalid: metadata.labels[pod-security.kubernetes'
                                                '.io/enforce]: Invalid value: "strict": must be one of privileged, '
                                                'baseline, restricted')
        await self.client.post("/api/v1/namespaces", namespace("open"))
        for name in ("a", "b"):
            reply = await self.client.post("/api/v1/namespaces/open/pods",
                                           pod(name, {"hostPID": True, "containers": [container()]}))
            self.assertEqual(reply.code, 201, reply.body)
        await self.client.post("/api/v1/namespaces/open/pods", pod("fine", RESTRICTED_OK))
        reply = await self.client.patch("/api/v1/namespaces/open?dryRun=All", {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "baseline"}}})
        self.assertEqual(reply.code, 200, reply.body)
        self.assertEqual(reply.warnings(), [
            'existing pods in namespace "open" violate the new PodSecurity enforce level "baseline:latest"',
            "a (and 1 other pod): host namespaces"])
        # a dry run changed nothing
        reply = await self.client.get("/api/v1/namespaces/open")
        self.assertNotIn("pod-security.kubernetes.io/enforce", reply.body["metadata"].get("labels") or {})


class ConfiguredTests(ServerTestCase):
    def setUp(self):
        directory = tempfile.mkdtemp(prefix="kapiserver-psa-")
        path = os.path.join(directory, "admission.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                            "plugins": [{"name": "PodSecurity", "configuration": {
                                "apiVersion": "pod-security.admission.config.k8s.io/v1",
                                "kind": "PodSecurityConfiguration",
                                "defaults": {"enforce": "baseline"},
                                "exemptions": {"namespaces": ["kube-system"]}}}]}, f)
        self.settings = {"admission_config_file": path}
        return super().setUp()

    @run
    async def test_defaults_apply_to_unlabelled_namespaces_except_exempt_ones(self):
        host = {"hostNetwork": True, "containers": [container()]}
        reply = await self.client.post("/api/v1/namespaces/default/pods", pod("h", host))
        self.assertEqual(reply.code, 403, reply.body)
        self.assertIn('violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)',
                      reply.body["message"])
        reply = await self.client.post("/api/v1/namespaces/kube-system/pods", pod("h", host))
        self.assertEqual(reply.code, 201, reply.body)

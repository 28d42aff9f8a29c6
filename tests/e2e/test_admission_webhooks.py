"""Admission webhooks end to end: kubectl 1.32 against a real kapiserver process, which calls
real TLS webhook servers the tests run (in a thread, or in a network namespace).

Each test works in a namespace of its own and its webhooks only match that namespace
(namespaceSelector), so the tests never see each other's webhooks.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from typing import Any, Callable, Optional

import yaml
from twisted.trial import unittest

from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.process import E2E_CONFIG, REPO_ROOT, shared_server
from kapiserver.testing.webhook import AdmissionWebhookServer, WebhookCertificates, allow, deny, patch

GROUP = "admissionregistration.k8s.io/v1"
# seconds the server waits on the slow webhook: long enough for a kubectl get meanwhile
SLOW_WEBHOOK_TIMEOUT = 10
ALL_CONFIGMAPS = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"]}]


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WebhookTestCase(unittest.TestCase):
    """A server shared by the module, a namespace and a webhook server per test."""

    handlers: Any = None

    def setUp(self):
        self.server = shared_server("admission-webhooks", extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"wh-{self._testMethodName.replace('_', '-')[5:30].strip('-')}-{uuid.uuid4().hex[:4]}"
        self.kubectl("create", "ns", self.ns)
        self.kubectl("label", "ns", self.ns, f"webhook-test={self.ns}")
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))
        self.certs = WebhookCertificates.create(tempfile.mkdtemp(prefix="kapiserver-webhook-"), ["127.0.0.1"])
        self.hooks = AdmissionWebhookServer({}, self.certs).start()
        self.addCleanup(self.hooks.stop)

    # ------------------------------------------------------------ helpers

    def webhook(self, name: str, path: str, handler: Optional[Callable[[dict], dict]] = None,
                url: Optional[str] = None, rules: Optional[list] = None, **fields: Any) -> dict:
        if handler is not None:
            self.hooks.handler[path] = handler
        hook = {"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": url or self.hooks.url(path), "caBundle": self.certs.ca_bundle},
                "rules": rules or ALL_CONFIGMAPS,
                "namespaceSelector": {"matchLabels": {"webhook-test": self.ns}}}
        hook.update(fields)
        return hook

    def configure(self, kind: str, name: str, *hooks: dict) -> None:
        config = {"apiVersion": GROUP, "kind": kind, "metadata": {"name": f"{self.ns}-{name}"},
                  "webhooks": list(hooks)}
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(config))
        self.addCleanup(lambda: self.kubectl("delete", kind.lower(), config["metadata"]["name"], check=False))

    def configmap(self, name: str, labels: Optional[dict] = None, *args: str, check: bool = False
                  ) -> subprocess.CompletedProcess:
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": self.ns},
               "data": {"k": "v"}}
        if labels:
            obj["metadata"]["labels"] = labels
        return self.kubectl("create", "-f", "-", *args, input=yaml.safe_dump(obj), check=check)

    def until_called(self, path: str) -> None:
        """Wait for the new configuration to be in effect: probe creates until the webhook sees one."""
        def probe():
            self.configmap(f"probe-{uuid.uuid4().hex[:6]}", {"probe": "1"})
            return self.hooks.reviews_for(path)
        wait_for(probe, timeout=15, interval=0.2)

    # ------------------------------------------------------------ validating

    def test_validating_webhook_denies_a_labelled_configmap_with_its_message(self):
        def handler(review):
            labels = review["request"]["object"]["metadata"].get("labels") or {}
            if labels.get("forbidden") == "yes":
                return deny(review, "ConfigMaps labelled forbidden=yes are not allowed")
            return allow(review)
        self.configure("ValidatingWebhookConfiguration", "deny", self.webhook("deny.example.com", "/deny", handler))
        self.until_called("/deny")
        refused = self.configmap("bad", {"forbidden": "yes"})
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn('admission webhook "deny.example.com" denied the request: ConfigMaps labelled forbidden=yes '
                      'are not allowed', refused.stderr)
        self.assertIn("NotFound", self.kubectl("get", "cm", "bad", "-n", self.ns, check=False).stderr)
        self.assertEqual(self.configmap("good", {"forbidden": "no"}).returncode, 0)
        review = self.hooks.reviews_for("/deny")[-1]
        request = review["request"]
        self.assertEqual((review["apiVersion"], review["kind"]), ("admission.k8s.io/v1", "AdmissionReview"))
        self.assertEqual((request["operation"], request["name"], request["namespace"]), ("CREATE", "good", self.ns))
        self.assertEqual(request["kind"], {"group": "", "version": "v1", "kind": "ConfigMap"})
        self.assertEqual(request["resource"], {"group": "", "version": "v1", "resource": "configmaps"})
        self.assertEqual(request["userInfo"]["username"], "kapiserver-admin")
        self.assertIn("system:masters", request["userInfo"]["groups"])
        self.assertEqual(request["options"]["kind"], "CreateOptions")
        self.assertIs(request["dryRun"], False)
        self.assertIsNone(request["oldObject"])

    def test_update_and_delete_carry_the_old_object(self):
        self.configure("ValidatingWebhookConfiguration", "ops", self.webhook(
            "ops.example.com", "/ops", allow, rules=[{"operations": ["UPDATE", "DELETE"], "apiGroups": [""],
                                                      "apiVersions": ["v1"], "resources": ["configmaps"]}]))
        self.configmap("c", check=True)
        wait_for(lambda: self.kubectl("label", "cm", "c", "-n", self.ns, f"n={uuid.uuid4().hex[:4]}",
                                      "--overwrite") and self.hooks.reviews_for("/ops"), timeout=15)
        update = self.hooks.reviews_for("/ops")[-1]["request"]
        self.assertEqual(update["operation"], "UPDATE")
        self.assertEqual(update["oldObject"]["metadata"]["name"], "c")
        self.assertEqual(update["options"]["kind"], "UpdateOptions")
        self.kubectl("delete", "cm", "c", "-n", self.ns)
        delete = self.hooks.reviews_for("/ops")[-1]["request"]
        self.assertEqual((delete["operation"], delete["object"]), ("DELETE", None))
        self.assertEqual(delete["oldObject"]["data"], {"k": "v"})
        self.assertEqual(delete["options"]["kind"], "DeleteOptions")

    # ------------------------------------------------------------ mutating

    def test_mutating_webhook_adds_a_label_seen_in_the_stored_object(self):
        def add_label(review):
            return patch(review, [{"op": "add", "path": "/metadata/labels", "value": {"mutated-by": "webhook"}}],
                         warnings=["the webhook added a label"])
        self.configure("MutatingWebhookConfiguration", "label", self.webhook("label.example.com", "/label", add_label))
        self.until_called("/label")
        created = self.configmap("m", check=True)
        self.assertIn("Warning: the webhook added a label", created.stderr)
        stored = json.loads(self.kubectl("get", "cm", "m", "-n", self.ns, "-o", "json").stdout)
        self.assertEqual(stored["metadata"]["labels"], {"mutated-by": "webhook"})

    def test_a_patch_adding_an_unknown_field_is_decoded_away(self):
        def bogus(review):
            return patch(review, [{"op": "add", "path": "/bogus", "value": 1},
                                  {"op": "add", "path": "/data/added", "value": "x"}])
        self.configure("MutatingWebhookConfiguration", "bogus", self.webhook("bogus.example.com", "/bogus", bogus))
        self.until_called("/bogus")
        self.configmap("b", check=True)
        stored = json.loads(self.kubectl("get", "cm", "b", "-n", self.ns, "-o", "json").stdout)
        self.assertNotIn("bogus", stored)
        self.assertEqual(stored["data"], {"k": "v", "added": "x"})

    def test_a_container_a_webhook_adds_is_defaulted_and_counts_in_the_qos_class(self):
        sidecar = {"name": "sidecar", "image": "busybox:1.36",
                   "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}

        def add_sidecar(review):
            return patch(review, [{"op": "add", "path": "/spec/containers/-", "value": sidecar}])
        self.configure("MutatingWebhookConfiguration", "sidecar", self.webhook(
            "sidecar.example.com", "/sidecar", add_sidecar,
            rules=[{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]))

        def create_pod(name: str) -> subprocess.CompletedProcess:
            obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": self.ns},
                   "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "resources": {
                       "limits": {"cpu": "200m", "memory": "128Mi"}}}]}}
            return self.kubectl("create", "-f", "-", input=yaml.safe_dump(obj), check=False)
        wait_for(lambda: create_pod(f"probe-{uuid.uuid4().hex[:6]}") and self.hooks.reviews_for("/sidecar"),
                 timeout=15, interval=0.2)
        self.assertEqual(create_pod("p").returncode, 0)
        stored = json.loads(self.kubectl("get", "pod", "p", "-n", self.ns, "-o", "json").stdout)
        added = stored["spec"]["containers"][1]
        # defaulted after the patch, as any container: the requests from the limits, the pull policy...
        self.assertEqual((added["name"], added["resources"]["requests"], added["imagePullPolicy"],
                          added["terminationMessagePath"]),
                         ("sidecar", {"cpu": "100m", "memory": "64Mi"}, "IfNotPresent", "/dev/termination-log"))
        # ...and both containers' requests equal their limits: the pod's class counts the added one
        self.assertEqual(stored["status"]["qosClass"], "Guaranteed")

    def test_reinvocation_if_needed_sees_later_changes(self):
        def first(review):
            labels = review["request"]["object"]["metadata"].get("labels") or {}
            return patch(review, [{"op": "add", "path": "/metadata/labels/first", "value": labels.get("second", "none")}])

        def second(review):
            return patch(review, [{"op": "add", "path": "/metadata/labels/second", "value": "set"}])
        matching = {"matchLabels": {"reinvoke": "yes"}}
        self.configure("MutatingWebhookConfiguration", "a", self.webhook(
            "first.example.com", "/first", first, reinvocationPolicy="IfNeeded", objectSelector=matching))
        self.configure("MutatingWebhookConfiguration", "b", self.webhook(
            "second.example.com", "/second", second, objectSelector=matching))
        wait_for(lambda: self.configmap(f"r{uuid.uuid4().hex[:4]}", {"reinvoke": "yes"}).returncode == 0
                 and self.hooks.reviews_for("/second"), timeout=15)
        self.configmap("final", {"reinvoke": "yes"}, check=True)
        labels = json.loads(self.kubectl("get", "cm", "final", "-n", self.ns, "-o", "json").stdout)["metadata"]["labels"]
        self.assertEqual(labels, {"reinvoke": "yes", "first": "set", "second": "set"})

    # ------------------------------------------------------------ failures

    def test_failure_policy_fail_refuses_and_ignore_admits_when_the_webhook_is_down(self):
        dead = f"https://127.0.0.1:{_free_port()}/down"
        self.configure("ValidatingWebhookConfiguration", "down", self.webhook(
            "down.example.com", "/down", url=dead, failurePolicy="Fail",
            objectSelector={"matchLabels": {"down": "fail"}}), self.webhook(
            "ignored.example.com", "/ignored", url=dead, failurePolicy="Ignore",
            objectSelector={"matchLabels": {"down": "ignore"}}))
        refused = wait_for(lambda: (lambda r: r if r.returncode else None)(
            self.configmap(f"f{uuid.uuid4().hex[:4]}", {"down": "fail"})), timeout=15)
        self.assertIn(f'Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: '
                      f'Post "{dead}?timeout=10s": dial tcp 127.0.0.1:{dead.split(":")[2].split("/")[0]}: connect: '
                      f'connection refused', refused.stderr)
        self.assertEqual(self.configmap("passes", {"down": "ignore"}).returncode, 0)

    def test_timeout_bounds_a_slow_webhook_while_other_requests_are_served(self):
        # The webhook answers (allow) only after longer than the guard against a hang: a create
        # that ends, ends on the server's own webhook timeout.  That timeout is long enough for
        # another request to be served before it passes, which shows the server is not waiting
        # on the webhook meanwhile.
        self.hooks.delays["/slow"] = 2 * HANG_GUARD
        self.configure("ValidatingWebhookConfiguration", "slow", self.webhook(
            "slow.example.com", "/slow", allow, timeoutSeconds=SLOW_WEBHOOK_TIMEOUT,
            objectSelector={"matchLabels": {"slow": "yes"}}))
        wait_for(lambda: self.kubectl("get", "validatingwebhookconfigurations", f"{self.ns}-slow").returncode == 0)
        results: dict = {}

        def create_slow():
            results["slow"] = self.configmap(f"s{uuid.uuid4().hex[:4]}", {"slow": "yes"})
        # until the configuration reaches the server's informer a create passes without the webhook
        for _ in range(100):
            thread = threading.Thread(target=create_slow)
            thread.start()
            wait_for(lambda: not thread.is_alive() or self.hooks.reviews_for("/slow"), timeout=HANG_GUARD,
                     interval=0.05)
            if self.hooks.reviews_for("/slow"):
                break
            thread.join()
        else:
            self.fail("the webhook was never called")
        served = self.kubectl("get", "ns", self.ns)
        self.assertEqual(served.returncode, 0)
        self.assertTrue(thread.is_alive(), "the create was answered before another request was served")
        thread.join(HANG_GUARD)
        self.assertFalse(thread.is_alive(), "the create was not answered")
        self.assertNotEqual(results["slow"].returncode, 0)
        self.assertIn('failed calling webhook "slow.example.com": failed to call webhook: Post', results["slow"].stderr)
        self.assertIn(f"?timeout={SLOW_WEBHOOK_TIMEOUT}s\": context deadline exceeded", results["slow"].stderr)

    # ------------------------------------------------------------ matching

    def test_selectors_and_match_conditions_skip_non_matching_objects(self):
        def refuse(review):
            return deny(review, "matched")
        self.configure("ValidatingWebhookConfiguration", "select", self.webhook(
            "select.example.com", "/select", refuse, objectSelector={"matchLabels": {"team": "a"}},
            matchConditions=[{"name": "not-exempt", "expression": "!('exempt' in object.data)"},
                             {"name": "named", "expression": "object.metadata.name.startsWith('x')"}]))
        wait_for(lambda: self.configmap(f"x{uuid.uuid4().hex[:4]}", {"team": "a"}).returncode != 0, timeout=15)
        before = len(self.hooks.reviews_for("/select"))
        self.assertEqual(self.configmap("x-other-team", {"team": "b"}).returncode, 0)  # objectSelector
        self.assertEqual(self.configmap("y-not-named", {"team": "a"}).returncode, 0)  # a false matchCondition
        exempt = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x-exempt", "namespace": self.ns,
                                                                        "labels": {"team": "a"}},
                  "data": {"exempt": "yes"}}
        self.kubectl("create", "-f", "-", input=yaml.safe_dump(exempt))
        self.assertEqual(len(self.hooks.reviews_for("/select")), before)
        self.assertIn('denied the request: matched', self.configmap("x-matched", {"team": "a"}).stderr)
        # another namespace (without the label the namespaceSelector wants) is never sent
        other = f"{self.ns}-other"
        self.kubectl("create", "ns", other)
        self.addCleanup(lambda: self.kubectl("delete", "ns", other, "--wait=false", check=False))
        self.kubectl("create", "configmap", "x-elsewhere", "-n", other)
        self.assertEqual(len(self.hooks.reviews_for("/select")), before + 1)

    def test_a_match_condition_that_errors_refuses_under_fail(self):
        self.configure("ValidatingWebhookConfiguration", "err", self.webhook(
            "err.example.com", "/err", allow, objectSelector={"matchLabels": {"cond": "error"}},
            matchConditions=[{"name": "missing", "expression": "object.data.missing == 'x'"}]))
        refused = wait_for(lambda: (lambda r: r if r.returncode else None)(
            self.configmap(f"e{uuid.uuid4().hex[:4]}", {"cond": "error"})), timeout=15)
        self.assertIn("is forbidden: expression 'object.data.missing == 'x'' resulted in error: no such key: missing",
                      refused.stderr)

    # ------------------------------------------------------------ dry run

    def test_dry_run_calls_webhooks_without_side_effects(self):
        self.configure("ValidatingWebhookConfiguration", "dry", self.webhook(
            "dry.example.com", "/dry", allow, sideEffects="NoneOnDryRun",
            objectSelector={"matchLabels": {"dry": "yes"}}))
        wait_for(lambda: self.configmap(f"d{uuid.uuid4().hex[:4]}", {"dry": "yes"}).returncode == 0
                 and self.hooks.reviews_for("/dry"), timeout=15)
        self.configmap("dry-one", {"dry": "yes"}, "--dry-run=server", check=True)
        review = self.hooks.reviews_for("/dry")[-1]["request"]
        self.assertEqual((review["name"], review["dryRun"], review["options"]["dryRun"]), ("dry-one", True, ["All"]))
        self.assertIn("NotFound", self.kubectl("get", "cm", "dry-one", "-n", self.ns, check=False).stderr)

    def test_webhooks_with_side_effects_cannot_be_configured(self):
        created = self.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump({
            "apiVersion": GROUP, "kind": "ValidatingWebhookConfiguration", "metadata": {"name": f"{self.ns}-some"},
            "webhooks": [self.webhook("some.example.com", "/some", allow, sideEffects="Some", timeoutSeconds=31)]}))
        self.assertNotEqual(created.returncode, 0)
        self.assertIn('webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
                      created.stderr)
        self.assertIn("webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 "
                      "seconds", created.stderr)

    # ------------------------------------------------------------ review versions, equivalent resources

    def test_v1beta1_reviews_and_equivalent_resources(self):
        rules = [{"operations": ["CREATE"], "apiGroups": ["events.k8s.io"], "apiVersions": ["v1"],
                  "resources": ["events"]}]
        self.configure("ValidatingWebhookConfiguration", "events", self.webhook(
            "events.example.com", "/events", allow, rules=rules, admissionReviewVersions=["v1beta1"]))
        event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": self.ns},
                 "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": self.ns},
                 "reason": "Tested", "message": "a core event", "type": "Normal"}

        def create_event():
            name = f"e{uuid.uuid4().hex[:4]}"
            self.kubectl("create", "-f", "-", input=yaml.safe_dump(dict(event, metadata={"name": name,
                                                                                        "namespace": self.ns})))
            return self.hooks.reviews_for("/events")
        reviews = wait_for(create_event, timeout=15)
        review = reviews[-1]
        request = review["request"]
        self.assertEqual(review["apiVersion"], "admission.k8s.io/v1beta1")
        self.assertEqual(request["kind"], {"group": "events.k8s.io", "version": "v1", "kind": "Event"})
        self.assertEqual(request["requestKind"], {"group": "", "version": "v1", "kind": "Event"})
        self.assertEqual(request["object"]["apiVersion"], "events.k8s.io/v1")
        self.assertEqual(request["object"]["note"], "a core event")


class ServiceWebhookTests(unittest.TestCase):
    """A webhook reached through a Service: its EndpointSlice names an address in a network
    namespace this test creates (endpoint addresses may not be loopback), where the webhook
    process runs."""

    def setUp(self):
        suffix = uuid.uuid4().hex[:5]
        self.netns = f"kapadm-{suffix}"
        third = int(suffix[:2], 16)
        self.host_ip, self.hook_ip = f"10.200.{third}.1", f"10.200.{third}.2"
        host_if, ns_if = f"kah{suffix}", f"kan{suffix}"
        probe = subprocess.run(["ip", "netns", "add", self.netns], capture_output=True, text=True)
        if probe.returncode != 0:
            raise unittest.SkipTest(f"network namespaces are not available here (ip netns add: "
                                    f"{probe.stderr.strip()})")
        self.addCleanup(subprocess.run, ["ip", "netns", "del", self.netns], capture_output=True)
        for cmd in (["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
                    ["ip", "link", "set", ns_if, "netns", self.netns],
                    ["ip", "addr", "add", f"{self.host_ip}/30", "dev", host_if],
                    ["ip", "link", "set", host_if, "up"],
                    ["ip", "netns", "exec", self.netns, "ip", "addr", "add", f"{self.hook_ip}/30", "dev", ns_if],
                    ["ip", "netns", "exec", self.netns, "ip", "link", "set", ns_if, "up"],
                    ["ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up"]):
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise unittest.SkipTest(f"cannot set up the network namespace ({' '.join(cmd)}: "
                                        f"{done.stderr.strip()})")
        self.addCleanup(subprocess.run, ["ip", "link", "del", host_if], capture_output=True)
        self.server = shared_server("admission-webhooks", extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"svc-webhook-{suffix}"
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def test_a_service_resolved_webhook_in_a_network_namespace(self):
        certs = WebhookCertificates.create(tempfile.mkdtemp(prefix="kapiserver-webhook-"),
                                           [f"hook.{self.ns}.svc"])
        ready = os.path.join(tempfile.mkdtemp(), "ready")
        proc = subprocess.Popen(["ip", "netns", "exec", self.netns, sys.executable, "-m", "kapiserver.testing.webhook",
                                 "--cert", certs.cert_path, "--key", certs.key_path, "--host", self.hook_ip,
                                 "--port", "8443", "--deny-label", "forbidden", "--ready-file", ready],
                                cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=REPO_ROOT))
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        wait_for(lambda: os.path.exists(ready), timeout=15)
        manifests = [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": self.ns},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "hook-1", "namespace": self.ns, "labels": {"kubernetes.io/service-name": "hook"}},
             "addressType": "IPv4", "endpoints": [{"addresses": [self.hook_ip], "conditions": {"ready": True}}],
             "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}]},
            {"apiVersion": GROUP, "kind": "ValidatingWebhookConfiguration", "metadata": {"name": self.ns},
             "webhooks": [{"name": "hook.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                           "clientConfig": {"service": {"namespace": self.ns, "name": "hook", "path": "/validate"},
                                            "caBundle": certs.ca_bundle},
                           "rules": ALL_CONFIGMAPS, "namespaceSelector": {"matchLabels": {
                               "kubernetes.io/metadata.name": self.ns}}}]},
        ]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))
        self.addCleanup(lambda: self.kubectl("delete", "validatingwebhookconfiguration", self.ns, check=False))

        def refused():
            obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": f"f{uuid.uuid4().hex[:4]}", "namespace": self.ns, "labels": {"forbidden": "1"}}}
            denied = self.kubectl("create", "-f", "-", input=yaml.safe_dump(obj), check=False)
            return denied if denied.returncode else None
        denied = wait_for(refused, timeout=20)
        self.assertIn('admission webhook "hook.example.com" denied the request: label forbidden is not allowed here',
                      denied.stderr)
        self.assertEqual(self.kubectl("create", "configmap", "fine", "-n", self.ns, check=False).returncode, 0)

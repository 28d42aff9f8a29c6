"""The admission chain on an in-process server (the real APIServer, Store and handlers over
HTTP), with a real TLS webhook server in a thread: subresources with their own kinds,
custom resources, audit annotations, dry run, the authorizer in policies, plugin settings."""
from __future__ import annotations

import os
import tempfile
import uuid

import orjson
import yaml
from twisted.internet import defer, threads

from kapiserver.auth.authorizer import AlwaysAllow, Decision
from kapiserver.registry.context import Context
from kapiserver.testing.apiserver import start_api_server
from kapiserver.testing.cases import ServerTestCase, run, sleep
from kapiserver.testing.client import JSONClient
from kapiserver.testing.webhook import AdmissionWebhookServer, WebhookCertificates, allow, deny, patch

NS = "/api/v1/namespaces/default"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def deployment(name: str, replicas: int = 1) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


class AdmissionTestCase(ServerTestCase):
    async def _start(self) -> None:
        await super()._start()
        self.certs = WebhookCertificates.create(tempfile.mkdtemp(prefix="kapiserver-webhook-"), ["127.0.0.1"])
        self.hooks = AdmissionWebhookServer({}, self.certs).start()
        self.addCleanup(lambda: threads.deferToThread(self.hooks.stop))

    def hook(self, name: str, path: str, rules: list, handler=None, **fields) -> dict:
        if handler is not None:
            self.hooks.handler[path] = handler
        out = {"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
               "clientConfig": {"url": self.hooks.url(path), "caBundle": self.certs.ca_bundle}, "rules": rules}
        out.update(fields)
        return out

    async def configure(self, kind: str, *hooks: dict) -> str:
        plural = kind.lower() + "s"
        name = uuid.uuid4().hex[:8]
        r = await self.client.post(f"{ADMISSION}/{plural}", {"apiVersion": "admissionregistration.k8s.io/v1",
                                                             "kind": kind, "metadata": {"name": name},
                                                             "webhooks": list(hooks)})
        self.assertEqual(r.code, 201, r.body)
        await sleep(0.2)  # the informer hands the configuration to the plugin
        return name

    async def wait_reviews(self, path: str, count: int = 1) -> list[dict]:
        async def seen():
            return len(self.hooks.reviews_for(path)) >= count
        await self.wait_for(seen)
        return [r["request"] for r in self.hooks.reviews_for(path)]


class SubresourceAdmissionTests(AdmissionTestCase):
    @run
    async def test_subresources_are_admitted_with_their_own_kinds(self):
        rules = [{"operations": ["*"], "apiGroups": ["", "apps"], "apiVersions": ["v1"],
                  "resources": ["pods/status", "pods/eviction", "pods/exec", "deployments/scale"]}]
        await self.configure("ValidatingWebhookConfiguration", self.hook("sub.example.com", "/sub", rules, allow))
        await self.client.post(NS + "/pods", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "nginx"}]}})
        r = await self.client.patch(NS + "/pods/p/status", {"status": {"phase": "Running"}})
        self.assertEqual(r.code, 200, r.body)
        await self.client.post(DEPLOYMENTS, deployment("d"))
        r = await self.client.patch(DEPLOYMENTS + "/d/scale", {"spec": {"replicas": 4}})
        self.assertEqual(r.code, 200, r.body)
        await self.client.post(NS + "/pods/p/exec?container=c&command=ls&command=-l&stdout=true")
        await self.client.post(NS + "/pods/p/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                         "metadata": {"name": "p"}})
        reviews = await self.wait_reviews("/sub", 4)
        by_sub = {r["subResource"]: r for r in reviews}
        status = by_sub["status"]
        self.assertEqual((status["operation"], status["kind"]["kind"], status["object"]["status"]["phase"]),
                         ("UPDATE", "Pod", "Running"))
        scale = by_sub["scale"]
        self.assertEqual(scale["kind"], {"group": "autoscaling", "version": "v1", "kind": "Scale"})
        self.assertEqual(scale["resource"], {"group": "apps", "version": "v1", "resource": "deployments"})
        self.assertEqual((scale["object"]["kind"], scale["object"]["spec"], scale["oldObject"]["spec"]),
                         ("Scale", {"replicas": 4}, {"replicas": 1}))
        execute = by_sub["exec"]
        self.assertEqual((execute["operation"], execute["kind"]["kind"]), ("CONNECT", "PodExecOptions"))
        self.assertEqual((execute["object"]["command"], execute["object"]["container"]), (["ls", "-l"], "c"))
        eviction = by_sub["eviction"]
        self.assertEqual((eviction["operation"], eviction["kind"]),
                         ("CREATE", {"group": "policy", "version": "v1", "kind": "Eviction"}))

    @run
    async def test_a_mutating_webhook_on_scale_changes_the_replicas(self):
        def halve(review):
            replicas = review["request"]["object"]["spec"]["replicas"]
            return patch(review, [{"op": "replace", "path": "/spec/replicas", "value": replicas // 2}])
        rules = [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                  "resources": ["deployments/scale"]}]
        await self.configure("MutatingWebhookConfiguration", self.hook("halve.example.com", "/halve", rules, halve))
        await self.client.post(DEPLOYMENTS, deployment("d"))
        r = await self.client.put(DEPLOYMENTS + "/d/scale", {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                             "metadata": {"name": "d", "namespace": "default"},
                                                             "spec": {"replicas": 10}})
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 5))
        stored = (await self.client.get(DEPLOYMENTS + "/d")).body
        self.assertEqual(stored["spec"]["replicas"], 5)


class CustomResourceAdmissionTests(AdmissionTestCase):
    @run
    async def test_custom_resources_go_through_the_same_chain(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "kind": "Widget", "singular": "widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                            "type": "object", "properties": {"spec": {"type": "object", "properties": {
                                "size": {"type": "integer", "default": 1},
                                "color": {"type": "string"}}}}}}}]}}
        r = await self.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        self.assertEqual(r.code, 201, r.body)
        widgets = "/apis/example.com/v1/namespaces/default/widgets"

        async def served():
            return (await self.client.get(widgets)).code == 200
        await self.wait_for(served)

        def paint(review):
            if review["request"]["object"]["spec"].get("color") == "red":
                return deny(review, "no red widgets")
            return patch(review, [{"op": "add", "path": "/spec/color", "value": "blue"},
                                  {"op": "add", "path": "/spec/unknown", "value": "pruned"}])
        rules = [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["*"],
                  "resources": ["widgets"]}]
        await self.configure("MutatingWebhookConfiguration", self.hook("paint.example.com", "/paint", rules, paint))
        r = await self.client.post(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                             "metadata": {"name": "w"}, "spec": {}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"], {"size": 1, "color": "blue"})  # defaulted, patched, pruned
        review = self.hooks.reviews_for("/paint")[-1]["request"]
        self.assertEqual(review["kind"], {"group": "example.com", "version": "v1", "kind": "Widget"})
        self.assertEqual(review["object"]["spec"], {"size": 1})  # the webhook sees the defaulted object
        r = await self.client.post(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                             "metadata": {"name": "red"}, "spec": {"color": "red"}})
        self.assertEqual((r.code, r.body["message"]),
                         (403, 'admission webhook "paint.example.com" denied the request: no red widgets'))


class AuditAnnotationTests(AdmissionTestCase):
    """Audit annotations are kept on the request (for its audit event): checked through the Store."""

    @run
    async def test_webhook_and_policy_annotations(self):
        def annotate(review):
            return allow(review, auditAnnotations={"checked": "yes"})
        rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
        await self.configure("ValidatingWebhookConfiguration", self.hook("audit.example.com", "/audit", rules,
                                                                         annotate))
        mutating = await self.configure("MutatingWebhookConfiguration",
                                        self.hook("noop.example.com", "/noop", rules, allow))
        policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                  "metadata": {"name": "audited"},
                  "spec": {"matchConstraints": {"resourceRules": rules},
                           "validations": [{"expression": "size(object.data) < 2", "message": "too much data"}],
                           "auditAnnotations": [{"key": "size", "valueExpression": "string(size(object.data))"}]}}
        binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": "audited"}, "spec": {"policyName": "audited", "validationActions": ["Audit"]}}
        for plural, obj in (("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding)):
            self.assertEqual((await self.client.post(f"{ADMISSION}/{plural}", obj)).code, 201)
        await sleep(0.3)
        store = self.server.api.served.store("", "v1", "configmaps")
        ctx = Context()
        await store.create("default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                                       "data": {"x": "1", "y": "2"}}, ctx)
        annotations = ctx.audit_annotations
        self.assertEqual(annotations["audit.example.com/checked"], "yes")
        self.assertEqual(orjson.loads(annotations["mutation.webhook.admission.k8s.io/round_0_index_0"]),
                         {"configuration": mutating, "webhook": "noop.example.com", "mutated": False})
        self.assertEqual(annotations["audited/size"], "2")
        failure = orjson.loads(annotations["validation.policy.admission.k8s.io/validation_failure"])
        self.assertEqual(failure, [{"message": "too much data", "policy": "audited", "binding": "audited",
                                    "expressionIndex": 0, "validationActions": ["Audit"]}])
        # Audit alone does not refuse
        self.assertEqual((await self.client.get(NS + "/configmaps/a")).code, 200)


class DryRunTests(AdmissionTestCase):
    @run
    async def test_webhooks_with_side_effects_refuse_dry_runs(self):
        # v1 no longer accepts sideEffects Some: such a configuration can only come from older
        # servers' storage, so it is written there directly
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": "legacy", "uid": str(uuid.uuid4()), "generation": 1,
                               "creationTimestamp": "2024-01-01T00:00:00Z"},
                  "webhooks": [self.hook("legacy.example.com", "/legacy", [
                      {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"], "scope": "*"}], allow, sideEffects="Some",
                      failurePolicy="Fail", matchPolicy="Equivalent", namespaceSelector={}, objectSelector={},
                      timeoutSeconds=10)]}
        await self.server.storage.create("/validatingwebhookconfigurations/legacy", orjson.dumps(config))
        await sleep(0.3)
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}}
        r = await self.client.post(NS + "/configmaps?dryRun=All", cm)
        self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                         (400, "BadRequest", 'admission webhook "legacy.example.com" does not support dry run'))
        r = await self.client.post(NS + "/configmaps", cm)
        self.assertEqual(r.code, 201, r.body)
        self.assertFalse(self.hooks.reviews_for("/legacy")[-1]["request"]["dryRun"])


class _DenySecretsTo(AlwaysAllow):
    """Allows everything but reading secrets for anonymous users (a Deferred, as a webhook would)."""

    def authorize(self, user, attributes):
        allowed = not (attributes.resource == "secrets" and attributes.verb == "get"
                       and user is not None and user.name == "system:anonymous")
        return defer.succeed(Decision(allowed, "" if allowed else "secrets are off limits"))


class PolicyAuthorizerTests(ServerTestCase):
    async def _start(self) -> None:
        self.server = await start_api_server(authorizer=_DenySecretsTo())
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(self.server.stop()))
        self.client = JSONClient(self.server.url)

    @run
    async def test_the_authorizer_variable_asks_the_servers_authorizer(self):
        rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
        policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                  "metadata": {"name": "readers"},
                  "spec": {"matchConstraints": {"resourceRules": rules}, "validations": [{
                      "expression": "!has(object.metadata.labels) || !('secret-ref' in object.metadata.labels) || "
                                    "authorizer.group('').resource('secrets').namespace(object.metadata.namespace)"
                                    ".check('get').allowed()",
                      "messageExpression": "'cannot reference secrets: ' + authorizer.group('').resource('secrets')"
                                           ".check('get').reason()",
                      "reason": "Forbidden"}]}}
        binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": "readers"}, "spec": {"policyName": "readers", "validationActions": ["Deny"]}}
        r = await self.client.post(f"{ADMISSION}/validatingadmissionpolicies", policy)
        self.assertEqual(r.code, 422)  # messageExpression may not use the authorizer
        self.assertIn("spec.validations[0].messageExpression: Invalid value", r.body["message"])
        self.assertIn("undeclared reference to 'authorizer'", r.body["message"])
        policy["spec"]["validations"][0]["messageExpression"] = "'cannot reference secrets'"
        self.assertEqual((await self.client.post(f"{ADMISSION}/validatingadmissionpolicies", policy)).code, 201)
        self.assertEqual((await self.client.post(f"{ADMISSION}/validatingadmissionpolicybindings", binding)).code, 201)
        await sleep(0.3)
        r = await self.client.post(NS + "/configmaps", {"metadata": {"name": "a", "labels": {"secret-ref": "s"}}})
        self.assertEqual((r.code, r.body["reason"]), (403, "Forbidden"))
        self.assertEqual(r.body["message"], 'configmaps "a" is forbidden: ValidatingAdmissionPolicy \'readers\' with '
                                            "binding 'readers' denied request: cannot reference secrets")
        r = await self.client.post(NS + "/configmaps", {"metadata": {"name": "b"}})
        self.assertEqual(r.code, 201)


class PluginSettingsTests(ServerTestCase):
    settings = {"disable_admission_plugins": ["NamespaceLifecycle"]}

    @run
    async def test_without_namespace_lifecycle_a_missing_namespace_takes_objects(self):
        r = await self.client.post("/api/v1/namespaces/nowhere/configmaps", {"metadata": {"name": "a"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("NamespaceLifecycle", self.server.api.admission.names)


class WebhookCredentialsTests(AdmissionTestCase):
    async def _start(self) -> None:
        workdir = tempfile.mkdtemp(prefix="kapiserver-admission-config-")
        kubeconfig = os.path.join(workdir, "webhooks.kubeconfig")
        with open(kubeconfig, "w") as f:
            yaml.safe_dump({"apiVersion": "v1", "kind": "Config",
                            "users": [{"name": "127.0.0.1", "user": {"token": "s3cret"}}]}, f)
        config = os.path.join(workdir, "admission.yaml")
        with open(config, "w") as f:
            yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                            "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": {
                                "apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
                                "kubeConfigFile": kubeconfig}}]}, f)
        self.settings = {"admission_config_file": config}
        await super()._start()

    @run
    async def test_the_admission_configuration_gives_webhooks_credentials(self):
        rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
        await self.configure("ValidatingWebhookConfiguration", self.hook("creds.example.com", "/creds", rules, allow))
        self.assertEqual((await self.client.post(NS + "/configmaps", {"metadata": {"name": "a"}})).code, 201)
        await self.wait_reviews("/creds")
        headers = [h for p, h in self.hooks.headers if p.startswith("/creds")][-1]
        self.assertEqual(headers.get("Authorization"), "Bearer s3cret")


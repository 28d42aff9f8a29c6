"""admissionregistration.k8s.io/v1 kinds over HTTP on an in-process server: defaults,
upstream's validation messages, tables, discovery and the status subresource."""
from __future__ import annotations

from kapiserver.testing.cases import ServerTestCase, run

BASE = "/apis/admissionregistration.k8s.io/v1"
VWC = f"{BASE}/validatingwebhookconfigurations"
MWC = f"{BASE}/mutatingwebhookconfigurations"
VAP = f"{BASE}/validatingadmissionpolicies"
VAPB = f"{BASE}/validatingadmissionpolicybindings"
RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def webhook(**fields) -> dict:
    out = {"name": "hook.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
           "clientConfig": {"url": "https://127.0.0.1:8443/x"}, "rules": RULES}
    out.update(fields)
    return out


def config(kind: str, name: str, *hooks: dict) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": list(hooks)}


class WebhookConfigurationTests(ServerTestCase):
    @run
    async def test_defaults(self):
        r = await self.client.post(MWC, config("MutatingWebhookConfiguration", "m", webhook(
            clientConfig={"service": {"namespace": "default", "name": "svc"}})))
        self.assertEqual(r.code, 201, r.body)
        hook = r.body["webhooks"][0]
        self.assertEqual((hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"],
                          hook["reinvocationPolicy"], hook["namespaceSelector"], hook["objectSelector"]),
                         ("Fail", "Equivalent", 10, "Never", {}, {}))
        self.assertEqual(hook["rules"][0]["scope"], "*")
        self.assertEqual(hook["clientConfig"]["service"]["port"], 443)
        r = await self.client.post(VWC, config("ValidatingWebhookConfiguration", "v", webhook()))
        self.assertNotIn("reinvocationPolicy", r.body["webhooks"][0])

    @run
    async def test_upstreams_validation_messages(self):
        r = await self.client.post(VWC, config("ValidatingWebhookConfiguration", "bad", webhook(
            name="hook", clientConfig={"url": "http://x/?a=b"},
            rules=[{"operations": ["CREATE", "*"], "apiGroups": [""], "apiVersions": [],
                    "resources": ["*", "pods"]}], matchConditions=[{"name": "c", "expression": "x"}]),
            webhook(failurePolicy="Sometimes", admissionReviewVersions=["v2"])))
        self.assertEqual(r.code, 422)
        causes = [f"{c['field']}: {c['message']}" for c in r.body["details"]["causes"]]
        expected = [
            'webhooks[0].name: Invalid value: "hook": should be a domain with at least three segments separated by '
            'dots',
            'webhooks[0].rules[0].operations: Invalid value: []admissionregistration.OperationType{"CREATE", "*"}: '
            "if '*' is present, must not specify other operations",
            "webhooks[0].rules[0].apiVersions: Required value",
            "webhooks[0].rules[0].resources: Invalid value: []string{\"*\", \"pods\"}: if '*' is present, must not "
            "specify other resources without subresources",
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired "
            "format: https://host[/path]",
            'webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL',
            "webhooks[0].matchConditions[0].expression: Invalid value: \"x\": compilation failed: ERROR: <input>:1:1: "
            "undeclared reference to 'x' (in container '')\n | x\n | ^",
            'webhooks[1].failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"',
            'webhooks[1].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, '
            'v1beta1',
        ]
        self.assertEqual(causes, expected)

    @run
    async def test_updates_need_a_resource_version_and_bump_the_generation(self):
        r = await self.client.post(VWC, config("ValidatingWebhookConfiguration", "v", webhook()))
        self.assertEqual(r.body["metadata"]["generation"], 1)
        updated = dict(r.body, webhooks=[webhook(timeoutSeconds=5)])
        updated["metadata"] = {"name": "v"}
        r = await self.client.put(f"{VWC}/v", updated)
        self.assertEqual(r.code, 422)
        self.assertIn("metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                      r.body["message"])
        current = (await self.client.get(f"{VWC}/v")).body
        current["webhooks"][0]["timeoutSeconds"] = 5
        r = await self.client.put(f"{VWC}/v", current)
        self.assertEqual((r.code, r.body["metadata"]["generation"]), (200, 2))

    @run
    async def test_table_and_discovery(self):
        await self.client.post(VWC, config("ValidatingWebhookConfiguration", "two", webhook(),
                                           webhook(name="other.example.com")))
        r = await self.client.get(VWC, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual([c["name"] for c in r.body["columnDefinitions"]], ["Name", "Webhooks", "Age"])
        self.assertEqual(r.body["rows"][0]["cells"][:2], ["two", 2])
        resources = {x["name"]: x for x in (await self.client.get(BASE)).body["resources"]}
        self.assertEqual(set(resources), {"mutatingwebhookconfigurations", "validatingwebhookconfigurations",
                                          "validatingadmissionpolicies", "validatingadmissionpolicies/status",
                                          "validatingadmissionpolicybindings"})
        self.assertEqual(resources["validatingadmissionpolicies"]["categories"], ["api-extensions"])


class PolicyTests(ServerTestCase):
    def policy(self, **spec) -> dict:
        base = {"matchConstraints": {"resourceRules": [dict(RULES[0])]},
                "validations": [{"expression": "object.data.size() < 5"}]}
        base.update(spec)
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "p"}, "spec": base}

    @run
    async def test_defaults_status_and_table(self):
        r = await self.client.post(VAP, dict(self.policy(), status={"observedGeneration": 9}))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["failurePolicy"], "Fail")
        constraints = r.body["spec"]["matchConstraints"]
        self.assertEqual((constraints["matchPolicy"], constraints["namespaceSelector"],
                          constraints["objectSelector"]), ("Equivalent", {}, {}))
        self.assertNotEqual((r.body.get("status") or {}).get("observedGeneration"), 9)
        r = await self.client.get(VAP, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual([c["name"] for c in r.body["columnDefinitions"]], ["Name", "Validations", "ParamKind", "Age"])
        self.assertEqual(r.body["rows"][0]["cells"][:3], ["p", 1, "<unset>"])

    @run
    async def test_validation_messages(self):
        r = await self.client.post(VAP, self.policy(
            failurePolicy="Never", paramKind={"apiVersion": "v1"}, validations=[
                {"expression": "object.x ==", "reason": "Teapot", "message": "two\nlines"}],
            variables=[{"name": "in", "expression": "1"}], auditAnnotations=[{"key": "k", "valueExpression": ""}]))
        self.assertEqual(r.code, 422)
        fields = [c["field"] for c in r.body["details"]["causes"]]
        self.assertEqual(fields, ["spec.failurePolicy", "spec.paramKind.kind", "spec.variables[0].name",
                                  "spec.validations[0].expression", "spec.validations[0].message",
                                  "spec.validations[0].reason", "spec.auditAnnotations[0].valueExpression"])
        self.assertIn('spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier',
                      r.body["message"])
        self.assertIn('spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", '
                      '"Invalid", "RequestEntityTooLarge"', r.body["message"])

    @run
    async def test_bindings(self):
        binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": "b"},
                   "spec": {"policyName": "p", "validationActions": ["Deny", "Warn"],
                            "paramRef": {"name": "x", "selector": {}}}}
        r = await self.client.post(VAPB, binding)
        self.assertEqual(r.code, 422)
        messages = [f"{c['field']}: {c['message']}" for c in r.body["details"]["causes"]]
        self.assertEqual(messages, [
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.parameterNotFoundAction: Required value",
            'spec.validationActions: Invalid value: []admissionregistration.ValidationAction{"Deny", "Warn"}: must not '
            "contain both Deny and Warn (repeating the same validation failure information in the API response and "
            "headers serves no purpose)"])
        binding["spec"] = {"policyName": "p", "validationActions": ["Deny"],
                           "paramRef": {"name": "x", "namespace": "ns", "parameterNotFoundAction": "Allow"},
                           "matchResources": {}}
        r = await self.client.post(VAPB, binding)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["matchResources"]["matchPolicy"], "Equivalent")
        r = await self.client.get(VAPB, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual(r.body["rows"][0]["cells"][:3], ["b", "p", "ns/x"])

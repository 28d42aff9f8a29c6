"""ValidatingAdmissionPolicy end to end: policies and bindings applied with kubectl 1.32 and
enforced on its requests by a real kapiserver process."""
from __future__ import annotations

import json
import textwrap
import uuid

import yaml
from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, shared_server


def deployment(name: str, namespace: str, replicas: int, labels: dict | None = None) -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


class ValidatingAdmissionPolicyTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server("admission-policies", extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.tag = "t" + uuid.uuid4().hex[:6]  # never a number to YAML (a hex like 123e45 is one to kubectl)
        self.ns = f"vap-{self.tag}"
        self.kubectl("create", "ns", self.ns)
        self.kubectl("label", "ns", self.ns, f"policy-test={self.tag}")
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def apply(self, text: str) -> None:
        text = textwrap.dedent(text).replace("ID", self.tag).replace("NAMESPACE", self.ns)
        self.kubectl("apply", "-f", "-", input=text)
        for doc in yaml.safe_load_all(text):
            if doc["kind"].startswith("ValidatingAdmissionPolicy"):
                self.addCleanup(lambda d=doc: self.kubectl("delete", d["kind"].lower(), d["metadata"]["name"],
                                                           check=False))

    def policy(self, actions: list, validations: list, **spec: object) -> None:
        """A policy on Deployments and its binding, limited to this test's namespace."""
        policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                  "metadata": {"name": f"policy-{self.tag}"},
                  "spec": {"failurePolicy": "Fail", "validations": validations, **spec, "matchConstraints": {
                      "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                         "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]}}}
        binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": f"binding-{self.tag}"},
                   "spec": {"policyName": f"policy-{self.tag}", "validationActions": actions,
                            "matchResources": {"namespaceSelector": {"matchLabels": {"policy-test": self.tag}}}}}
        self.apply(yaml.safe_dump_all([policy, binding]))

    def until_denied(self, replicas: int = 100):
        def attempt():
            result = self.kubectl("apply", "-f", "-", check=False,
                                  input=deployment(f"probe-{uuid.uuid4().hex[:4]}", self.ns, replicas))
            return result if result.returncode else None
        return wait_for(attempt, timeout=15)

    def test_replicas_limit_from_a_configmap_param(self):
        self.kubectl("create", "configmap", "limits", "-n", self.ns, "--from-literal=maxReplicas=3")
        self.apply("""
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicy
            metadata: {name: replica-limit-ID}
            spec:
              failurePolicy: Fail
              paramKind: {apiVersion: v1, kind: ConfigMap}
              matchConstraints:
                resourceRules:
                - apiGroups: [apps]
                  apiVersions: [v1]
                  operations: [CREATE, UPDATE]
                  resources: [deployments]
              variables:
              - name: limit
                expression: int(params.data.maxReplicas)
              validations:
              - expression: object.spec.replicas <= variables.limit
                messageExpression: "'replicas must be at most ' + string(variables.limit) + ', got ' + string(object.spec.replicas)"
            ---
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicyBinding
            metadata: {name: replica-limit-ID}
            spec:
              policyName: replica-limit-ID
              validationActions: [Deny]
              paramRef: {name: limits, parameterNotFoundAction: Deny}
              matchResources:
                namespaceSelector: {matchLabels: {policy-test: "ID"}}
            """)
        denied = self.until_denied(5)
        self.assertIn(f'The deployments "', denied.stderr)
        self.assertIn(f"is invalid: : ValidatingAdmissionPolicy 'replica-limit-{self.tag}' with binding "
                      f"'replica-limit-{self.tag}' denied request: replicas must be at most 3, got 5", denied.stderr)
        self.kubectl("apply", "-f", "-", input=deployment("web", self.ns, 3))
        # the limit follows the parameter object
        self.kubectl("patch", "configmap", "limits", "-n", self.ns, "-p", '{"data":{"maxReplicas":"10"}}')
        wait_for(lambda: self.kubectl("apply", "-f", "-", input=deployment("web", self.ns, 8),
                                      check=False).returncode == 0, timeout=15)
        # without the parameter object, parameterNotFoundAction Deny refuses
        self.kubectl("delete", "configmap", "limits", "-n", self.ns)
        denied = wait_for(lambda: (lambda r: r if r.returncode else None)(self.kubectl(
            "apply", "-f", "-", input=deployment("other", self.ns, 1), check=False)), timeout=15)
        self.assertIn("failed to configure binding: no params found for policy binding with `Deny` "
                      "parameterNotFoundAction", denied.stderr)

    def test_warn_action_shows_a_kubectl_warning(self):
        self.policy(["Warn"], [{"expression": "'owner' in object.metadata.labels",
                                 "message": "every Deployment needs an owner label"}])
        def warned():
            result = self.kubectl("apply", "-f", "-", input=deployment(f"w{uuid.uuid4().hex[:4]}", self.ns, 1))
            return result if "Warning:" in result.stderr else None
        result = wait_for(warned, timeout=15)
        self.assertIn(f"Warning: Validation failed for ValidatingAdmissionPolicy 'policy-{self.tag}' with binding "
                      f"'binding-{self.tag}': every Deployment needs an owner label", result.stderr)
        self.assertIn("created", result.stdout)  # Warn does not refuse
        ok = self.kubectl("apply", "-f", "-", input=deployment("owned", self.ns, 1, {"owner": "me"}))
        self.assertNotIn("Warning", ok.stderr)

    def test_reason_forbidden_and_match_conditions(self):
        self.policy(["Deny"], [{"expression": "!object.metadata.name.startsWith('bad')", "reason": "Forbidden",
                                 "message": "names must not start with bad"}],
                    matchConditions=[{"name": "only-creates", "expression": "request.operation == 'CREATE'"}])
        wait_for(lambda: self.kubectl("apply", "-f", "-", check=False,
                                      input=deployment(f"bad-{uuid.uuid4().hex[:4]}", self.ns, 1)).returncode, 15)
        denied = self.kubectl("apply", "-f", "-", input=deployment("bad-name", self.ns, 1), check=False)
        self.assertIn('Error from server (Forbidden): error when creating "STDIN": deployments.apps "bad-name" is '
                      f"forbidden: ValidatingAdmissionPolicy 'policy-{self.tag}' with binding 'binding-{self.tag}' "
                      "denied request: names must not start with bad", denied.stderr)

    def test_type_checking_warns_about_fields_the_schema_lacks(self):
        self.policy(["Audit"], [{"expression": "object.spec.replicass > 0"},
                                {"expression": "object.spec.replicas > 0",
                                 "messageExpression": "'bad ' + object.metadata.nam"}])

        def checked():
            got = json.loads(self.kubectl("get", "validatingadmissionpolicy", f"policy-{self.tag}", "-o",
                                          "json").stdout)
            return got if (got.get("status") or {}).get("observedGeneration") else None
        status = wait_for(checked, timeout=15)["status"]
        warnings = status["typeChecking"]["expressionWarnings"]
        self.assertEqual([w["fieldRef"] for w in warnings],
                         ["spec.validations[0].expression", "spec.validations[1].messageExpression"])
        self.assertEqual(warnings[0]["warning"],
                         "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n"
                         " | object.spec.replicass > 0\n | ...........^\n")
        self.assertIn("undefined field 'nam'", warnings[1]["warning"])

    def test_compile_errors_are_refused_when_the_policy_is_written(self):
        result = self.kubectl("apply", "-f", "-", check=False, input=textwrap.dedent(f"""
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicy
            metadata: {{name: broken-{self.tag}}}
            spec:
              matchConstraints:
                resourceRules:
                - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}
              validations:
              - expression: nosuchvariable > 1
            """))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("spec.validations[0].expression: Invalid value: \"nosuchvariable > 1\": compilation failed: "
                      "ERROR: <input>:1:1: undeclared reference to 'nosuchvariable' (in container '')",
                      result.stderr)

    def test_server_side_apply_of_a_policy_and_of_its_status(self):
        """Policies refuse updates without a resourceVersion; an apply is made on the live object and
        carries its resourceVersion (kubectl apply --server-side again, kube-controller-manager's status
        controller applying status.typeChecking)."""
        name = f"ssa-{self.tag}"
        text = yaml.safe_dump({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": {"round": "ROUND"}},
            "spec": {"validations": [{"expression": "object.spec.replicas < 50"}], "matchConstraints": {
                "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                   "resources": ["deployments"]}]}}})
        self.addCleanup(lambda: self.kubectl("delete", "validatingadmissionpolicy", name, check=False))
        for n in ("1", "2"):
            self.kubectl("apply", "--server-side", "-f", "-", input=text.replace("ROUND", "round-" + n))
        got = json.loads(self.kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout)
        self.assertEqual(got["metadata"]["labels"], {"round": "round-2"})

        api = self.server.python_client()
        body = json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                           "metadata": {"name": name},
                           "status": {"observedGeneration": got["metadata"]["generation"],
                                      "typeChecking": {"expressionWarnings": [
                                          {"fieldRef": "spec.validations[0].expression", "warning": "w"}]}}})
        method, url, headers, _, _ = api.param_serialize(
            "PATCH", f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}/status",
            query_params=[("fieldManager", "validatingadmissionpolicy-status-controller"), ("force", "true")],
            auth_settings=["BearerToken"],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"})
        response = api.call_api(method, url, headers, body=body)
        applied = json.loads(response.read())
        self.assertEqual(response.status, 200, applied)
        self.assertEqual(applied["status"]["typeChecking"]["expressionWarnings"][0]["warning"], "w")
        self.assertNotEqual(applied["metadata"]["resourceVersion"], got["metadata"]["resourceVersion"])

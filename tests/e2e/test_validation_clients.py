"""What users see when an object is refused: kubectl's "The Deployment "web" is
invalid" block and the Python client's 422 with upstream's Status message and
causes, against a real kapiserver process.  Messages are upstream's (kubernetes
v1.32 validation and kubectl's rendering of field causes)."""
from __future__ import annotations

import json
import os
import tempfile
import textwrap
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                   "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
DEPLOYMENT_CAUSES = [
    ("FieldValueInvalid", "spec.replicas", "Invalid value: -1: must be greater than or equal to 0"),
    ("FieldValueInvalid", "spec.template.metadata.labels",
     'Invalid value: map[string]string{"app":"api"}: `selector` does not match template `labels`'),
    ("FieldValueInvalid", "spec.template.spec.containers[0].name", f'Invalid value: "Web_1": {LABEL_MSG}'),
]
DEPLOYMENT = """
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      namespace: {ns}
    spec:
      replicas: -1
      selector:
        matchLabels: {{app: web}}
      template:
        metadata:
          labels: {{app: api}}
        spec:
          containers:
          - name: Web_1
            image: nginx:1.27
    """


def kubectl_block(kind: str, name: str, causes: list[tuple[str, str, str]]) -> str:
    """kubectl's rendering of a 422 (cmdutil.CheckErr): one line for a single cause, a bullet list otherwise."""
    lines = [f"{field}: {message}" for _, field, message in causes]
    head = f'The {kind} "{name}" is invalid: '
    return head + lines[0] if len(lines) == 1 else head + "".join("\n* " + line for line in lines)


class KubectlShowsUpstreamMessages(unittest.TestCase):
    def setUp(self) -> None:
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "val-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def apply(self, manifest: str):
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.server.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(textwrap.dedent(manifest.format(ns=self.ns)))
        return self.kubectl("apply", "-f", path, check=False)

    def assertRefused(self, result, expected: str) -> None:
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertEqual(result.stderr.strip(), expected)

    def test_invalid_deployment(self) -> None:
        self.assertRefused(self.apply(DEPLOYMENT), kubectl_block("Deployment", "web", DEPLOYMENT_CAUSES))
        self.assertEqual(self.kubectl("-n", self.ns, "get", "deploy", check=False).stderr.strip(),
                         f"No resources found in {self.ns} namespace.")

    def test_invalid_service(self) -> None:
        result = self.apply("""
            apiVersion: v1
            kind: Service
            metadata:
              name: web
              namespace: {ns}
            spec:
              selector: {{app: web}}
              ports:
              - {{name: http, port: 70000, targetPort: 8080}}
              - {{name: http, port: 81}}
            """)
        self.assertRefused(result, kubectl_block("Service", "web", [
            ("", "spec.ports[0].port", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
            ("", "spec.ports[1].name", 'Duplicate value: "http"')]))

    def test_invalid_pod(self) -> None:
        result = self.apply("""
            apiVersion: v1
            kind: Pod
            metadata:
              name: web
              namespace: {ns}
              labels: {{tier: -front}}
            spec:
              containers:
              - name: app
                securityContext: {{runAsUser: -1}}
            """)
        self.assertRefused(result, kubectl_block("Pod", "web", [
            ("", "metadata.labels", f'Invalid value: "-front": {LABEL_VALUE_MSG}'),
            ("", "spec.containers[0].image", "Required value"),
            ("", "spec.containers[0].securityContext.runAsUser",
             "Invalid value: -1: must be between 0 and 2147483647, inclusive")]))

    def test_a_single_cause_is_one_line(self) -> None:
        result = self.apply("""
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: settings
              namespace: {ns}
            data:
              "a b": x
            """)
        self.assertRefused(result, kubectl_block("ConfigMap", "settings", [
            ("", "data[a b]", 'Invalid value: "a b": a valid config key must consist of alphanumeric characters, '
                              "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                              "validation is '[-._a-zA-Z0-9]+')")]))


class PythonClientSeesUpstreamStatus(unittest.TestCase):
    def setUp(self) -> None:
        from kubernetes import client, utils
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.api = self.server.python_client()
        self.core, self.apps = client.CoreV1Api(self.api), client.AppsV1Api(self.api)
        self.utils = utils
        self.ns = "valpy-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def refusal(self, call, *args) -> dict:
        from kubernetes.client.rest import ApiException
        with self.assertRaises(ApiException) as caught:
            call(*args)
        self.assertEqual(caught.exception.status, 422)
        return json.loads(caught.exception.body)

    def test_invalid_deployment_status(self) -> None:
        import yaml
        body = yaml.safe_load(textwrap.dedent(DEPLOYMENT.format(ns=self.ns)))
        status = self.refusal(self.apps.create_namespaced_deployment, self.ns, body)
        rendered = [f"{field}: {message}" for _, field, message in DEPLOYMENT_CAUSES]
        self.assertEqual(status["message"], 'Deployment.apps "web" is invalid: [' + ", ".join(rendered) + "]")
        self.assertEqual((status["kind"], status["status"], status["reason"], status["code"]),
                         ("Status", "Failure", "Invalid", 422))
        self.assertEqual({k: status["details"][k] for k in ("name", "group", "kind")},
                         {"name": "web", "group": "apps", "kind": "Deployment"})
        self.assertEqual([(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]],
                         DEPLOYMENT_CAUSES)

    def test_service_cluster_ip_cannot_change(self) -> None:
        svc = {"metadata": {"name": "db"}, "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}}
        created = self.core.create_namespaced_service(self.ns, svc)
        ip = created.spec.cluster_ip
        moved = "10.96.0.99" if ip != "10.96.0.99" else "10.96.0.98"
        status = self.refusal(self.core.patch_namespaced_service, "db", self.ns,
                              {"spec": {"clusterIP": moved, "clusterIPs": [moved]}})
        self.assertEqual(status["message"],
                         f'Service "db" is invalid: spec.clusterIPs[0]: Invalid value: []string{{"{moved}"}}: '
                         f'may not change once set')
        self.assertEqual(status["details"]["causes"], [{
            "reason": "FieldValueInvalid", "field": "spec.clusterIPs[0]",
            "message": f'Invalid value: []string{{"{moved}"}}: may not change once set'}])

    def test_duplicate_messages_are_listed_once_but_kept_as_causes(self) -> None:
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}]}}
        self.core.create_namespaced_pod(self.ns, pod)
        status = self.refusal(self.core.patch_namespaced_pod, "p", self.ns,
                              {"spec": {"containers": [{"name": "a", "image": ""}]}})
        self.assertEqual(status["message"], 'Pod "p" is invalid: spec.containers[0].image: Required value')
        self.assertEqual([(c["reason"], c["field"]) for c in status["details"]["causes"]],
                         [("FieldValueRequired", "spec.containers[0].image")] * 2)

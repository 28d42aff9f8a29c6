"""Server-side apply and managedFields with real clients against a real kapiserver process.

kubectl 1.32 (``apply --server-side``, ``--force-conflicts``, ``diff``,
switching between client-side and server-side apply, ``get
--show-managed-fields``, and the field managers of its other commands), the
``kubernetes`` Python client's dynamic ``server_side_apply``, and a raw
apply PATCH as lightkube sends it, on a Deployment and on a custom resource
with list-map fields.
"""
from __future__ import annotations

import json
import os
import tempfile
import textwrap
import uuid

from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, kubectl_binary, shared_server

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: routes.ssa.example.com
spec:
  group: ssa.example.com
  scope: Namespaced
  names: {plural: routes, singular: route, kind: Route}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              hosts:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [port, protocol]
                items:
                  type: object
                  required: [port]
                  properties:
                    port: {type: integer}
                    protocol: {type: string, default: TCP}
                    name: {type: string}
"""


def managers(obj: dict) -> dict:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or ()}


class KubectlServerSideApplyTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        # commands without a field manager of their own are recorded under the User-Agent's
        # product name, which is kubectl's program name
        self.agent = os.path.basename(kubectl_binary())
        self.ns = "ssa-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.server.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def deployment_file(self, name: str = "web", replicas: int = 2, image: str = "nginx:1.25") -> str:
        return self.write(f"""
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: {name}
              namespace: {self.ns}
              labels: {{app: {name}}}
            spec:
              replicas: {replicas}
              selector:
                matchLabels: {{app: {name}}}
              template:
                metadata:
                  labels: {{app: {name}}}
                spec:
                  containers:
                  - name: nginx
                    image: {image}
                    ports:
                    - containerPort: 80
            """)

    def get(self, *what: str, managed: bool = True) -> dict:
        args = ["-n", self.ns, "get", *what, "-o", "json"] + (["--show-managed-fields"] if managed else [])
        return json.loads(self.kubectl(*args).stdout)

    def test_apply_create_update_noop_conflict_and_force(self):
        path = self.deployment_file()
        self.assertIn("serverside-applied", self.kubectl("apply", "--server-side", "-f", path).stdout)
        got = self.get("deploy", "web")
        self.assertEqual(managers(got)[("kubectl", "Apply", "")]["f:spec"]["f:template"]["f:spec"]["f:containers"],
                         {'k:{"name":"nginx"}': {".": {}, "f:image": {}, "f:name": {}, "f:ports": {
                             'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}})
        rv = got["metadata"]["resourceVersion"]
        self.kubectl("apply", "--server-side", "-f", path)
        self.assertEqual(self.get("deploy", "web")["metadata"]["resourceVersion"], rv)  # a no-op writes nothing

        self.kubectl("-n", self.ns, "scale", "deploy", "web", "--replicas=5")
        self.assertIn((self.agent, "Update", "scale"), managers(self.get("deploy", "web")))
        changed = self.deployment_file(replicas=3)
        failed = self.kubectl("apply", "--server-side", "-f", changed, check=False)
        self.assertNotEqual(failed.returncode, 0)
        self.assertIn(f'Apply failed with 1 conflict: conflict with "{self.agent}" with subresource "scale" using '
                      'apps/v1: .spec.replicas', failed.stderr)
        self.assertIn("--force-conflicts", failed.stderr)
        self.assertEqual(self.get("deploy", "web")["spec"]["replicas"], 5)
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", changed)
        got = self.get("deploy", "web")
        self.assertEqual(got["spec"]["replicas"], 3)
        self.assertNotIn((self.agent, "Update", "scale"), managers(got))
        self.assertIn("f:replicas", managers(got)[("kubectl", "Apply", "")]["f:spec"])

    def test_get_shows_managed_fields_only_when_asked(self):
        self.kubectl("apply", "--server-side", "-f", self.deployment_file())
        self.assertNotIn("managedFields", self.get("deploy", "web", managed=False)["metadata"])
        yaml_out = self.kubectl("-n", self.ns, "get", "deploy", "web", "-o", "yaml", "--show-managed-fields").stdout
        self.assertIn("manager: kubectl\n", yaml_out)
        self.assertIn("operation: Apply\n", yaml_out)
        self.assertIn('k:{"name":"nginx"}:', yaml_out)

    def test_diff_is_a_dry_run_apply(self):
        self.kubectl("apply", "--server-side", "-f", self.deployment_file())
        rv = self.get("deploy", "web")["metadata"]["resourceVersion"]
        same = self.kubectl("diff", "--server-side", "-f", self.deployment_file(), check=False)
        self.assertEqual((same.returncode, same.stdout), (0, ""), same.stderr)
        diff = self.kubectl("diff", "--server-side", "-f", self.deployment_file(replicas=4, image="nginx:1.26"),
                            check=False)
        self.assertEqual(diff.returncode, 1, diff.stderr)
        self.assertIn("-  replicas: 2\n+  replicas: 4", diff.stdout)
        self.assertIn("-      - image: nginx:1.25\n+      - image: nginx:1.26", diff.stdout)
        got = self.get("deploy", "web")
        self.assertEqual((got["metadata"]["resourceVersion"], got["spec"]["replicas"]), (rv, 2))

    def test_switching_between_client_side_and_server_side_apply(self):
        self.kubectl("apply", "-f", self.deployment_file())
        got = self.get("deploy", "web")
        self.assertEqual(set(managers(got)), {("kubectl-client-side-apply", "Update", "")})
        # the image changed: no conflict with the client-side applier, whose last-applied
        # configuration holds the live values of the fields kubectl now applies
        out = self.kubectl("apply", "--server-side", "-f", self.deployment_file(image="nginx:1.26"))
        self.assertIn("serverside-applied", out.stdout)
        got = self.get("deploy", "web")
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26")
        # kubectl migrated the client-side entry into its server-side one and keeps the annotation
        # under its own manager; the server rewrote the annotation with what was applied
        self.assertEqual(set(managers(got)), {("kubectl", "Apply", ""), ("kubectl-last-applied", "Apply", "")})
        self.assertEqual(managers(got)[("kubectl-last-applied", "Apply", "")],
                         {"f:metadata": {"f:annotations": {f"f:{LAST_APPLIED}": {}}}})
        last = json.loads(got["metadata"]["annotations"][LAST_APPLIED])
        self.assertEqual(last["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26")
        # and back to client-side apply, which three-way merges against that annotation
        self.assertIn("configured", self.kubectl("apply", "-f", self.deployment_file(image="nginx:1.27")).stdout)
        got = self.get("deploy", "web")
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27")
        self.assertIn(("kubectl-client-side-apply", "Update", ""), managers(got))
        self.assertEqual(json.loads(got["metadata"]["annotations"][LAST_APPLIED])["spec"]["template"]["spec"][
            "containers"][0]["image"], "nginx:1.27")

    def test_field_managers_of_kubectl_commands(self):
        self.kubectl("-n", self.ns, "create", "deployment", "app", "--image=nginx:1.25")
        self.kubectl("-n", self.ns, "label", "deployment", "app", "tier=frontend")
        self.kubectl("-n", self.ns, "annotate", "deployment", "app", "owner=me")
        self.kubectl("-n", self.ns, "set", "image", "deployment/app", "nginx=nginx:1.26")
        editor = self.write("#!/bin/sh\nsed -i 's/nginx:1.26/nginx:1.27/' \"$1\"\n")
        os.chmod(editor, 0o755)
        self.kubectl("-n", self.ns, "edit", "deployment", "app", env={"KUBE_EDITOR": editor})
        got = self.get("deploy", "app")
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27")
        owned = managers(got)
        self.assertEqual(set(owned), {("kubectl-create", "Update", ""), ("kubectl-label", "Update", ""),
                                      ("kubectl-annotate", "Update", ""), ("kubectl-edit", "Update", "")})
        self.assertEqual(owned[("kubectl-label", "Update", "")], {"f:metadata": {"f:labels": {"f:tier": {}}}})
        self.assertEqual(owned[("kubectl-annotate", "Update", "")],
                         {"f:metadata": {"f:annotations": {".": {}, "f:owner": {}}}})
        # kubectl set image took the image from kubectl-create, then kubectl edit took it from kubectl set
        self.assertEqual(owned[("kubectl-edit", "Update", "")], {"f:spec": {"f:template": {"f:spec": {
            "f:containers": {'k:{"name":"nginx"}': {"f:image": {}}}}}}})
        self.assertNotIn("f:image", owned[("kubectl-create", "Update", "")]["f:spec"]["f:template"]["f:spec"][
            "f:containers"]['k:{"name":"nginx"}'])

    def test_taint_is_recorded_for_kubectl_taint(self):
        node = "n-" + uuid.uuid4().hex[:6]
        # (a node created with nothing but its name has no managedFields, and later updates of an
        # untracked object do not start tracking it: only an apply does, as upstream)
        self.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node",
                                                              "metadata": {"name": node, "labels": {"zone": "a"}}}))
        self.addCleanup(lambda: self.kubectl("delete", "node", node, check=False))
        self.kubectl("taint", "node", node, "dedicated=gpu:NoSchedule")
        got = json.loads(self.kubectl("get", "node", node, "-o", "json", "--show-managed-fields").stdout)
        self.assertEqual(managers(got)[("kubectl-taint", "Update", "")],
                         {"f:spec": {"f:taints": {}}})

    def test_custom_resource_with_list_map_fields(self):
        self.kubectl("apply", "--server-side", "-f", self.write(CRD))
        wait_for(lambda: self.kubectl("get", "routes", "-A", check=False).returncode == 0)
        route = f"""
            apiVersion: ssa.example.com/v1
            kind: Route
            metadata: {{name: r, namespace: {self.ns}}}
            spec:
              hosts: [a.example.com]
              ports:
              - {{port: 80, name: http}}
            """
        self.kubectl("apply", "--server-side", "-f", self.write(route))
        other = f"""
            apiVersion: ssa.example.com/v1
            kind: Route
            metadata: {{name: r, namespace: {self.ns}}}
            spec:
              hosts: [b.example.com]
              ports:
              - {{port: 80, name: web}}
              - {{port: 443, name: https}}
            """
        failed = self.kubectl("apply", "--server-side", "--field-manager=team-b", "-f", self.write(other),
                              check=False)
        self.assertIn('conflict with "kubectl": .spec.ports[port=80,protocol="TCP"].name', failed.stderr)
        other = other.replace("{port: 80, name: web}", "{port: 80, name: http}")
        self.kubectl("apply", "--server-side", "--field-manager=team-b", "-f", self.write(other))
        got = self.get("route", "r")
        self.assertEqual(got["spec"]["hosts"], ["a.example.com", "b.example.com"])
        self.assertEqual(got["spec"]["ports"], [{"name": "http", "port": 80, "protocol": "TCP"},
                                                {"name": "https", "port": 443, "protocol": "TCP"}])
        self.assertEqual(managers(got)[("team-b", "Apply", "")], {"f:spec": {
            "f:hosts": {'v:"b.example.com"': {}},
            "f:ports": {'k:{"port":443,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}},
                        'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}}}}})
        self.kubectl("-n", self.ns, "delete", "route", "r")


class PythonClientServerSideApplyTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client, dynamic
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.api = self.server.python_client()
        self.core = client.CoreV1Api(self.api)
        self.dynamic = dynamic.DynamicClient(self.api)
        self.ns = "pyssa-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def test_dynamic_client_server_side_apply(self):
        from kubernetes.client.exceptions import ApiException
        deployments = self.dynamic.resources.get(api_version="apps/v1", kind="Deployment")
        body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "py"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "py"}}, "template": {
                    "metadata": {"labels": {"app": "py"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
        created = deployments.server_side_apply(body=body, name="py", namespace=self.ns, field_manager="py-ctl")
        self.assertEqual(created.spec.replicas, 1)
        self.assertEqual([(m.manager, m.operation) for m in created.metadata.managedFields], [("py-ctl", "Apply")])
        body["spec"]["replicas"] = 4
        with self.assertRaises(ApiException) as e:
            deployments.server_side_apply(body=body, name="py", namespace=self.ns, field_manager="autoscaler")
        status = json.loads(e.exception.body)
        self.assertEqual((e.exception.status, status["reason"]), (409, "Conflict"))
        self.assertEqual(status["details"]["causes"], [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                                        "message": 'conflict with "py-ctl"'}])
        forced = deployments.server_side_apply(body=body, name="py", namespace=self.ns, field_manager="autoscaler",
                                               force_conflicts=True)
        self.assertEqual(forced.spec.replicas, 4)
        self.assertEqual({m.manager for m in forced.metadata.managedFields}, {"py-ctl", "autoscaler"})

    def test_raw_apply_patch_as_lightkube_sends_it(self):
        """lightkube applies with a PATCH of content type application/apply-patch+yaml and the
        fieldManager/force query parameters (its body here: YAML)."""
        path = f"/api/v1/namespaces/{self.ns}/configmaps/lk"
        body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lk\n  namespace: {self.ns}\ndata:\n  a: '1'\n"

        def patch(query):
            method, url, headers, _, _ = self.api.param_serialize(
                "PATCH", path, query_params=query, auth_settings=["BearerToken"],
                header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"})
            response = self.api.call_api(method, url, headers, body=body)
            return response.status, json.loads(response.read())
        code, data = patch([("fieldManager", "lightkube"), ("force", "true")])
        self.assertEqual((code, data["data"], data["metadata"]["managedFields"][0]["manager"]),
                         (201, {"a": "1"}, "lightkube"))
        code, data = patch([("fieldManager", "lightkube"), ("force", "true")])
        self.assertEqual(code, 200)

    def test_duplicate_keys_in_an_apply_body(self):
        """A key given twice: 400 under fieldValidation=Strict, a warning (the last value kept) otherwise,
        with go-yaml's line numbers, as kube-apiserver."""
        path = f"/api/v1/namespaces/{self.ns}/configmaps/dup"
        body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dup\ndata:\n  a: '1'\n  a: '2'\n  b: x\n"

        def patch(validation):
            method, url, headers, _, _ = self.api.param_serialize(
                "PATCH", path, query_params=[("fieldManager", "dup"), ("fieldValidation", validation)],
                auth_settings=["BearerToken"],
                header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"})
            response = self.api.call_api(method, url, headers, body=body)
            return response.status, json.loads(response.read()), response.getheader("Warning")
        code, status, _ = patch("Strict")
        self.assertEqual((code, status["reason"], status["message"]), (400, "BadRequest", (
            'error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n'
            '  line 7: key "a" already set in map')))
        self.assertEqual(self.core.list_namespaced_config_map(self.ns, field_selector="metadata.name=dup").items, [])
        code, created, warning = patch("Warn")
        self.assertEqual((code, created["data"]), (201, {"a": "2", "b": "x"}))
        self.assertEqual(warning, '299 - "line 7: key \\"a\\" already set in map"')
        code, _, warning = patch("Ignore")
        self.assertEqual((code, warning), (200, None))

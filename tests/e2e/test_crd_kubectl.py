"""CustomResourceDefinitions end to end: kubectl 1.32 and the kubernetes Python client
against a real kapiserver process, with the Issuer fixtures."""
from __future__ import annotations

import copy
import os
import stat
import tempfile

import yaml
from twisted.trial import unittest

from tests.apiextensions.crd_fixtures import FIXTURES, load
from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server

CRD_NAME = "issuers.certs.example.com"


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def widget_crd(group: str, categories: list[str]) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget", "categories": categories},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": {
                             "size": {"type": "integer"}}}}}}}]}}


class CRDKubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"crd-{self._testMethodName.replace('_', '-')[5:40].strip('-')}"
        self.kubectl("apply", "-f", fixture("issuer-crd.yaml"))
        self.kubectl("wait", "--for", "condition=established", f"crd/{CRD_NAME}", "--timeout=10s")
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def write(self, obj: dict) -> str:
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.server.workdir)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(obj, f)
        return path

    def test_apply_get_printer_columns_and_short_name(self):
        out = self.kubectl("-n", self.ns, "apply", "-f", fixture("issuer-ca.yaml")).stdout
        self.assertIn("issuer.certs.example.com/internal-ca created", out)
        table = self.kubectl("-n", self.ns, "get", "issuers").stdout.splitlines()
        self.assertEqual(table[0].split(), ["NAME", "TYPE", "READY", "AGE"])
        self.assertEqual(table[1].split()[:2], ["internal-ca", "CA"])
        self.assertRegex(table[1].split()[-1], r"^\d+s$")  # the date column printed as an age
        wide = self.kubectl("-n", self.ns, "get", "iss", "-o", "wide").stdout.splitlines()
        self.assertEqual(wide[0].split(), ["NAME", "TYPE", "READY", "REPLICAS", "AGE"])
        self.assertEqual(wide[1].split()[-2], "2")
        self.assertIn("internal-ca", self.kubectl("-n", self.ns, "get", "certs").stdout)
        got = yaml.safe_load(self.kubectl("-n", self.ns, "get", "iss", "internal-ca", "-o", "yaml").stdout)
        self.assertEqual((got["spec"]["keyAlgorithm"], got["spec"]["keySize"]), ("RSA", 2048))  # defaults

    def test_invalid_object_rejected_with_upstream_messages(self):
        result = self.kubectl("-n", self.ns, "apply", "-f", fixture("issuer-invalid.yaml"), check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn('The Issuer "broken" is invalid', result.stderr)
        self.assertIn('spec.type: Unsupported value: "Vault"', result.stderr)
        self.assertIn("spec.acme.server: Invalid value: \"http://acme.example.com\": the ACME server must use https",
                      result.stderr)

    def test_unknown_fields_pruned_with_warning_or_rejected_when_strict(self):
        body = load("issuer-ca.yaml")
        body["spec"]["colour"] = "blue"
        path = self.write(body)
        result = self.kubectl("-n", self.ns, "create", "--validate=warn", "-f", path)
        self.assertIn('unknown field "spec.colour"', result.stderr)
        got = yaml.safe_load(self.kubectl("-n", self.ns, "get", "iss", "internal-ca", "-o", "yaml").stdout)
        self.assertNotIn("colour", got["spec"])
        body["metadata"]["name"] = "strict"
        result = self.kubectl("-n", self.ns, "create", "--validate=strict", "-f", self.write(body), check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn('unknown field "spec.colour"', result.stderr)

    def test_patch_merge_scale_edit_and_delete(self):
        self.kubectl("-n", self.ns, "apply", "-f", fixture("issuer-ca.yaml"))
        self.kubectl("-n", self.ns, "patch", "issuer", "internal-ca", "--type", "merge",
                     "-p", '{"spec":{"renewBefore":"12h"}}')
        out = self.kubectl("-n", self.ns, "scale", "issuer/internal-ca", "--replicas=4").stdout
        self.assertIn("scaled", out)
        editor = os.path.join(self.server.workdir, f"editor-{self.ns}.sh")
        with open(editor, "w") as f:
            f.write("#!/bin/sh\nsed -i 's/secretName: internal-ca-key/secretName: rotated-key/' \"$1\"\n")
        os.chmod(editor, stat.S_IRWXU)
        self.kubectl("-n", self.ns, "edit", "issuer", "internal-ca", env={"EDITOR": editor, "KUBE_EDITOR": editor})
        got = yaml.safe_load(self.kubectl("-n", self.ns, "get", "iss", "internal-ca", "-o", "yaml").stdout)
        self.assertEqual((got["spec"]["renewBefore"], got["spec"]["replicas"], got["spec"]["ca"]["secretName"]),
                         ("12h", 4, "rotated-key"))
        self.assertEqual(got["metadata"]["generation"], 4)
        result = self.kubectl("-n", self.ns, "patch", "issuer", "internal-ca", "-p", '{"spec":{"replicas":3}}',
                              check=False)
        self.assertNotEqual(result.returncode, 0)  # strategic merge patch is not for custom resources
        self.assertIn('deleted', self.kubectl("-n", self.ns, "delete", "iss", "internal-ca").stdout)
        self.assertIn("No resources found", self.kubectl("-n", self.ns, "get", "iss").stderr)

    def test_explain_uses_the_crd_schema(self):
        out = self.kubectl("explain", "issuer.spec").stdout
        self.assertIn("KIND:       Issuer", out)
        self.assertIn("keyAlgorithm", out)
        self.assertIn("enum: RSA, ECDSA", out)

    def test_python_client_custom_objects_and_crd_status(self):
        from kubernetes import client
        api = self.server.python_client()
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
        types = {c.type: c.status for c in crd.status.conditions}
        self.assertEqual((types["Established"], types["NamesAccepted"]), ("True", "True"))
        self.assertEqual(crd.status.stored_versions, ["v1"])
        objects = client.CustomObjectsApi(api)
        body = load("issuer-acme.yaml")
        created = objects.create_namespaced_custom_object("certs.example.com", "v1", self.ns, "issuers", body)
        self.assertEqual(created["spec"]["replicas"], 1)
        listed = objects.list_namespaced_custom_object("certs.example.com", "v1", self.ns, "issuers")
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["letsencrypt"])
        with self.assertRaises(client.exceptions.ApiException) as caught:
            bad = copy.deepcopy(body)
            bad["metadata"]["name"] = "bad"
            bad["spec"]["keySize"] = 1000
            objects.create_namespaced_custom_object("certs.example.com", "v1", self.ns, "issuers", bad)
        self.assertEqual(caught.exception.status, 422)
        self.assertIn("ECDSA keys must be 256, 384 or 521 bits, not 1000", caught.exception.body)

    def test_category_all_and_crd_deletion_removes_objects_and_endpoints(self):
        group = f"{self.ns}.example.com"
        self.kubectl("apply", "-f", self.write(widget_crd(group, ["all"])))
        self.kubectl("wait", "--for", "condition=established", f"crd/widgets.{group}", "--timeout=10s")
        self.kubectl("-n", self.ns, "apply", "-f", self.write(
            {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1}}))
        listed = self.kubectl("-n", self.ns, "get", "all").stdout.splitlines()
        self.assertEqual(listed[0].split(), ["NAME", "AGE"])
        # `all` expands to several kinds (pods, services, deployments...), so kubectl names them kind/name
        self.assertEqual(listed[1].split()[0], f"widget.{group}/w1")
        self.kubectl("delete", "crd", f"widgets.{group}", "--timeout=20s")
        result = self.kubectl("-n", self.ns, "get", f"widgets.{group}", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("the server doesn't have a resource type", result.stderr)
        # re-created: served again, and the old objects are gone
        self.kubectl("apply", "-f", self.write(widget_crd(group, [])))
        self.kubectl("wait", "--for", "condition=established", f"crd/widgets.{group}", "--timeout=10s")
        out = wait_for(lambda: (lambda r: r if r.returncode == 0 else None)(
            self.kubectl("-n", self.ns, "get", f"widgets.{group}", check=False)))
        self.assertIn("No resources found", out.stderr)


class CRDRestartTests(unittest.TestCase):
    def test_stored_crds_are_served_right_after_a_restart(self):
        first = ServerProcess(extra_config=E2E_CONFIG).start()
        self.addCleanup(first.cleanup)
        first.kubectl("apply", "-f", fixture("issuer-crd.yaml"))
        first.kubectl("wait", "--for", "condition=established", f"crd/{CRD_NAME}", "--timeout=10s")
        first.kubectl("-n", "default", "apply", "-f", fixture("issuer-ca.yaml"))
        first.stop()
        second = ServerProcess(extra_config=E2E_CONFIG, workdir=first.workdir).start()
        # READY=1 came only after /readyz passed, which includes the CRD install check
        out = second.kubectl("-n", "default", "get", "issuers").stdout
        self.assertIn("internal-ca", out)
        second.stop()

"""kubectl's client-side validation reads ``/openapi/v2`` as protobuf: ``kind: List``
files, kinds the server does not serve, and ``explain --output=plaintext-openapiv2``
all go through it (kubectl fails to parse a JSON answer)."""
from __future__ import annotations

import os
import tempfile
import textwrap

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server


class OpenAPIv2KubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"oa-{self._testMethodName.replace('_', '-')[5:30].strip('-')}"
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.server.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_apply_and_create_a_list_file(self):
        path = self.write(f"""
            apiVersion: v1
            kind: List
            items:
            - apiVersion: v1
              kind: ConfigMap
              metadata: {{name: first, namespace: {self.ns}}}
              data: {{a: b}}
            - apiVersion: v1
              kind: Secret
              metadata: {{name: second, namespace: {self.ns}}}
              stringData: {{token: t}}
            """)
        out = self.kubectl("apply", "-f", path).stdout
        self.assertIn("configmap/first created", out)
        self.assertIn("secret/second created", out)
        self.assertIn("configmap/first unchanged", self.kubectl("apply", "-f", path).stdout)
        self.kubectl("-n", self.ns, "delete", "configmap", "first")
        created = self.kubectl("create", "-f", path, check=False)
        self.assertIn("configmap/first created", created.stdout)
        self.assertIn('secrets "second" already exists', created.stderr)

    def test_list_item_with_unknown_field_is_rejected_by_validation(self):
        path = self.write(f"""
            apiVersion: v1
            kind: List
            items:
            - apiVersion: v1
              kind: ConfigMap
              metadata: {{name: bad, namespace: {self.ns}}}
              bogusField: 1
            """)
        result = self.kubectl("apply", "--validate=strict", "-f", path, check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("bogusField", result.stderr)
        self.assertNotIn("proto", result.stderr)

    def test_unserved_kind_names_the_missing_kind(self):
        path = self.write("""
            apiVersion: example.com/v1
            kind: Widget
            metadata: {name: w}
            """)
        for verb in ("apply", "create"):
            result = self.kubectl(verb, "-f", path, check=False)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn('no matches for kind "Widget" in version "example.com/v1"', result.stderr)

    def test_explain_from_openapi_v2(self):
        out = self.kubectl("explain", "pods.spec.restartPolicy", "--output=plaintext-openapiv2").stdout
        self.assertIn("restartPolicy <string>", out)
        self.assertIn("Restart policy for all containers within the pod", out)
        out = self.kubectl("explain", "deployments.spec.replicas").stdout
        self.assertIn("replicas", out)

"""The plugin's operator fixtures (kube_crds, kube_webhooks) as an operator's test suite uses them.

As in test_pytest_plugin.py, a test project (no conftest) is written into an
empty directory and run by pytest in a subprocess, the plugin coming through
its ``pytest11`` entry point.  kube_controller_manager is exercised by
examples/kube-controller-manager (``make test`` runs the examples).
"""
from __future__ import annotations

import os
import textwrap

from twisted.trial import unittest

from tests.testing import test_pytest_plugin as plugin_tests
from tests.testing.test_pytest_plugin import EXIT_OK, _skip_reason

CRD = textwrap.dedent("""\
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {{name: {plural}.example.com}}
    spec:
      group: example.com
      scope: Namespaced
      names: {{plural: {plural}, singular: {singular}, kind: {kind}}}
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec: {{type: object, properties: {{size: {{type: integer, maximum: {maximum}}}}}}}
    """)


def crd(kind: str, maximum: int = 10) -> str:
    return CRD.format(plural=kind.lower() + "s", singular=kind.lower(), kind=kind, maximum=maximum)


class OperatorFixturesTests(unittest.TestCase):
    skip = _skip_reason()
    # the project harness of the plugin's own tests, not their test methods (the class itself is not imported
    # here: trial would run its tests twice)
    setUp = plugin_tests.PytestPluginTests.setUp
    write = plugin_tests.PytestPluginTests.write
    pytest = plugin_tests.PytestPluginTests.pytest
    assertOutcome = plugin_tests.PytestPluginTests.assertOutcome

    def test_crds_from_files_and_directories(self) -> None:
        self.write("two.yaml", crd("Gadget") + "---\n" + crd("Gizmo"))
        self.write("replaced.yaml", crd("Gadget", maximum=100))
        self.write("not-a-crd.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
        self.write("test_crds.py", textwrap.dedent("""\
            import pytest
            from kubernetes import client

            def create(kube_client, namespace, plural, kind, size):
                return client.CustomObjectsApi(kube_client).create_namespaced_custom_object(
                    "example.com", "v1", namespace, plural,
                    {"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "x"}, "spec": {"size": size}})

            def test_many_documents_served_at_once(kube_crds, kube_client, kube_namespace):
                assert kube_crds("two.yaml") == ["gadgets.example.com", "gizmos.example.com"]
                assert create(kube_client, kube_namespace, "gizmos", "Gizmo", 3)["spec"] == {"size": 3}
                with pytest.raises(client.ApiException) as invalid:
                    create(kube_client, kube_namespace, "gadgets", "Gadget", 50)
                assert invalid.value.status == 422 and "spec.size" in invalid.value.body

            def test_installing_again_replaces(kube_crds, kube_client, kube_namespace, tmp_path):
                (tmp_path / "crds").mkdir()
                (tmp_path / "crds" / "gadget.yaml").write_text(open("replaced.yaml").read())
                (tmp_path / "crds" / "README.md").write_text("not YAML: skipped")
                assert kube_crds(tmp_path / "crds") == ["gadgets.example.com"]
                assert create(kube_client, kube_namespace, "gadgets", "Gadget", 50)["spec"] == {"size": 50}

            def test_other_kinds_are_refused(kube_crds):
                with pytest.raises(ValueError, match="not-a-crd.yaml: a document of kind 'ConfigMap'"):
                    kube_crds("not-a-crd.yaml")
            """))
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "3 passed")

    def test_webhooks_in_the_admission_chain(self) -> None:
        self.write("test_webhooks.py", textwrap.dedent("""\
            import pytest
            from kubernetes import client
            from kapiserver.testing.webhook import allow, deny, patch

            CONFIGMAPS = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}]

            def only(namespace):
                return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}

            def refuse_colors(review):
                data = review["request"]["object"].get("data") or {}
                return deny(review, "no colors here") if "color" in data else allow(review)

            def add_label(review):
                return patch(review, [{"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}])

            def test_validating_and_mutating(kube_webhooks, kube_client, kube_namespace):
                kube_webhooks.validating("colors.example.com", refuse_colors, CONFIGMAPS, **only(kube_namespace))
                kube_webhooks.mutating("label.example.com", add_label, CONFIGMAPS, **only(kube_namespace))
                core = client.CoreV1Api(kube_client)
                with pytest.raises(client.ApiException) as refused:
                    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "a"},
                                                                       "data": {"color": "red"}})
                assert refused.value.status == 403
                assert 'admission webhook \\\\"colors.example.com\\\\" denied the request: no colors here' \\
                    in refused.value.body
                created = core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "b"}})
                assert created.metadata.labels == {"seen": "yes"}
                # (the namespace's kube-root-ca.crt, published by a controller, may be reviewed too)
                names = [r["request"]["name"] for r in kube_webhooks.reviews("colors.example.com")]
                assert [name for name in names if name != "kube-root-ca.crt"] == ["a", "b"]

            def test_configurations_are_gone_after_the_test(kube_client):
                admission = client.AdmissionregistrationV1Api(kube_client)
                names = {c.metadata.name for c in admission.list_validating_webhook_configuration().items}
                names |= {c.metadata.name for c in admission.list_mutating_webhook_configuration().items}
                assert not names & {"colors.example.com", "label.example.com"}
            """))
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "2 passed")

    def test_kube_controller_manager_is_skipped_without_its_binary(self) -> None:
        # the subprocess looks for the binary under ANCHORS_DIR: an empty directory has none
        previous = os.environ.get("ANCHORS_DIR")
        os.environ["ANCHORS_DIR"] = os.path.join(self.dir, "no-anchors")
        self.addCleanup(lambda: os.environ.pop("ANCHORS_DIR") if previous is None
                        else os.environ.__setitem__("ANCHORS_DIR", previous))
        self.write("test_kcm.py", "def test_deployment(kube_controller_manager):\n    raise AssertionError('ran')\n")
        result = self.pytest("-q", "-rs")
        self.assertOutcome(result, EXIT_OK, "1 skipped")
        self.assertIn(f"kube_controller_manager: {self.dir}/no-anchors/bin/kube-controller-manager is absent",
                      result.stdout)

"""Go's typed JSON decoding of built-in kinds from their OpenAPI definitions."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery import limits
from kapiserver.machinery import schema_decoder as sd


def decode(definition: str, value):
    ctx = sd.Context()
    return sd.decode(sd.decoder_for(definition), value, ctx), ctx.unknown


class DecodeTests(unittest.TestCase):
    def assert_error(self, definition: str, value, message: str) -> None:
        with self.assertRaises(sd.DecodeError) as caught:
            decode(definition, value)
        self.assertEqual(str(caught.exception), message)

    def test_go_messages(self):
        cm = "io.k8s.api.core.v1.ConfigMap"
        self.assert_error(cm, {"metadata": {"labels": ["a"]}}, "json: cannot unmarshal array into Go struct field "
                          "ObjectMeta.metadata.labels of type map[string]string")
        self.assert_error(cm, {"data": {"a": True}}, "json: cannot unmarshal bool into Go struct field "
                          "ConfigMap.data of type string")
        self.assert_error(cm, [], "json: cannot unmarshal array into Go value of type v1.ConfigMap")
        dep = "io.k8s.api.apps.v1.Deployment"
        self.assert_error(dep, {"spec": {"replicas": 1.5}}, "json: cannot unmarshal number 1.5 into Go struct "
                          "field DeploymentSpec.spec.replicas of type int32")
        self.assert_error(dep, {"spec": {"template": {"spec": {"containers": [{"ports": [{"containerPort": "x"}]}]}}}},
                          "json: cannot unmarshal string into Go struct field ContainerPort.spec.template.spec."
                          "containers.ports.containerPort of type int32")
        self.assert_error(dep, {"spec": {"strategy": {"rollingUpdate": {"maxSurge": 2 ** 40}}}},
                          "json: cannot unmarshal number 1099511627776 into Go value of type int32")
        self.assert_error("io.k8s.api.core.v1.Secret", {"data": {"a": "YQ"}}, "illegal base64 data at input byte 0")

    def test_decode_against_a_known_object_decodes_only_what_changed(self):
        decoder = sd.decoder_for("io.k8s.api.apps.v1.Deployment")
        known = {"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}}
        # Python's == holds for true and 1, 1.0 and 1: their JSON does not, so the field is decoded
        for replicas, message in ((True, "bool"), (1.0, "number 1.0")):
            with self.assertRaises(sd.DecodeError) as caught:
                decoder.decode_against({**known, "spec": {"replicas": replicas}}, known, sd.Context())
            self.assertEqual(str(caught.exception), f"json: cannot unmarshal {message} into Go struct field "
                             "DeploymentSpec.spec.replicas of type int32")
        # an unchanged field is the value given (not a new copy); a changed one is decoded
        patched = {"metadata": known["metadata"], "spec": {"replicas": 2, "bogus": 1}, "top": 1}
        ctx = sd.Context()
        clean = decoder.decode_against(patched, known, ctx)
        self.assertEqual(clean, {"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 2}})
        self.assertIs(clean["metadata"], known["metadata"])
        self.assertEqual(ctx.unknown, ["spec.bogus", "top"])
        self.assertEqual(list(clean), ["metadata", "spec"])

    def test_unknown_fields_dropped_with_paths(self):
        value, unknown = decode("io.k8s.api.apps.v1.Deployment", {
            "spec": {"bogus": 1, "template": {"spec": {"containers": [{"name": "a", "x": 2}]}}}, "top": {}})
        self.assertEqual(value, {"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}})
        self.assertEqual(unknown, ["spec.bogus", "spec.template.spec.containers[0].x", "top"])

    def test_nulls_times_and_quantities(self):
        value, _ = decode("io.k8s.api.core.v1.Pod", {
            "metadata": {"labels": {"a": None}, "creationTimestamp": None,
                         "deletionTimestamp": "2024-01-01T02:00:00.5+02:00"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}]}})
        self.assertEqual(value["metadata"], {"labels": {"a": ""}, "deletionTimestamp": "2024-01-01T00:00:00Z"})
        self.assertEqual(value["spec"]["containers"][0]["resources"]["limits"], {"cpu": "2", "memory": "1Gi"})

    def test_free_form_fields_are_copied_and_bounded(self):
        crd = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
        default = {"a": [1, {"b": None}]}
        value, _ = decode(crd, {"spec": {"versions": [{"schema": {"openAPIV3Schema": {
            "properties": {"x": {"default": default, "items": [{"type": "string"}],
                                 "additionalProperties": False}}}}}]}})
        props = value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["x"]
        self.assertEqual(props["default"], default)
        self.assertIsNot(props["default"], default)
        deep: object = 1
        for _ in range(limits.MAX_DEPTH + 1):
            deep = [deep]
        with self.assertRaises(limits.TooDeep):
            decode(crd, {"spec": {"versions": [{"schema": {"openAPIV3Schema": {"default": deep}}}]}})

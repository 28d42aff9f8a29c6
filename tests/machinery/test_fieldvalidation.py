"""fieldValidation: unknown and duplicate fields, Strict / Warn / Ignore."""
from __future__ import annotations

import json

from twisted.trial import unittest

from kapiserver.machinery import fieldvalidation as fv
from kapiserver.machinery.errors import StatusError
from kapiserver.machinery.openapi_definitions import load_definitions

CONFIGMAP = {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"}
POD = {"$ref": "#/definitions/io.k8s.api.core.v1.Pod"}

CRD_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
        }},
        "status": {"type": "object"},
    },
}


class DecodeStrictTests(unittest.TestCase):
    def test_duplicates_reported_with_paths_last_value_wins(self):
        raw = b'{"data": {"a": "1", "a": "2"}, "spec": {"c": [{"n": 1, "n": 2}]}, "kind": "X", "kind": "Y"}'
        obj, dups = fv.decode_json_strict(raw)
        self.assertEqual(obj, {"data": {"a": "2"}, "spec": {"c": [{"n": 2}]}, "kind": "Y"})
        self.assertEqual(dups, ["data.a", "spec.c[0].n", "kind"])

    def test_no_duplicates(self):
        self.assertEqual(fv.decode_json_strict(b'{"a": {"a": 1}}'), ({"a": {"a": 1}}, []))

    def test_invalid_json_is_bad_request(self):
        with self.assertRaises(StatusError) as cm:
            fv.decode_json_strict(b'{"a": ')
        self.assertEqual(cm.exception.code, 400)


class UnknownFieldTests(unittest.TestCase):
    def setUp(self):
        self.resolve = load_definitions().resolve_ref

    def unknown(self, obj, schema):
        return fv.unknown_fields(obj, schema, self.resolve)

    def test_map_keys_are_not_unknown(self):
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"any": "thing"}},
               "data": {"x": "1", "y": "2"}, "binaryData": {"z": "AA=="}}
        self.assertEqual(self.unknown(obj, CONFIGMAP), [])

    def test_unknown_top_level_and_metadata_fields(self):
        obj = {"kind": "ConfigMap", "metadata": {"name": "x", "nmae": "y"}, "spec": {"foo": 1}, "data": {}}
        self.assertEqual(self.unknown(obj, CONFIGMAP), ["metadata.nmae", "spec"])

    def test_nested_arrays_of_built_in_kinds(self):
        obj = {"spec": {"containers": [{"name": "a", "image": "i"},
                                       {"name": "b", "image": "i", "imagePullPolicyTwo": "x",
                                        "ports": [{"containerPort": 80, "hostPortt": 1}]}]}}
        self.assertEqual(self.unknown(obj, POD), ["spec.containers[1].imagePullPolicyTwo",
                                                  "spec.containers[1].ports[0].hostPortt"])

    def test_free_form_built_in_types_accept_anything(self):
        obj = {"metadata": {"managedFields": [{"manager": "m", "fieldsV1": {"f:data": {"f:x": {}}}}]}}
        self.assertEqual(self.unknown(obj, CONFIGMAP), [])

    def test_custom_resource_structural_schema(self):
        obj = {"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w", "bogus": 1},
               "spec": {"size": 1, "sise": 2, "items": [{"name": "a", "nmae": "b"}],
                        "config": {"anything": {"goes": True}}, "labels": {"k": "v"},
                        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                     "spec": {"x": "1", "y": "2"}}},
               "status": {"phase": "Ready"}}
        self.assertEqual(self.unknown(obj, CRD_SCHEMA), ["metadata.bogus", "spec.sise", "spec.items[0].nmae",
                                                         "spec.template.spec.y", "status.phase"])

    def test_unresolvable_ref_accepts_anything(self):
        self.assertEqual(self.unknown({"a": {"b": 1}}, {"$ref": "#/definitions/not.There"}), [])


class CheckFieldsTests(unittest.TestCase):
    def setUp(self):
        self.resolve = load_definitions().resolve_ref
        self.obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "spec": {"foo": 1},
                    "data": {"a": "2"}}
        self.raw = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "spec": {"foo": 1},' \
                   b' "data": {"a": "1", "a": "2"}}'

    def test_warn_returns_warning_texts(self):
        warnings = fv.check_fields(self.obj, self.raw, CONFIGMAP, self.resolve, "Warn")
        self.assertEqual(warnings, ['unknown field "spec"', 'duplicate field "data.a"'])

    def test_strict_is_bad_request_with_upstream_message(self):
        with self.assertRaises(StatusError) as cm:
            fv.check_fields(self.obj, self.raw, CONFIGMAP, self.resolve, "Strict")
        status = cm.exception.to_status()
        self.assertEqual((status["code"], status["reason"]), (400, "BadRequest"))
        self.assertEqual(status["message"], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                         'strict decoding error: unknown field "spec", duplicate field "data.a"')

    def test_strict_clean_object_passes(self):
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}}
        self.assertEqual(fv.check_fields(obj, json.dumps(obj).encode(), CONFIGMAP, self.resolve, "Strict"), [])

    def test_ignore_reports_nothing(self):
        self.assertEqual(fv.check_fields(self.obj, self.raw, CONFIGMAP, self.resolve, "Ignore"), [])

    def test_yaml_body_has_no_duplicate_check_but_unknown_fields(self):
        self.assertEqual(fv.check_fields(self.obj, None, CONFIGMAP, self.resolve, "Warn"), ['unknown field "spec"'])

    def test_pruned_paths_from_elsewhere_are_reported_once(self):
        warnings = fv.check_fields({"kind": "W", "spec": {"sise": 1}}, None, CRD_SCHEMA, self.resolve, "Warn",
                                   extra_unknown=["spec.sise"])
        self.assertEqual(warnings, ['unknown field "spec.sise"'])

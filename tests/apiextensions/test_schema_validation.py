"""OpenAPI value validation of custom resources: upstream's exact messages."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.apiextensions.schema.defaulting import apply_defaults
from kapiserver.apiextensions.schema.validation import validate
from kapiserver.machinery import errors
from tests.apiextensions.crd_fixtures import issuer_schema, load, messages


def spec_schema(**props) -> dict:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}


class ValidateTests(unittest.TestCase):
    def check(self, schema: dict, obj: dict) -> list[str]:
        return messages(validate(obj, schema))

    def test_valid_fixtures_pass(self) -> None:
        schema = issuer_schema()
        for name in ("issuer-ca.yaml", "issuer-acme.yaml"):
            obj = load(name)
            apply_defaults(obj, schema)
            self.assertEqual(validate(obj, schema), [], name)

    def test_type_mismatch(self) -> None:
        causes = validate({"spec": {"replicas": "x"}}, spec_schema(replicas={"type": "integer"}))
        self.assertEqual(messages(causes), [
            'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'])
        self.assertEqual(causes[0].type, errors.TYPE_INVALID)

    def test_integral_float_is_an_integer(self) -> None:
        self.assertEqual(self.check(spec_schema(replicas={"type": "integer"}), {"spec": {"replicas": 3.0}}), [])

    def test_minimum_and_exclusive_maximum(self) -> None:
        schema = spec_schema(replicas={"type": "integer", "minimum": 1},
                             ratio={"type": "number", "maximum": 1.5, "exclusiveMaximum": True})
        self.assertEqual(self.check(schema, {"spec": {"replicas": 0, "ratio": 1.5}}), [
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            "spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5"])

    def test_enum(self) -> None:
        causes = validate({"spec": {"mode": "x"}}, spec_schema(mode={"type": "string", "enum": ["a", "b"]}))
        self.assertEqual(messages(causes), ['spec.mode: Unsupported value: "x": supported values: "a", "b"'])
        self.assertEqual(causes[0].type, errors.NOT_SUPPORTED)

    def test_required(self) -> None:
        schema = {"type": "object", "properties": {"spec": {"type": "object", "required": ["foo"]}}}
        causes = validate({"spec": {}}, schema)
        self.assertEqual(messages(causes), ["spec.foo: Required value"])
        self.assertEqual(causes[0].type, errors.REQUIRED)

    def test_string_limits_pattern_and_format(self) -> None:
        schema = spec_schema(name={"type": "string", "maxLength": 3, "minLength": 2, "pattern": "^[a-z]+$"},
                             mail={"type": "string", "format": "email"})
        self.assertEqual(self.check(schema, {"spec": {"name": "ABCD", "mail": "nope"}}), [
            "spec.name: Too long: may not be more than 3 bytes",
            "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
            'spec.mail: Invalid value: "nope": spec.mail in body must be of type email: "nope"'])
        self.assertEqual(self.check(schema, {"spec": {"name": "a"}}), [
            'spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long'])

    def test_array_limits(self) -> None:
        schema = spec_schema(items={"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "integer"}})
        self.assertEqual(self.check(schema, {"spec": {"items": [1, 2, "x"]}}), [
            "spec.items: Too many: 3: must have at most 2 items",
            'spec.items[2]: Invalid value: "string": spec.items[2] in body must be of type integer: "string"'])
        self.assertEqual(self.check(schema, {"spec": {"items": []}}), [
            "spec.items: Invalid value: 0: spec.items in body should have at least 1 items"])

    def test_multiple_of_and_properties_limits(self) -> None:
        schema = spec_schema(n={"type": "integer", "multipleOf": 5},
                             m={"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}})
        self.assertEqual(self.check(schema, {"spec": {"n": 7, "m": {"a": "x", "b": 1}}}), [
            "spec.n: Invalid value: 7: spec.n in body should be a multiple of 5",
            "spec.m: Too many: 2: must have at most 1 items",
            'spec.m.b: Invalid value: "integer": spec.m.b in body must be of type string: "integer"'])

    def test_int_or_string(self) -> None:
        schema = spec_schema(port={"x-kubernetes-int-or-string": True})
        self.assertEqual(self.check(schema, {"spec": {"port": 80}}), [])
        self.assertEqual(self.check(schema, {"spec": {"port": "http"}}), [])
        self.assertEqual(self.check(schema, {"spec": {"port": True}}), [
            'spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'])

    def test_nullable(self) -> None:
        schema = spec_schema(a={"type": "string", "nullable": True}, b={"type": "string"})
        self.assertEqual(self.check(schema, {"spec": {"a": None, "b": None}}), [
            'spec.b: Invalid value: "null": spec.b in body must be of type string: "null"'])

    def test_list_type_set_and_map(self) -> None:
        schema = spec_schema(
            tags={"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            ports={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                   "items": {"type": "object", "properties": {"name": {"type": "string"}}}})
        causes = validate({"spec": {"tags": ["a", "b", "a"], "ports": [{"name": "x"}, {"name": "x"}, {}]}}, schema)
        self.assertEqual(messages(causes), [
            'spec.tags[2]: Duplicate value: "a"',
            'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"x"}',
            "spec.ports[2].name: Required value"])
        self.assertEqual(causes[0].type, errors.DUPLICATE)

    def test_any_of_and_not(self) -> None:
        schema = spec_schema(v={"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}],
                                "not": {"enum": ["bad"]}})
        self.assertEqual(self.check(schema, {"spec": {"v": "cat"}}), [
            'spec.v: Invalid value: "": spec.v in body must validate at least one schema (anyOf)'])
        self.assertEqual(self.check(schema, {"spec": {"v": "apple"}}), [])

    def test_embedded_resource_needs_apiversion_and_kind(self) -> None:
        schema = spec_schema(t={"type": "object", "x-kubernetes-embedded-resource": True,
                                "x-kubernetes-preserve-unknown-fields": True})
        self.assertEqual(self.check(schema, {"spec": {"t": {"metadata": {}}}}), [
            "spec.t.apiVersion: Required value: must not be empty",
            "spec.t.kind: Required value: must not be empty"])

    def test_invalid_fixture_reports_every_problem(self) -> None:
        got = messages(validate(load("issuer-invalid.yaml"), issuer_schema()))
        self.assertIn('spec.type: Unsupported value: "Vault": supported values: "ACME", "CA", "SelfSigned"', got)
        self.assertIn("spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
                      got)
        self.assertIn('spec.dnsNames[1]: Duplicate value: "a.example.com"', got)
        self.assertIn('spec.acme.solvers[1]: Duplicate value: map[string]interface {}{"name":"http"}', got)
        self.assertIn("spec.acme.privateKeySecretRef: Required value", got)
        self.assertEqual(len(got), 8)

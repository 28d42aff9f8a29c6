"""CustomResourceDefinition defaulting and validation: upstream's paths and messages."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.apiextensions.crd_validation import (default_crd, served_versions, storage_version,
                                                     validate_crd, version_schema)
from kapiserver.apiextensions.schema.structural import violations
from tests.apiextensions.crd_fixtures import load, messages


class CRDTests(unittest.TestCase):
    def setUp(self) -> None:
        self.crd = load("issuer-crd.yaml")
        default_crd(self.crd)

    def v1(self) -> dict:
        return self.crd["spec"]["versions"][1]

    def test_defaults(self) -> None:
        crd = load("issuer-crd.yaml")
        del crd["spec"]["names"]["singular"]
        default_crd(crd)
        self.assertEqual(crd["spec"]["names"]["listKind"], "IssuerList")
        self.assertEqual(crd["spec"]["names"]["singular"], "issuer")
        self.assertEqual(crd["spec"]["conversion"], {"strategy": "None"})
        self.assertIs(crd["spec"]["preserveUnknownFields"], False)

    def test_fixture_is_valid(self) -> None:
        self.assertEqual(validate_crd(self.crd), [])
        self.assertEqual(served_versions(self.crd), ["v1alpha1", "v1"])
        self.assertEqual(storage_version(self.crd), "v1")
        self.assertEqual(version_schema(self.crd, "v1")["type"], "object")

    def test_name_must_match(self) -> None:
        self.crd["metadata"]["name"] = "issuer.certs.example.com"
        self.assertEqual(messages(validate_crd(self.crd)), [
            'metadata.name: Invalid value: "issuer.certs.example.com": must be spec.names.plural+"."+spec.group'])

    def test_group_needs_a_dot(self) -> None:
        self.crd["spec"]["group"] = "certs"
        self.crd["metadata"]["name"] = "issuers.certs"
        self.assertEqual(messages(validate_crd(self.crd)), [
            'spec.group: Invalid value: "certs": should be a domain with at least one dot'])

    def test_exactly_one_storage_version(self) -> None:
        self.crd["spec"]["versions"][0]["storage"] = True
        got = messages(validate_crd(self.crd))
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0].startswith("spec.versions: Invalid value: "))
        self.assertTrue(got[0].endswith(": must have exactly one version marked as storage version"))

    def test_bad_names(self) -> None:
        self.crd["spec"]["names"]["shortNames"] = ["Bad"]
        self.crd["spec"]["versions"][0]["name"] = "V1Alpha1"
        got = messages(validate_crd(self.crd))
        self.assertEqual(len(got), 2)
        self.assertTrue(got[0].startswith('spec.names.shortNames[0]: Invalid value: "Bad": a DNS-1035 label'))
        self.assertTrue(got[1].startswith('spec.versions[0].name: Invalid value: "V1Alpha1": a DNS-1035 label'))

    def test_scope_is_immutable(self) -> None:
        old = load("issuer-crd.yaml")
        self.crd["spec"]["scope"] = "Cluster"
        self.assertEqual(messages(validate_crd(self.crd, old)),
                         ['spec.scope: Invalid value: "Cluster": field is immutable'])
        self.crd["spec"]["scope"] = "Global"
        self.assertIn('spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
                      messages(validate_crd(self.crd)))

    def test_schema_required_and_structural(self) -> None:
        del self.crd["spec"]["versions"][0]["schema"]
        self.v1()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["keySize"] = {"minimum": 1}
        self.assertEqual(messages(validate_crd(self.crd)), [
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
            "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[keySize].type: Required value: "
            "must not be empty for specified object fields"])

    def test_cel_compile_error_reported_at_rule(self) -> None:
        rules = self.v1()["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
        rules[1]["rule"] = "self.type =="
        got = messages(validate_crd(self.crd))
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0].startswith(
            "spec.versions[1].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: "
            'Invalid value: "self.type ==": compilation failed: '), got[0])

    def test_printer_columns_scale_and_selectable_fields(self) -> None:
        self.v1()["additionalPrinterColumns"][0]["type"] = "float"
        self.v1()["subresources"]["scale"]["specReplicasPath"] = ".status.replicas"
        self.v1()["selectableFields"] = [{"jsonPath": ".spec.labels"}, {"jsonPath": ".spec.nope"}]
        self.assertEqual(messages(validate_crd(self.crd)), [
            "spec.versions[1].subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": "
            "should be a json path under .spec",
            'spec.versions[1].additionalPrinterColumns[0].type: Unsupported value: "float": supported values: '
            '"boolean", "date", "integer", "number", "string"',
            'spec.versions[1].selectableFields[0].jsonPath: Invalid value: ".spec.labels": must point to a field '
            "of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            'spec.versions[1].selectableFields[1].jsonPath: Invalid value: ".spec.nope": is an invalid path: '
            "does not refer to a valid field"])


class StructuralTests(unittest.TestCase):
    def test_rules(self) -> None:
        schema = {"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "spec": {"type": "object", "properties": {
                "m": {"type": "object", "properties": {"a": {"type": "string"}},
                      "additionalProperties": {"type": "string"}},
                "d": {"type": "integer", "default": "one"},
                "l": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["a"]},
                "j": {"type": "string", "anyOf": [{"type": "string"}]}}}}}
        self.assertEqual(violations(schema, "s"), [
            "s.properties[spec].properties[m].additionalProperties: Forbidden: additionalProperties and properties "
            "are mutual exclusive",
            's.properties[spec].properties[d].default: Invalid value: "string":  in body must be of type integer: '
            '"string"',
            's.properties[spec].properties[l].x-kubernetes-list-map-keys: Invalid value: ["a"]: must be empty if '
            "x-kubernetes-list-type is not map",
            "s.properties[spec].properties[j].anyOf[0].type: Forbidden: must be empty to be structural",
            "s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but "
            "metadata is implicitly specified"])

    def test_int_or_string_any_of_is_structural(self) -> None:
        schema = {"type": "object", "properties": {"p": {
            "x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}
        self.assertEqual(violations(schema), [])

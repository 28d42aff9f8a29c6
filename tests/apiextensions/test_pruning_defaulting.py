"""Pruning unknown fields and applying schema defaults to custom resources."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.apiextensions.schema.defaulting import apply_defaults
from kapiserver.apiextensions.schema.pruning import prune
from tests.apiextensions.crd_fixtures import issuer_schema, load


class PruneTests(unittest.TestCase):
    def test_unknown_fields_removed_and_reported(self) -> None:
        obj = load("issuer-ca.yaml")
        obj["spec"]["colour"] = "blue"
        obj["spec"]["ca"]["extra"] = 1
        obj["spec"]["acme"] = {"server": "https://x", "privateKeySecretRef": {"name": "a"},
                               "solvers": [{"name": "s", "bogus": True}]}
        obj["top"] = 1
        pruned = prune(obj, issuer_schema())
        self.assertEqual(pruned, ["spec.acme.solvers[0].bogus", "spec.ca.extra", "spec.colour", "top"])
        self.assertNotIn("colour", obj["spec"])
        self.assertEqual(obj["spec"]["acme"]["solvers"], [{"name": "s"}])

    def test_root_type_meta_and_metadata_kept(self) -> None:
        obj = load("issuer-ca.yaml")
        obj["metadata"]["labels"] = {"a": "b"}
        self.assertEqual(prune(obj, issuer_schema()), [])
        self.assertEqual(obj["apiVersion"], "certs.example.com/v1")
        self.assertEqual(obj["metadata"]["labels"], {"a": "b"})

    def test_embedded_resource_keeps_unknown_but_prunes_its_metadata(self) -> None:
        obj = load("issuer-acme.yaml")
        obj["spec"]["podTemplate"]["metadata"]["nonsense"] = 1
        self.assertEqual(prune(obj, issuer_schema()), ["spec.podTemplate.metadata.nonsense"])
        self.assertEqual(obj["spec"]["podTemplate"]["spec"]["containers"][0]["image"], "example/solver:1")

    def test_preserve_unknown_fields_keeps_everything(self) -> None:
        schema = {"type": "object", "properties": {"spec": {"type": "object",
                                                            "x-kubernetes-preserve-unknown-fields": True}}}
        obj = {"spec": {"anything": {"deep": [1]}}}
        self.assertEqual(prune(obj, schema), [])
        self.assertEqual(obj, {"spec": {"anything": {"deep": [1]}}})


class DefaultTests(unittest.TestCase):
    def test_missing_fields_get_defaults(self) -> None:
        obj = load("issuer-ca.yaml")
        apply_defaults(obj, issuer_schema())
        self.assertEqual(obj["spec"]["keyAlgorithm"], "RSA")
        self.assertEqual(obj["spec"]["keySize"], 2048)
        self.assertEqual(obj["spec"]["replicas"], 2)  # given values are kept

    def test_defaults_inside_list_items_and_maps(self) -> None:
        schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "protocol": {"type": "string", "default": "TCP"}}}},
            "limits": {"type": "object", "additionalProperties": {
                "type": "object", "properties": {"max": {"type": "integer", "default": 10}}}}}}}}
        obj = {"spec": {"ports": [{}, {"protocol": "UDP"}], "limits": {"a": {}}}}
        apply_defaults(obj, schema)
        self.assertEqual(obj["spec"]["ports"], [{"protocol": "TCP"}, {"protocol": "UDP"}])
        self.assertEqual(obj["spec"]["limits"], {"a": {"max": 10}})

    def test_null_replaced_by_default_unless_nullable(self) -> None:
        schema = {"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string", "default": "y", "nullable": True},
            "c": {"type": "string"}}}
        obj = {"a": None, "b": None, "c": None}
        apply_defaults(obj, schema)
        self.assertEqual(obj, {"a": "x", "b": None})

    def test_default_object_is_copied(self) -> None:
        schema = {"type": "object", "properties": {"o": {"type": "object", "default": {"k": []},
                                                         "properties": {"k": {"type": "array",
                                                                              "items": {"type": "string"}}}}}}
        first, second = {}, {}
        apply_defaults(first, schema)
        apply_defaults(second, schema)
        first["o"]["k"].append("x")
        self.assertEqual(second["o"]["k"], [])

"""Every served built-in kind goes through protobuf and back unchanged.

For each resource type the server serves (apis/builtin.py, and the
CustomResourceDefinition kind of the apiextensions link), a sample object is
generated from its upstream OpenAPI definition with a non-zero value in every
field, so nothing can hide behind Go's ``omitempty``: encoding it and decoding
the bytes must give the same JSON.  A kind without a protobuf table, or a
field a table lacks or names differently from the schema, fails here.
"""
from __future__ import annotations

import itertools

from twisted.trial import unittest

from kapiserver.apiextensions import customresourcedefinitions
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery import protobuf
from kapiserver.machinery.openapi_definitions import load_definitions, ref_name
from kapiserver.machinery.protobuf_tables import message_for
from kapiserver.registry.resource_type import ResourceType

API_EXTENSIONS = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."

# Kinds clients send to subresources (their schemas are looked up by group/version/kind).
SUBRESOURCE_KINDS = [("autoscaling", "v1", "Scale"), ("policy", "v1", "Eviction"), ("", "v1", "Binding"),
                     ("authentication.k8s.io", "v1", "TokenRequest"),
                     ("authentication.k8s.io", "v1", "TokenReview"), ("", "v1", "Status")]


def served_resource_types() -> list[ResourceType]:
    return builtin_resource_types() + [customresourcedefinitions.resource_type()]


class SampleGenerator:
    """A JSON object for a schema with every field set to a non-zero value.

    Types whose JSON is not a plain object get values of their JSON form
    (times, quantities, int-or-strings, raw JSON, the JSONSchemaProps unions);
    recursive definitions stop after one level.
    """

    def __init__(self) -> None:
        self.defs = load_definitions()
        self.counter = itertools.count(1)

    def for_definition(self, name: str, api_version: str = "", kind: str = "") -> dict:
        obj = self.value({"$ref": f"#/definitions/{name}"}, (), top=True)
        if kind:
            obj["apiVersion"], obj["kind"] = api_version, kind
        return obj

    def value(self, schema: dict, stack: tuple, top: bool = False):
        ref = schema.get("$ref")
        if ref:
            return self.named(ref_name(ref), stack, top)
        typ = schema.get("type")
        n = next(self.counter)
        if typ == "object" or "properties" in schema:
            if "properties" in schema:
                return self.properties(schema, stack, top)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                return {f"key-{n}": self.value(extra, stack), f"other-{n}": self.value(extra, stack)}
            return {}  # a struct without fields (CustomResourceSubresourceStatus)
        if typ == "array":
            return [self.value(schema.get("items") or {}, stack), self.value(schema.get("items") or {}, stack)]
        if typ == "string":
            fmt = schema.get("format")
            if fmt == "byte":
                return "AAEC/w=="
            if fmt == "date-time":
                return f"2024-01-02T03:04:{n % 60:02d}Z"
            if fmt == "int-or-string":
                return f"{n}%"
            return f"s{n}"
        if typ == "integer":
            return n
        if typ == "number":
            return n + 0.25
        if typ == "boolean":
            return True
        return {"untyped": n}

    def named(self, name: str, stack: tuple, top: bool):
        n = next(self.counter)
        if name == META + "MicroTime":
            return f"2024-01-02T03:04:{n % 60:02d}.{n:06d}Z"
        if name == META + "Time":
            return f"2024-01-02T03:04:{n % 60:02d}Z"
        if name == META + "FieldsV1":
            return {"f:metadata": {"f:labels": {".": {}, f"f:k{n}": {}}}}
        if name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
            return n if n % 2 else f"port-{n}"
        if name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
            return f"{n}Mi"
        if name in ("io.k8s.apimachinery.pkg.runtime.RawExtension", API_EXTENSIONS + "JSON"):
            return {"raw": [n, "json", None, {"nested": True}, 2.5]}
        if name == API_EXTENSIONS + "JSONSchemaPropsOrBool":
            return False if n % 2 else self.named(API_EXTENSIONS + "JSONSchemaProps", stack, False)
        if name == API_EXTENSIONS + "JSONSchemaPropsOrArray":
            schema = self.named(API_EXTENSIONS + "JSONSchemaProps", stack, False)
            return [schema, schema] if n % 2 else schema
        if name == API_EXTENSIONS + "JSONSchemaPropsOrStringArray":
            return ["a", f"b{n}"] if n % 2 else self.named(API_EXTENSIONS + "JSONSchemaProps", stack, False)
        if stack.count(name) >= 1:
            return {}  # a recursive type: its own fields were filled one level up
        schema = self.defs.get(name)
        if "x-kubernetes-group-version-kind" in schema and not top:
            # a kind's object nested in another (a StatefulSet's claim templates): protobuf
            # carries no type meta there, so neither does the sample
            schema = {**schema, "properties": {k: v for k, v in schema["properties"].items()
                                               if k not in ("apiVersion", "kind")}}
        return self.value({k: v for k, v in schema.items() if k != "$ref"}, stack + (name,), top)

    def properties(self, schema: dict, stack: tuple, top: bool) -> dict:
        return {name: self.value(prop, stack) for name, prop in schema["properties"].items()
                if not (top and name in ("apiVersion", "kind"))}


class EveryServedKindTests(unittest.TestCase):
    def setUp(self):
        self.samples = SampleGenerator()
        self.gvk_index = load_definitions().gvk_index()

    def assert_round_trip(self, obj: dict) -> None:
        body = protobuf.encode_object(obj)
        decoded = protobuf.decode_object(body)
        self.assertEqual(decoded.unknown_fields, [])
        self.assertEqual(decoded.obj, obj, f"{obj['apiVersion']} {obj['kind']} changed through protobuf")

    def test_every_served_kind_and_its_list(self):
        kinds = []
        for rtype in served_resource_types():
            with self.subTest(kind=f"{rtype.api_version} {rtype.kind}"):
                self.assertIsNotNone(message_for(rtype.group, rtype.version, rtype.kind),
                                     f"no protobuf table for {rtype.api_version} {rtype.kind}")
                obj = self.samples.for_definition(rtype.schema_name, rtype.api_version, rtype.kind)
                self.assert_round_trip(obj)
                if "list" in rtype.verbs:
                    self.assertIsNotNone(message_for(rtype.group, rtype.version, rtype.list_kind))
                    listed = self.samples.for_definition(rtype.schema_name + "List", rtype.api_version,
                                                         rtype.list_kind)
                    listed["items"] = [self.samples.for_definition(rtype.schema_name) for _ in range(2)]
                    self.assert_round_trip(listed)
                kinds.append(rtype.kind)
        self.assertIn("CustomResourceDefinition", kinds)
        self.assertIn("ControllerRevision", kinds)

    def test_subresource_kinds(self):
        for group, version, kind in SUBRESOURCE_KINDS:
            api_version = f"{group}/{version}" if group else version
            obj = self.samples.for_definition(self.gvk_index[(group, version, kind)], api_version, kind)
            self.assert_round_trip(obj)

    def test_crd_schema_unions_and_json_values(self):
        # the JSONSchemaProps fields whose JSON is not an object of their protobuf fields
        schema = {
            "type": "object", "maximum": 2.5, "minimum": 1, "multipleOf": 0.25,
            "default": {"a": [1, None, "x", True, 1.5]}, "example": "text", "enum": [1, "two", None, {"k": []}],
            "properties": {
                "list": {"type": "array", "items": {"type": "string"}},
                "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                          "additionalItems": False},
                "map": {"type": "object", "additionalProperties": {"type": "integer"}},
                "closed": {"type": "object", "additionalProperties": False},
                "open": {"type": "object", "additionalProperties": True},
                "deps": {"type": "object", "dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}}},
                "zero": {"type": "number", "default": 0, "maximum": 0},
            },
            "x-kubernetes-preserve-unknown-fields": False,
        }
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "things.example.com"},
               "spec": {"group": "example.com", "names": {"plural": "things", "kind": "Thing"}, "scope": "Namespaced",
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": schema}}]}}
        got = protobuf.decode_object(protobuf.encode_object(crd)).obj
        self.assertEqual(got["spec"]["versions"][0]["schema"]["openAPIV3Schema"], schema)
        self.assertIsInstance(got["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["minimum"], int)

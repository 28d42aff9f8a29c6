"""Structured-merge semantics of values against schemas (structured-merge-diff's typed package).

A small schema in upstream's OpenAPI vocabulary exercises each list and map
kind: an atomic list (the default), a set, a list-map with a defaulted key,
a built-in style ``patch-merge-key`` list, granular and atomic maps.
"""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery.managedfields import typed
from kapiserver.machinery.managedfields.fieldpath import Set, path_string
from kapiserver.machinery.managedfields.schema import Compiler, crd_root

DEFS = {
    "Thing": {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"$ref": "#/definitions/Meta"},
        "spec": {"$ref": "#/definitions/Spec"}}},
    "Meta": {"type": "object", "properties": {
        "name": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "Spec": {"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "enabled": {"type": "boolean"},
        "args": {"type": "array", "items": {"type": "string"}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["port", "protocol"], "items": {"$ref": "#/definitions/Port"}},
        "containers": {"type": "array", "x-kubernetes-patch-strategy": "merge",
                       "x-kubernetes-patch-merge-key": "name", "items": {"$ref": "#/definitions/Container"}},
        "selector": {"$ref": "#/definitions/Selector"},
        "free": {"type": "object"}}},
    "Port": {"type": "object", "properties": {"port": {"type": "integer"}, "protocol": {"type": "string",
                                                                                        "default": "TCP"},
                                              "name": {"type": "string"}}},
    "Container": {"type": "object", "properties": {"name": {"type": "string"}, "image": {"type": "string"}}},
    "Selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                 "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
}


def root():
    return Compiler(DEFS.__getitem__).named("Thing")


def fs(value) -> list[str]:
    return [path_string(p) for p in typed.to_field_set(value, root()).paths()]


class FieldSetTests(unittest.TestCase):
    def test_leaves_members_and_map_keys(self):
        self.assertEqual(fs({"metadata": {"labels": {"a": "b"}}, "spec": {"replicas": 1, "args": ["x"]}}),
                         [".metadata.labels.a", ".spec.args", ".spec.replicas"])

    def test_associative_items_are_members_with_children(self):
        got = typed.to_field_set({"spec": {"ports": [{"port": 80}], "tags": ["a", "b"],
                                           "containers": [{"name": "c", "image": "i"}]}}, root())
        self.assertEqual(got.to_fields(), {"f:spec": {
            "f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}},
            # the missing protocol key takes its schema default
            "f:ports": {'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:port": {}}},
            "f:tags": {'v:"a"': {}, 'v:"b"': {}}}})

    def test_null_empty_map_and_atomic_map_are_members(self):
        self.assertEqual(fs({"spec": {"replicas": None, "free": {}, "selector": {"matchLabels": {"a": "b"}}}}),
                         [".spec.free", ".spec.replicas", ".spec.selector"])

    def test_duplicates_are_members_without_children(self):
        got = typed.to_field_set({"spec": {"containers": [{"name": "c", "image": "1"}, {"name": "c"}]}}, root())
        self.assertEqual(got.to_fields(), {"f:spec": {"f:containers": {'k:{"name":"c"}': {}}}})


class ValidateTests(unittest.TestCase):
    def error(self, value) -> str:
        with self.assertRaises(typed.ValidationErrors) as e:
            typed.validate(value, root())
        return str(e.exception)

    def test_unknown_field(self):
        self.assertEqual(self.error({"spec": {"replicaz": 1}}), ".spec.replicaz: field not declared in schema")

    def test_scalar_types(self):
        self.assertEqual(self.error({"spec": {"replicas": "1"}}),
                         ".spec.replicas: expected numeric (int or float), got string")
        self.assertEqual(self.error({"spec": {"enabled": 1}}), ".spec.enabled: expected boolean, got &{1}")

    def test_list_keys(self):
        self.assertEqual(self.error({"spec": {"ports": [{"name": "x"}]}}),
                         '.spec.ports: element 0: associative list with keys has an element that omits key field '
                         '"port" (and doesn\'t have default value)')
        self.assertEqual(self.error({"spec": {"ports": [{"port": 1}, {"port": 1, "protocol": "TCP"}]}}),
                         '.spec.ports: duplicate entries for key [port=1,protocol="TCP"]')
        self.assertEqual(self.error({"spec": {"tags": [{"a": 1}]}}),
                         ".spec.tags: element 0: associative list without keys has an element that's a map type")

    def test_several_errors(self):
        self.assertEqual(self.error({"spec": {"replicas": "x", "enabled": "y"}}),
                         "errors:\n  .spec.replicas: expected numeric (int or float), got string\n"
                         "  .spec.enabled: expected boolean, got &{y}")

    def test_valid(self):
        typed.validate({"apiVersion": "v1", "spec": {"replicas": None, "free": {"anything": [1, {"x": 2}]}}},
                       root())


class CompareTests(unittest.TestCase):
    def test_added_modified_removed(self):
        c = typed.compare({"spec": {"replicas": 1, "args": ["a"], "tags": ["x"]}},
                          {"spec": {"replicas": 2, "args": ["b"], "tags": ["y"]}, "metadata": {"labels": {"a": "b"}}},
                          root())
        self.assertEqual([path_string(p) for p in c.added.paths()],
                         [".metadata", ".metadata.labels", ".metadata.labels.a", '.spec.tags[="y"]'])
        self.assertEqual([path_string(p) for p in c.modified.paths()], [".spec.args", ".spec.replicas"])
        self.assertEqual([path_string(p) for p in c.removed.paths()], ['.spec.tags[="x"]'])

    def test_equal(self):
        self.assertTrue(typed.compare({"spec": {"replicas": 1}}, {"spec": {"replicas": 1}}, root()).is_same())


class MergeTests(unittest.TestCase):
    def merge(self, live, config):
        return typed.merge(live, config, root())

    def test_granular_maps_and_atomic_values(self):
        got = self.merge({"metadata": {"labels": {"a": "1"}}, "spec": {"args": ["a", "b"], "selector": {
                             "matchLabels": {"x": "1", "y": "2"}}}},
                         {"metadata": {"labels": {"b": "2"}}, "spec": {"args": ["c"], "selector": {
                             "matchLabels": {"z": "3"}}}})
        self.assertEqual(got, {"metadata": {"labels": {"a": "1", "b": "2"}},
                               "spec": {"args": ["c"], "selector": {"matchLabels": {"z": "3"}}}})

    def test_list_map_items_merge_by_key(self):
        got = self.merge({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}},
                         {"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}]}})
        self.assertEqual(got["spec"]["containers"], [{"name": "a", "image": "1"}, {"name": "b", "image": "3"},
                                                     {"name": "c", "image": "4"}])

    def test_applied_order_wins_for_shared_items(self):
        # applied items follow the applied order; a live-only item keeps its place after
        # the live item it followed (x after b), ahead of applied items still to come
        got = self.merge({"spec": {"tags": ["a", "b", "x"]}}, {"spec": {"tags": ["b", "a"]}})
        self.assertEqual(got["spec"]["tags"], ["b", "x", "a"])
        got = self.merge({"spec": {"tags": ["a", "b", "c"]}}, {"spec": {"tags": ["c", "d"]}})
        self.assertEqual(got["spec"]["tags"], ["a", "b", "c", "d"])


class RemoveTests(unittest.TestCase):
    def test_remove_items_and_emptied_containers(self):
        value = {"metadata": {"labels": {"a": "1"}}, "spec": {"tags": ["a", "b"], "replicas": 1}}
        gone = Set.of(("f:metadata", "f:labels", "f:a"), ("f:spec", "f:tags", 'v:"a"'))
        self.assertEqual(typed.remove_items(value, gone, root()), {"spec": {"tags": ["b"], "replicas": 1}})
        self.assertEqual(value["metadata"], {"labels": {"a": "1"}})  # inputs are not modified


class SchemaTests(unittest.TestCase):
    def test_crd_root_declares_type_meta_and_object_meta(self):
        compiler = Compiler({"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": DEFS["Meta"]}.__getitem__)
        crd = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True}}}}}
        tr = typed.TypeRef(compiler.compile(crd_root(crd), False))
        typed.validate({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
                        "spec": {"embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                              "spec": {"anything": True}}}}, tr)
        with self.assertRaises(typed.ValidationErrors) as e:
            typed.validate({"metadata": {"nam": "x"}}, tr)
        self.assertEqual(str(e.exception), ".metadata.nam: field not declared in schema")

    def test_reconcile_granular_ownership_of_a_now_atomic_field(self):
        s = Set.of(("f:spec", "f:selector", "f:matchLabels", "f:a"), ("f:spec", "f:replicas"))
        got = typed.reconcile_with_schema(s, root())
        self.assertEqual([path_string(p) for p in got.paths()], [".spec.replicas", ".spec.selector"])
        self.assertIsNone(typed.reconcile_with_schema(Set.of(("f:spec", "f:replicas")), root()))

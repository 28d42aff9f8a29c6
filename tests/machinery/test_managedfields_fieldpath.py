"""Field paths and sets in upstream's FieldsV1 format (structured-merge-diff's fieldpath).

Expectations follow the format as structured-merge-diff documents and
serializes it: ``f:<field>``, ``k:<json of the list-map keys>``,
``v:<json value>``, ``i:<index>``, ``.`` for a node that is itself in the
set; keys ordered fields, keys, values, indices, each by value.
"""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery.managedfields import fieldpath
from kapiserver.machinery.managedfields.fieldpath import PathElementError, Set


def paths(s: Set) -> list[str]:
    return [fieldpath.path_string(p) for p in s.paths()]


class ElementTests(unittest.TestCase):
    def test_keys_are_sorted_and_go_encoded(self):
        self.assertEqual(fieldpath.key({"protocol": "TCP", "containerPort": 80}),
                         'k:{"containerPort":80,"protocol":"TCP"}')
        # Go's encoder escapes HTML characters
        self.assertEqual(fieldpath.value("a<b&c"), 'v:"a\\u003cb\\u0026c"')
        self.assertEqual(fieldpath.value(1.0), "v:1")
        self.assertEqual(fieldpath.value(True), "v:true")

    def test_client_sent_elements_are_canonicalized(self):
        self.assertEqual(fieldpath.canonical('k:{"protocol": "TCP", "containerPort": 80}'),
                         'k:{"containerPort":80,"protocol":"TCP"}')
        self.assertEqual(fieldpath.canonical("i:007"), "i:7")
        self.assertEqual(fieldpath.canonical("f:a b"), "f:a b")
        self.assertIsNone(fieldpath.canonical("x:whatever"))  # unknown kinds are skipped, as upstream
        for bad in ("f", "fx", 'k:{"a"', "i:x", "k:[1]"):
            self.assertRaises(PathElementError, fieldpath.canonical, bad)

    def test_path_strings_as_in_conflict_messages(self):
        self.assertEqual(fieldpath.path_string(("f:spec", "f:template", "f:spec", "f:containers",
                                                'k:{"name":"nginx"}', "f:image")),
                         '.spec.template.spec.containers[name="nginx"].image')
        self.assertEqual(fieldpath.path_string(("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}')),
                         '.spec.ports[port=80,protocol="TCP"]')
        self.assertEqual(fieldpath.path_string(("f:metadata", "f:finalizers", 'v:"a"')),
                         '.metadata.finalizers[="a"]')
        self.assertEqual(fieldpath.path_string(("f:x", "i:2")), ".x[2]")


class SerializationTests(unittest.TestCase):
    def test_documented_configmap_entry(self):
        """The fieldsV1 of the ConfigMap example of the server-side apply documentation."""
        s = Set.of(("f:metadata", "f:labels", "f:test-label"), ("f:data", "f:key"))
        self.assertEqual(s.to_fields(), {"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:test-label": {}}}})

    def test_member_with_children_gets_dot_first(self):
        s = Set.of(("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:app"),
                   ("f:spec", "f:containers", 'k:{"name":"c"}'), ("f:spec", "f:containers", 'k:{"name":"c"}',
                                                                   "f:image"))
        fields = s.to_fields()
        self.assertEqual(fields, {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                  "f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}}}})
        self.assertEqual(list(fields["f:metadata"]["f:labels"]), [".", "f:app"])

    def test_order_fields_keys_values_indices(self):
        s = Set.of(("i:1",), ("v:2",), ('v:"a"',), ("v:true",), ('k:{"a":"x"}',), ("f:b",), ("f:a",), ("i:0",),
                   ('k:{"a":1}',), ("v:null",))
        # numbers before strings before booleans before null; keys by value the same way
        self.assertEqual(list(s.to_fields()),
                         ["f:a", "f:b", 'k:{"a":1}', 'k:{"a":"x"}', "v:2", 'v:"a"', "v:true", "v:null", "i:0", "i:1"])

    def test_large_level_in_the_same_order(self):
        """A level of thousands of elements (sorted a slice at a time, so no single sort holds the
        GIL for long) serializes in the same order as a small one: fields, keys, values, each by value."""
        names = [f"E{i:05d}" for i in range(3 * fieldpath._SORT_SLICE + 7)]
        keys = ['k:{"name":"%s"}' % name for name in names]
        numbers = [f"v:{n}" for n in range(40)]
        elements = [*reversed(keys), "f:b", *numbers, "f:a", 'v:"z"']
        s = Set.of(*((e,) for e in elements))
        self.assertEqual(list(s.to_fields()), ["f:a", "f:b", *keys, *numbers, 'v:"z"'])
        self.assertEqual(paths(s)[:3], [".a", ".b", '[name="E00000"]'])

    def test_round_trip(self):
        fields = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:annotations": {"f:x": {}}},
                  "f:spec": {".": {}, "f:ports": {'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:port": {}}}}}
        s = Set.from_fields(fields)
        self.assertTrue(s.has(("f:spec",)))
        self.assertTrue(s.has(("f:metadata", "f:labels")))
        self.assertFalse(s.has(("f:metadata",)))
        self.assertFalse(s.has(("f:metadata", "f:annotations")))
        self.assertEqual(Set.from_fields(s.to_fields()), s)
        self.assertEqual(s.to_fields()["f:metadata"], {"f:annotations": {"f:x": {}}, "f:labels": {".": {}, "f:app": {}}})

    def test_parse_quirks(self):
        # an empty object is a member; a "." alone too; unknown element kinds are dropped
        s = Set.from_fields({"f:a": {}, "f:b": {".": {}}, "x:c": {"f:d": {}}})
        self.assertEqual(paths(s), [".a", ".b"])
        self.assertEqual(Set.from_fields({}).to_fields(), {})
        self.assertRaises(PathElementError, Set.from_fields, {"f:a": []})
        self.assertRaises(PathElementError, Set.from_fields, [])


class SetOperationTests(unittest.TestCase):
    def setUp(self):
        self.a = Set.of(("f:x",), ("f:y", "f:z"), ("f:y", "f:w"), ("f:m",), ("f:m", "f:n"))
        self.b = Set.of(("f:x",), ("f:y", "f:z"), ("f:m",))

    def test_union_intersection_difference(self):
        self.assertEqual(paths(self.a.union(Set.of(("f:q",)))), [".m", ".q", ".x", ".m.n", ".y.w", ".y.z"])
        self.assertEqual(paths(self.a.intersection(self.b)), [".m", ".x", ".y.z"])
        # a difference removes exact paths only: .m.n survives the removal of .m
        self.assertEqual(paths(self.a.difference(self.b)), [".m.n", ".y.w"])

    def test_recursive_difference_removes_below_members(self):
        self.assertEqual(paths(self.a.recursive_difference(self.b)), [".y.w"])

    def test_empty_and_has(self):
        self.assertTrue(Set().empty())
        self.assertFalse(self.a.empty())
        self.assertTrue(self.a.has(("f:y", "f:z")))
        self.assertFalse(self.a.has(("f:y",)))
        self.assertFalse(self.a.has(()))
        self.assertTrue(self.a.difference(self.a).empty())

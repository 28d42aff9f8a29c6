"""JSON patch (RFC 6902) with kube-apiserver's status codes and messages."""
import copy

from twisted.trial import unittest

from kapiserver.machinery.errors import StatusError
from kapiserver.machinery.jsonpatch import apply_json_patch

DOC = {"metadata": {"name": "a", "labels": {"app": "web", "a/b": "slash", "m~n": "tilde"}},
       "spec": {"items": ["x", "y"], "count": 1, "empty": None}}


class ApplyTests(unittest.TestCase):
    def apply(self, *ops):
        return apply_json_patch(DOC, list(ops))

    def test_add_replace_remove(self):
        out = self.apply({"op": "add", "path": "/metadata/labels/tier", "value": "fe"},
                         {"op": "replace", "path": "/spec/count", "value": 3},
                         {"op": "remove", "path": "/metadata/labels/app"})
        self.assertEqual(out["metadata"]["labels"], {"a/b": "slash", "m~n": "tilde", "tier": "fe"})
        self.assertEqual(out["spec"]["count"], 3)

    def test_pointer_escapes(self):
        out = self.apply({"op": "remove", "path": "/metadata/labels/a~1b"},
                         {"op": "replace", "path": "/metadata/labels/m~0n", "value": "T"})
        self.assertEqual(out["metadata"]["labels"], {"app": "web", "m~n": "T"})

    def test_array_positions(self):
        self.assertEqual(self.apply({"op": "add", "path": "/spec/items/-", "value": "z"})["spec"]["items"],
                         ["x", "y", "z"])
        self.assertEqual(self.apply({"op": "add", "path": "/spec/items/0", "value": "w"})["spec"]["items"],
                         ["w", "x", "y"])
        self.assertEqual(self.apply({"op": "add", "path": "/spec/items/2", "value": "z"})["spec"]["items"],
                         ["x", "y", "z"])
        self.assertEqual(self.apply({"op": "remove", "path": "/spec/items/-1"})["spec"]["items"], ["x"])

    def test_move_copy_test(self):
        out = self.apply({"op": "test", "path": "/spec/count", "value": 1},
                         {"op": "copy", "from": "/spec/items", "path": "/spec/copied"},
                         {"op": "move", "from": "/metadata/labels/app", "path": "/spec/app"})
        self.assertEqual(out["spec"]["copied"], ["x", "y"])
        self.assertEqual(out["spec"]["app"], "web")
        self.assertNotIn("app", out["metadata"]["labels"])

    def test_test_of_missing_key_against_null_passes(self):
        self.assertEqual(self.apply({"op": "test", "path": "/spec/missing", "value": None}), DOC)

    def test_missing_key_of_an_object_reads_as_null(self):
        # evanphx/json-patch v4, as kube-apiserver applies it: replace adds the key, copy copies a null
        self.assertEqual(self.apply({"op": "replace", "path": "/spec/new", "value": 2})["spec"]["new"], 2)
        out = self.apply({"op": "copy", "from": "/spec/missing", "path": "/metadata/labels/c"})
        self.assertEqual(out["metadata"]["labels"], {**DOC["metadata"]["labels"], "c": None})

    def test_inputs_untouched(self):
        doc, ops = copy.deepcopy(DOC), [{"op": "add", "path": "/spec/new", "value": {"a": []}},
                                        {"op": "add", "path": "/spec/new/a/-", "value": 1}]
        ops_before = copy.deepcopy(ops)
        out = apply_json_patch(doc, ops)
        self.assertEqual(out["spec"]["new"], {"a": [1]})
        self.assertEqual(doc, DOC)
        self.assertEqual(ops, ops_before)  # a retried patch applies the same ops again


class FailureTests(unittest.TestCase):
    def fails(self, op):
        with self.assertRaises(StatusError) as caught:
            apply_json_patch(DOC, [op])
        err = caught.exception
        self.assertEqual((err.code, err.reason), (422, "Invalid"))
        self.assertEqual(err.message, "the server rejected our request due to an error in our request")
        [cause] = err.details["causes"]
        self.assertEqual(cause["reason"], "UnexpectedServerResponse")
        return cause["message"]

    def test_messages(self):
        self.assertEqual(self.fails({"op": "test", "path": "/spec/count", "value": 2}),
                         "testing value /spec/count failed: test failed")
        self.assertEqual(self.fails({"op": "add", "path": "/nope/x", "value": 1}),
                         'add operation does not apply: doc is missing path: "/nope/x": missing value')
        self.assertEqual(self.fails({"op": "add", "path": "/spec/empty/x", "value": 1}),
                         'add operation does not apply: doc is missing path: "/spec/empty/x": missing value')
        self.assertEqual(self.fails({"op": "replace", "path": "/spec/items/7", "value": 1}),
                         "replace operation does not apply: doc is missing key: /spec/items/7: missing value")
        self.assertEqual(self.fails({"op": "remove", "path": "/metadata/labels/nope"}),
                         "error in remove for path: '/metadata/labels/nope': Unable to remove nonexistent key: "
                         "nope: missing value")
        self.assertEqual(self.fails({"op": "add", "path": "/spec/items/5", "value": 1}),
                         "error in add for path: '/spec/items/5': Unable to access invalid index: 5: invalid "
                         "index referenced")
        self.assertEqual(self.fails({"op": "move", "from": "/spec/nope", "path": "/spec/x"}),
                         "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value")
        self.assertEqual(self.fails({"op": "frob", "path": "/spec"}), "Unexpected kind: frob: unknown object type")
        self.assertEqual(self.fails({"op": "add", "value": 1}),
                         "add operation failed to decode path: missing value")
        # the whole document is addressable by replace alone, as upstream; without a value (where
        # kube-apiserver dereferences nil and drops the connection) the error it means
        self.assertEqual(self.fails({"op": "add", "path": "", "value": {}}),
                         'add operation does not apply: doc is missing path: "": missing value')
        self.assertEqual(self.fails({"op": "replace", "path": ""}), "replace operation value must be object or array")

    def test_malformed_patch_is_bad_request(self):
        for body, message in (({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
                              (["add"], "json: cannot unmarshal string into Go value of type "
                                        "jsonpatch.Operation")):
            with self.assertRaises(StatusError) as caught:
                apply_json_patch(DOC, body)
            self.assertEqual((caught.exception.code, caught.exception.message), (400, message))

    def test_too_many_operations(self):
        with self.assertRaises(StatusError) as caught:
            apply_json_patch({}, [{"op": "test", "path": "/a"}] * 10001)
        self.assertEqual(caught.exception.code, 413)
        self.assertEqual(caught.exception.message, "The allowed maximum operations in a JSON patch is 10000, got 10001")

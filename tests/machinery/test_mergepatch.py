"""JSON merge patch (RFC 7386), including the RFC's appendix examples."""
import copy

from twisted.trial import unittest

from kapiserver.machinery.mergepatch import apply_merge_patch

RFC_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


class MergePatchTests(unittest.TestCase):
    def test_rfc7386_examples(self):
        for doc, patch, want in RFC_CASES:
            self.assertEqual(apply_merge_patch(doc, patch), want, (doc, patch))

    def test_inputs_untouched_and_not_aliased(self):
        doc = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": [1]}}
        patch = {"metadata": {"labels": {"b": "2"}}, "data": {"k": "v"}}
        doc_copy, patch_copy = copy.deepcopy(doc), copy.deepcopy(patch)
        result = apply_merge_patch(doc, patch)
        self.assertEqual(result, {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": [1]},
                                  "data": {"k": "v"}})
        result["spec"]["x"].append(2)
        result["data"]["k"] = "changed"
        self.assertEqual(doc, doc_copy)
        self.assertEqual(patch, patch_copy)

"""JSONPath as used by CRD printer columns and scale subresource paths."""
from twisted.trial import unittest

from kapiserver.machinery.errors import StatusError
from kapiserver.machinery.jsonpath import JSONPathError, evaluate, set_path

OBJ = {
    "metadata": {"name": "x", "labels": {"app": "web", "app.kubernetes.io/name": "w"}},
    "spec": {"replicas": 3, "items": [{"name": "a", "n": 1}, {"name": "b", "n": 5}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]},
}


class EvaluateTests(unittest.TestCase):
    def test_fields_and_indices(self):
        self.assertEqual(evaluate(OBJ, ".spec.replicas"), [3])
        self.assertEqual(evaluate(OBJ, ".metadata.labels.app"), ["web"])
        self.assertEqual(evaluate(OBJ, ".spec.items[0].name"), ["a"])
        self.assertEqual(evaluate(OBJ, ".spec.items[-1].name"), ["b"])
        self.assertEqual(evaluate(OBJ, "{.spec.replicas}"), [3])
        self.assertEqual(evaluate(OBJ, "$.spec.replicas"), [3])
        self.assertEqual(evaluate(OBJ, ".metadata.labels['app.kubernetes.io/name']"), ["w"])

    def test_wildcards_and_slices(self):
        self.assertEqual(evaluate(OBJ, ".spec.items[*].name"), ["a", "b"])
        self.assertEqual(evaluate(OBJ, ".spec.items[0:1].name"), ["a"])

    def test_filters(self):
        self.assertEqual(evaluate(OBJ, '.status.conditions[?(@.type=="Ready")].status'), ["True"])
        self.assertEqual(evaluate(OBJ, ".status.conditions[?(@.type=='Synced')].status"), ["False"])
        self.assertEqual(evaluate(OBJ, ".spec.items[?(@.n > 2)].name"), ["b"])
        self.assertEqual(evaluate(OBJ, ".spec.items[?(@.missing)].name"), [])

    def test_missing_gives_nothing(self):
        self.assertEqual(evaluate(OBJ, ".status.replicas"), [])
        self.assertEqual(evaluate(OBJ, ".spec.items[7].name"), [])
        self.assertEqual(evaluate(OBJ, ".spec.replicas.deeper"), [])

    def test_invalid(self):
        for bad in ("spec", ".spec.items[", ".spec..x", ".a[x]", ""):
            self.assertRaises(JSONPathError, evaluate, OBJ, bad)


class SetPathTests(unittest.TestCase):
    def test_sets_and_creates(self):
        obj = {"spec": {"replicas": 1}}
        set_path(obj, ".spec.replicas", 4)
        set_path(obj, ".status.scale.replicas", 2)
        self.assertEqual(obj, {"spec": {"replicas": 4}, "status": {"scale": {"replicas": 2}}})

    def test_index(self):
        obj = {"spec": {"items": [{"n": 1}]}}
        set_path(obj, ".spec.items[0].n", 9)
        self.assertEqual(obj, {"spec": {"items": [{"n": 9}]}})

    def test_rejects_ambiguous_paths(self):
        with self.assertRaises(StatusError) as caught:
            set_path({}, ".spec.items[*].n", 1)
        self.assertEqual(caught.exception.code, 400)

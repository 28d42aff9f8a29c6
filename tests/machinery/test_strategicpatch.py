"""Strategic merge patch on Pod-shaped documents, with a small schema and the real one."""
import copy
import importlib.resources
import json

from twisted.trial import unittest

from kapiserver.machinery.errors import StatusError
from kapiserver.machinery.strategicpatch import apply_strategic_merge_patch


def merge_list(key, items):
    return {"type": "array", "items": items, "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-patch-merge-key": key}


SMALL_DEFS = {
    "Pod": {"properties": {"metadata": {"$ref": "#/definitions/Meta"}, "spec": {"$ref": "#/definitions/Spec"}}},
    "Meta": {"properties": {"finalizers": {"type": "array", "items": {"type": "string"},
                                           "x-kubernetes-patch-strategy": "merge"},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "Spec": {"properties": {
        "containers": merge_list("name", {"$ref": "#/definitions/Container"}),
        "volumes": dict(merge_list("name", {"$ref": "#/definitions/Volume"}),
                        **{"x-kubernetes-patch-strategy": "merge,retainKeys"}),
        "args": {"type": "array", "items": {"type": "string"}}}},
    "Container": {"properties": {
        "env": merge_list("name", {"type": "object"}),
        "ports": merge_list("containerPort", {"type": "object"})}},
    "Volume": {"properties": {"name": {"type": "string"}}},
}


def small_resolve(ref):
    return SMALL_DEFS[ref.rsplit("/", 1)[-1]]


POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "web", "tier": "fe"}, "finalizers": ["a.io/x", "a.io/y"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1",
             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
             "ports": [{"containerPort": 80}, {"containerPort": 443}]},
            {"name": "sidecar", "image": "side:1"}],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}],
        "args": ["a", "b"],
    },
}


class SmallSchemaTests(unittest.TestCase):
    schema = {"$ref": "#/definitions/Pod"}

    def patch(self, patch, original=POD):
        return apply_strategic_merge_patch(original, patch, self.schema, small_resolve)

    def test_nested_merge_by_key(self):
        out = self.patch({"spec": {"containers": [{"name": "app", "image": "app:2",
                                                   "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                                                   "ports": [{"containerPort": 8080}]}]}})
        app, sidecar = out["spec"]["containers"]
        self.assertEqual(app["image"], "app:2")
        self.assertEqual(app["env"], [{"name": "A", "value": "1"}, {"name": "B", "value": "20"},
                                      {"name": "C", "value": "3"}])
        self.assertEqual([p["containerPort"] for p in app["ports"]], [8080, 80, 443])
        self.assertEqual(sidecar, {"name": "sidecar", "image": "side:1"})

    def test_new_element_appended_and_server_only_kept_in_place(self):
        out = self.patch({"spec": {"containers": [{"name": "app", "image": "app:2"}, {"name": "new", "image": "n"}]}})
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["app", "new", "sidecar"])

    def test_primitive_list_union_and_replace(self):
        out = self.patch({"metadata": {"finalizers": ["a.io/y", "a.io/z"]}, "spec": {"args": ["c"]}})
        self.assertEqual(out["metadata"]["finalizers"], ["a.io/x", "a.io/y", "a.io/z"])
        self.assertEqual(out["spec"]["args"], ["c"])  # no strategy: replaced

    def test_null_deletes_and_maps_merge(self):
        out = self.patch({"metadata": {"labels": {"tier": None, "new": "1"}}, "spec": {"args": None}})
        self.assertEqual(out["metadata"]["labels"], {"app": "web", "new": "1"})
        self.assertNotIn("args", out["spec"])

    def test_delete_directive_on_element(self):
        out = self.patch({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}})
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["app"])

    def test_replace_directive_on_list_and_map(self):
        out = self.patch({"spec": {"containers": [{"name": "only", "image": "o"}, {"$patch": "replace"}]}})
        self.assertEqual(out["spec"]["containers"], [{"name": "only", "image": "o"}])
        out = self.patch({"metadata": {"labels": {"x": "1", "$patch": "replace"}}})
        self.assertEqual(out["metadata"]["labels"], {"x": "1"})
        out = self.patch({"metadata": {"labels": {"$patch": "delete"}}})
        self.assertEqual(out["metadata"]["labels"], {})

    def test_delete_from_primitive_list(self):
        out = self.patch({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x"]}})
        self.assertEqual(out["metadata"]["finalizers"], ["a.io/y"])

    def test_set_element_order(self):
        out = self.patch({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                                   "containers": [{"name": "app", "image": "app:3"}]}})
        self.assertEqual([(c["name"], c["image"]) for c in out["spec"]["containers"]],
                         [("sidecar", "side:1"), ("app", "app:3")])
        self.assertNotIn("$setElementOrder/containers", out["spec"])

    def test_retain_keys(self):
        out = self.patch({"spec": {"volumes": [{"name": "cfg", "$retainKeys": ["name", "secret"],
                                                "secret": {"secretName": "s"}}]}})
        self.assertEqual(out["spec"]["volumes"][1], {"name": "cfg", "secret": {"secretName": "s"}})

    def test_without_schema_maps_merge_and_lists_replace(self):
        out = apply_strategic_merge_patch(POD, {"metadata": {"labels": {"x": "1"}},
                                                "spec": {"containers": [{"name": "z"}]}}, None, None)
        self.assertEqual(out["metadata"]["labels"], {"app": "web", "tier": "fe", "x": "1"})
        self.assertEqual(out["spec"]["containers"], [{"name": "z"}])

    def test_inputs_untouched(self):
        pod, patch = copy.deepcopy(POD), {"spec": {"containers": [{"name": "app", "env": [{"name": "Z"}]}]}}
        patch_before = copy.deepcopy(patch)
        self.patch(patch, pod)
        self.assertEqual(pod, POD)
        self.assertEqual(patch, patch_before)

    def test_errors(self):
        # upstream answers the plain merge errors with a 500 of reason Unknown; they are the
        # client's patch, so here they are 422 (and an unknown $patch directive a 400)
        def status(patch, original=POD):
            with self.assertRaises(StatusError) as caught:
                self.patch(patch, original)
            return caught.exception.code, caught.exception.message
        self.assertEqual(status({"spec": {"containers": [{"image": "x"}]}}),
                         (422, "map: map[image:x] does not contain declared merge key: name"))
        self.assertEqual(status({"metadata": {"labels": {"$patch": "frob"}}}),
                         (400, "unknown patch type: frob in map: map[$patch:frob]"))
        self.assertEqual(status({"spec": {"containers": [{"name": "app", "$patch": "merge"}]}}),
                         (422, "merging lists cannot yet be specified in the patch"))
        self.assertEqual(status({"spec": {"volumes": [{"name": "a", "$retainKeys": "name"}]}}),
                         (400, "invalid patch format of retainKeys"))
        self.assertEqual(status({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
                         (400, "invalid patch format of primitive list"))
        self.assertEqual(status({"metadata": {"finalizers": [1]}}),
                         (422, "list element types are not identical: [[a.io/x a.io/y] [1]]"))
        self.assertEqual(status({"metadata": {"finalizers": [["a"]]}}, {"metadata": {"finalizers": [["b"]]}}),
                         (422, "the server rejected our request due to an error in our request"))

    def test_value_where_the_original_has_none_is_taken_as_it_is(self):
        # upstream's mergeMap: a key the original lacks (or holds in another shape) gets the patch's
        # value with its nulls dropped; merge keys and directives inside it are not looked at
        out = self.patch({"status": {"conditions": [{"message": "x", "reason": None}]}},
                         {"status": {"phase": "Active"}})
        self.assertEqual(out, {"status": {"phase": "Active", "conditions": [{"message": "x"}]}})
        # ... but directives are dropped from it (removeDirectives): a map with one, from its map or list
        out = self.patch({"spec": {"containers": [{"$patch": "delete", "name": "gone"}, {"name": "kept"}],
                                   "hostname": {"$patch": "bogus"}, "nodeSelector": {"a": {"$patch": "x"}}}},
                         {"metadata": {}})
        self.assertEqual(out["spec"], {"containers": [{"name": "kept"}], "nodeSelector": {}})
        out = self.patch({"spec": {"containers": [{"image": "x"}]}}, {"spec": {"containers": "not a list"}})
        self.assertEqual(out["spec"], {"containers": [{"image": "x"}]})


class RealSchemaTests(unittest.TestCase):
    """The same operations driven by the upstream definitions shipped in kubernetes-validate."""

    _defs: dict = {}

    def setUp(self):
        if not RealSchemaTests._defs:  # read the 1.37 definitions once for the whole class
            path = (importlib.resources.files("kubernetes_validate")
                    / "kubernetes-json-schema/v1.37.0-local/_definitions.json")
            RealSchemaTests._defs.update(json.loads(path.read_text())["$defs"])

    def patch(self, patch):
        return apply_strategic_merge_patch(POD, patch, {"$ref": "#/$defs/io.k8s.api.core.v1.Pod"},
                                           lambda ref: self._defs[ref.rsplit("/", 1)[-1]])

    def test_pod_lists_merge(self):
        out = self.patch({
            "metadata": {"finalizers": ["a.io/z"]},
            "spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": "10"}],
                                     "ports": [{"containerPort": 443, "name": "https"}]}],
                     "volumes": [{"name": "new", "emptyDir": {}}]}})
        app = out["spec"]["containers"][0]
        self.assertEqual(app["env"], [{"name": "A", "value": "10"}, {"name": "B", "value": "2"}])
        self.assertEqual(app["ports"], [{"containerPort": 80}, {"containerPort": 443, "name": "https"}])
        self.assertEqual(out["metadata"]["finalizers"], ["a.io/z", "a.io/x", "a.io/y"])
        self.assertEqual([v["name"] for v in out["spec"]["volumes"]], ["new", "data", "cfg"])
        self.assertEqual(out["spec"]["args"], ["a", "b"])

    def test_args_are_replaced(self):
        out = self.patch({"spec": {"containers": [{"name": "app", "args": ["x"]}], "args": ["only"]}})
        self.assertEqual(out["spec"]["containers"][0]["args"], ["x"])
        self.assertEqual(out["spec"]["args"], ["only"])

    def test_volume_retain_keys(self):
        out = self.patch({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"],
                                                "hostPath": {"path": "/d"}}]}})
        self.assertEqual(out["spec"]["volumes"][0], {"name": "data", "hostPath": {"path": "/d"}})

"""tools/gen_protobuf_tables.py's readers of generated.proto and types.go."""
from __future__ import annotations

import importlib.util
import os
import sys

from twisted.trial import unittest

from kapiserver.machinery import protobuf_tables, protobuf_types

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "gen_protobuf_tables.py")
_spec = importlib.util.spec_from_file_location("gen_protobuf_tables", _PATH)
gen = importlib.util.module_from_spec(_spec)
sys.modules["gen_protobuf_tables"] = gen  # dataclasses resolve annotations through it
_spec.loader.exec_module(gen)

PROTO = """
syntax = "proto2";
package k8s.io.api.demo.v2;

// A thing.
message ThingSpec {
  // Replicas (optional int32 in a comment must not count: optional int32 ghost = 9;)
  optional int32 replicas = 1;

  repeated string args = 2;

  map<string, .k8s.io.apimachinery.pkg.api.resource.Quantity> limits = 3;

  optional VolumeSource volumeSource = 4;
}
"""

GO = """
type ThingSpec struct {
	// comment `json:"nope"`
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,1,opt,name=replicas"`
	Args []string `json:"args" protobuf:"bytes,2,rep,name=args"`
	Limits ResourceList `json:"limits,omitempty" protobuf:"bytes,3,rep,name=limits,casttype=ResourceList"`
	VolumeSource `json:",inline" protobuf:"bytes,4,opt,name=volumeSource"`
	ThingCommon `json:",inline" protobuf:"bytes,5,req"`
}
"""


class GeneratorParserTests(unittest.TestCase):
    def test_proto_messages_and_fields(self):
        package, messages = gen.parse_proto(PROTO)
        self.assertEqual(package, "k8s.io.api.demo.v2")
        spec = messages["ThingSpec"]
        self.assertEqual(spec.package, "demo.v2")
        self.assertEqual([(f.name, f.number, f.type, f.repeated) for f in spec.fields if f.type != "map"],
                         [("replicas", 1, "int32", False), ("args", 2, "string", True),
                          ("volumeSource", 4, "VolumeSource", False)])
        (limits,) = [f for f in spec.fields if f.type == "map"]
        self.assertEqual((limits.name, limits.number, limits.map_value),
                         ("limits", 3, ".k8s.io.apimachinery.pkg.api.resource.Quantity"))

    def test_go_json_facts(self):
        fields = gen.parse_go(GO)["ThingSpec"]  # by protobuf field number
        self.assertEqual(fields[1], gen.GoField("replicas", True, True, False, False, order=0))
        self.assertEqual(fields[2], gen.GoField("args", False, False, False, False, order=1))
        self.assertTrue(fields[4].inline)
        self.assertTrue(fields[5].inline)  # embedded without name= in its tag
        self.assertEqual(gen._flags(fields[2], True), ["repeated", "!omitempty"])
        line = gen._line("args", 2, "STRING", gen._flags(fields[2], True))
        self.assertEqual(line, "args 2 string repeated !omitempty")
        self.assertEqual(protobuf_types.FieldTables({"demo.ThingSpec": line})["demo.ThingSpec"],
                         (protobuf_types.Field("args", 2, protobuf_types.STRING, repeated=True, omitempty=False),))
        self.assertEqual(gen._line("limits", 3, "MAP_MESSAGE", [], "demo.Limit"),
                         "limits 3 map<string,message> message=demo.Limit")

    def test_package_short_names(self):
        self.assertEqual(gen.short_package("k8s.io.api.autoscaling.v2"), "autoscaling.v2")
        self.assertEqual(gen.short_package("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1"),
                         "apiextensions")
        self.assertEqual(gen.short_package("k8s.io.apimachinery.pkg.runtime"), "runtime")
        self.assertEqual(gen.short_package("k8s.io.apimachinery.pkg.apis.meta.v1beta1"), "meta.v1beta1")

    def test_generated_tables_load_lazily_and_hand_written_tables_win(self):
        kinds = protobuf_tables.all_kinds()
        self.assertEqual(kinds[("apps", "v1", "Deployment")], "apps.Deployment")
        self.assertEqual(kinds[("", "v1", "ConfigMap")], "core.ConfigMap")
        self.assertIs(protobuf_tables.all_messages()["meta.ObjectMeta"], protobuf_types.MESSAGES["meta.ObjectMeta"])

    def test_every_generated_table_reads_and_names_only_known_messages(self):
        messages = protobuf_tables.all_messages()
        for name in list(messages):
            for f in messages[name]:
                self.assertIsInstance(f, protobuf_types.Field)
                if f.message:
                    self.assertIn(f.message, messages, f"{name}.{f.name}")
        self.assertEqual([f.name for f in messages["core.PodSpec"]][:3], ["volumes", "initContainers", "containers"])
        self.assertIsNone(messages.get("no.SuchMessage"))

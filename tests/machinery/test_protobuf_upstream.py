"""The codec against upstream's own bytes.

fixtures/protobuf_upstream.json holds objects of every kind of the
protobuf tables (and a watch-list stream) as kube-apiserver v1.32.13 answered
them, once as JSON and once as protobuf (tools/capture_protobuf_golden.py).
Decoding upstream's protobuf must give upstream's JSON, and encoding that
JSON must give upstream's bytes.
"""
from __future__ import annotations

import base64
import copy
import json
import os

from twisted.trial import unittest

from kapiserver.machinery import protobuf

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "protobuf_upstream.json")


def load_fixture() -> dict:
    with open(FIXTURE) as f:
        return json.load(f)


def without_upstream_only_json(obj: dict) -> dict:
    """Upstream's JSON less what its server adds outside the wire format.

    * ``creationTimestamp: null`` in nested (template) metadata: Go writes a
      zero Time as null; we leave it out of the JSON (omitzero), as clients
      sending JSON do;
    * apiVersion/kind of a StatefulSet's claim templates: upstream's defaulting
      sets them, protobuf has no field for them.
    """
    obj = copy.deepcopy(obj)

    def walk(node, top: bool) -> None:
        if isinstance(node, dict):
            md = node.get("metadata")
            if not top and isinstance(md, dict) and md.get("creationTimestamp", "") is None:
                del md["creationTimestamp"]
            for claim in (node.get("volumeClaimTemplates") or []) if isinstance(node, dict) else []:
                claim.pop("apiVersion", None)
                claim.pop("kind", None)
            for value in node.values():
                walk(value, False)
        elif isinstance(node, list):
            for value in node:
                walk(value, False)

    walk(obj, True)
    return obj


class UpstreamBytesTests(unittest.TestCase):
    def setUp(self):
        self.fixture = load_fixture()

    def test_fixture_is_from_the_emulated_version(self):
        from kapiserver import kube_version
        self.assertEqual(self.fixture["server"], f"v{kube_version.MAJOR}.{kube_version.MINOR}.{kube_version.PATCH}")
        kinds = {o["json"]["kind"] for o in self.fixture["objects"]}
        for kind in ("CustomResourceDefinition", "ControllerRevision", "APIService", "ValidatingAdmissionPolicy",
                     "MutatingWebhookConfiguration", "FlowSchema", "PriorityLevelConfiguration",
                     "CertificateSigningRequest", "RuntimeClass", "CSINode", "CSIStorageCapacity",
                     "VolumeAttachment", "Pod", "Scale", "ConfigMapList"):
            self.assertIn(kind, kinds)

    def test_decoding_upstream_bytes_gives_upstream_json(self):
        for case in self.fixture["objects"]:
            with self.subTest(path=case["path"]):
                decoded = protobuf.decode_object(base64.b64decode(case["protobuf"]))
                self.assertEqual(decoded.unknown_fields, [])
                self.assertEqual(decoded.obj, without_upstream_only_json(case["json"]))

    def test_encoding_upstream_json_gives_upstream_bytes(self):
        for case in self.fixture["objects"]:
            with self.subTest(path=case["path"]):
                upstream = base64.b64decode(case["protobuf"])
                ours = protobuf.encode_object(case["json"])
                if case["json"]["kind"] == "ControllerRevision":
                    # a RawExtension keeps the client's JSON text; ours is re-serialized (same value)
                    self.assertEqual(protobuf.decode_object(ours).obj, protobuf.decode_object(upstream).obj)
                    continue
                self.assertEqual(ours, upstream)

    def test_crd_schema_fields_on_the_wire(self):
        (crd,) = [c for c in self.fixture["objects"] if c["json"]["kind"] == "CustomResourceDefinition"]
        schema = protobuf.decode_object(base64.b64decode(crd["protobuf"])).obj[
            "spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        spec = schema["properties"]["spec"]
        self.assertEqual(spec["properties"]["size"]["default"], 3)  # JSON messages holding raw JSON
        self.assertEqual(spec["properties"]["color"]["enum"], ["red", "green", None])
        self.assertEqual(spec["properties"]["ratio"]["multipleOf"], 0.25)  # doubles
        self.assertEqual(spec["properties"]["tags"]["items"], {"type": "string"})  # JSONSchemaPropsOrArray
        self.assertEqual(spec["properties"]["labels"]["additionalProperties"], {"type": "string"})  # ...OrBool
        self.assertEqual(spec["x-kubernetes-validations"], [{"rule": "self.size <= 100", "message": "too big"}])

    def test_watch_list_stream(self):
        watch = self.fixture["watch"]
        self.assertEqual(watch["content_type"], protobuf.WATCH_MEDIA_TYPE)
        stream = base64.b64decode(watch["stream"])
        frames, rest = protobuf.split_watch_frames(stream)
        self.assertEqual(rest, b"")
        events = [protobuf.decode_watch_event(f) for f in frames]
        self.assertEqual([e[0] for e in events], ["ADDED"] * len(watch["objects"]) + ["BOOKMARK"])
        for (_, env, obj), expected, frame in zip(events, watch["objects"], frames):
            expected = {"kind": "ConfigMap", "apiVersion": "v1", **expected}
            self.assertEqual((env.api_version, env.kind), ("v1", "ConfigMap"))
            self.assertEqual(obj, expected)
            # our frame of the same object is upstream's, byte for byte
            self.assertEqual(protobuf.encode_watch_frame("ADDED", protobuf.encode_object(expected)),
                             len(frame).to_bytes(4, "big") + frame)
        _, _, bookmark = events[-1]
        annotations = bookmark["metadata"]["annotations"]
        self.assertEqual(annotations["k8s.io/initial-events-end"], "true")
        blueprint = protobuf.decode_object(base64.b64decode(annotations["kubernetes.io/initial-events-list-blueprint"]))
        self.assertEqual(blueprint.obj, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": None})
        self.assertEqual(protobuf.encode_watch_frame("BOOKMARK", protobuf.encode_object(bookmark)),
                         stream[-len(frames[-1]) - 4:])

"""The Kubernetes protobuf wire format: golden bytes written by hand from the
field numbers of k8s.io/api and k8s.io/apimachinery, round trips, and the
answers a client sees when it POSTs protobuf bodies."""
from __future__ import annotations

import base64
import time

from twisted.internet import reactor, task
from twisted.trial import unittest

from kapiserver.machinery import protobuf, protobuf_types
from kapiserver.machinery.protobuf import ProtobufError
from kapiserver.testing.cases import ServerTestCase, run


def h(text: str) -> bytes:
    """Hex digits (spaces and line breaks ignored) as bytes."""
    return bytes.fromhex("".join(text.split()))


def envelope(api_version: bytes, kind: bytes, raw: bytes) -> bytes:
    """The runtime.Unknown envelope, assembled by hand (short fields only)."""
    type_meta = b"\x0a" + bytes([len(api_version)]) + api_version + b"\x12" + bytes([len(kind)]) + kind
    assert len(raw) < 128, "one-byte lengths only"
    out = b"k8s\x00" + b"\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12" + bytes([len(raw)]) + raw
    return out + b"\x1a\x00\x22\x00"


# ObjectMeta as Go writes it: every non-pointer field, empty ones included.
# 0a name | 12 generateName | 1a namespace | 22 selfLink | 2a uid | 32 resourceVersion
# | 38 generation (varint) | 42 creationTimestamp (empty = zero time) | 5a labels entries
META_DEMO = h("0a 04 64656d6f 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00")

# Namespace{metadata, spec{} (12 00), status{phase ""} (1a 02 0a 00)}
NAMESPACE_RAW = b"\x0a" + bytes([len(META_DEMO)]) + META_DEMO + h("12 00 1a 02 0a 00")
NAMESPACE_BODY = envelope(b"v1", b"Namespace", NAMESPACE_RAW)

# ConfigMap c in ns "web-ns" with label app=web and data a=b
META_CM = h("0a 01 63 12 00 1a 06 7765622d6e73 22 00 2a 00 32 00 38 00 42 00"
            "5a 0a 0a 03 617070 12 03 776562")
CONFIGMAP_RAW = b"\x0a" + bytes([len(META_CM)]) + META_CM + h("12 06 0a 01 61 12 01 62")
CONFIGMAP_BODY = envelope(b"v1", b"ConfigMap", CONFIGMAP_RAW)

# Secret s created at 2023-11-14T22:13:20Z (1700000000 = varint 80 e2 cf aa 06),
# data bin = 00 ff 10, type Opaque
META_SECRET = h("0a 01 73 12 00 1a 00 22 00 2a 00 32 00 38 00 42 08 08 80e2cfaa06 10 00")
SECRET_RAW = (b"\x0a" + bytes([len(META_SECRET)]) + META_SECRET
              + h("12 0a 0a 03 62696e 12 03 00ff10") + h("1a 06 4f7061717565"))
SECRET_BODY = envelope(b"v1", b"Secret", SECRET_RAW)


class GoldenBytesTests(unittest.TestCase):
    def test_namespace_decodes_to_kubectl_json(self):
        got = protobuf.decode_object(NAMESPACE_BODY)
        self.assertEqual(got.obj, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "demo"},
                                   "spec": {}, "status": {}})
        self.assertEqual(got.unknown_fields, [])

    def test_namespace_encodes_to_go_bytes(self):
        obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "demo"}, "spec": {}, "status": {}}
        self.assertEqual(protobuf.encode_object(obj), NAMESPACE_BODY)

    def test_configmap_with_labels(self):
        want = {"kind": "ConfigMap", "apiVersion": "v1",
                "metadata": {"name": "c", "namespace": "web-ns", "labels": {"app": "web"}},
                "data": {"a": "b"}}
        self.assertEqual(protobuf.decode_object(CONFIGMAP_BODY).obj, want)
        self.assertEqual(protobuf.encode_object(want), CONFIGMAP_BODY)

    def test_secret_binary_data_and_time(self):
        want = {"kind": "Secret", "apiVersion": "v1",
                "metadata": {"name": "s", "creationTimestamp": "2023-11-14T22:13:20Z"},
                "data": {"bin": base64.b64encode(b"\x00\xff\x10").decode()}, "type": "Opaque"}
        self.assertEqual(protobuf.decode_object(SECRET_BODY).obj, want)
        # Time is written as {seconds, nanos=0}
        encoded = protobuf.encode_object(want)
        self.assertIn(h("42 08 08 80e2cfaa06 10 00"), encoded)
        self.assertEqual(protobuf.decode_object(encoded).obj, want)

    def test_unknown_field_numbers_are_skipped_and_reported(self):
        meta = META_DEMO + h("f8 06 01")  # field 111, varint 1
        raw = b"\x0a" + bytes([len(meta)]) + meta + h("12 00 1a 00") + h("a2 06 01 78")  # field 100, bytes
        got = protobuf.decode_object(envelope(b"v1", b"Namespace", raw))
        self.assertEqual(got.obj["metadata"], {"name": "demo"})
        self.assertEqual(sorted(got.unknown_fields), ["#100", "metadata.#111"])


class RoundTripTests(unittest.TestCase):
    def round_trip(self, obj: dict) -> dict:
        return protobuf.decode_object(protobuf.encode_object(obj)).obj

    def test_pod_with_inlined_volume_source_resources_and_probe(self):
        # generated tables: VolumeSource and ProbeHandler are inlined in the JSON,
        # resources are maps of quantities, pointers stay absent when unset
        pod = {"kind": "Pod", "apiVersion": "v1",
               "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
               "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "args": ["-g", "daemon off;"],
                                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                                        "readinessProbe": {"httpGet": {"path": "/", "port": "http"},
                                                           "periodSeconds": 5},
                                        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}],
                        "volumes": [{"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}}],
                        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30},
               "status": {"phase": "Pending"}}
        got = self.round_trip(pod)
        container = got["spec"]["containers"][0]
        self.assertEqual(container["resources"], {"limits": {"cpu": "500m", "memory": "128Mi"}})
        self.assertEqual(container["readinessProbe"]["httpGet"], {"path": "/", "port": "http"})
        self.assertEqual(container["readinessProbe"]["periodSeconds"], 5)
        self.assertEqual(got["spec"]["volumes"], [{"name": "cfg", "configMap": {"name": "settings",
                                                                               "defaultMode": 420}}])
        self.assertEqual(got["spec"]["terminationGracePeriodSeconds"], 30)
        self.assertNotIn("activeDeadlineSeconds", got["spec"])
        self.assertEqual(got["status"]["phase"], "Pending")

    def test_long_nested_messages_and_null_fields(self):
        # a nested message's length is written after the message: lengths of one, two and three bytes
        pod = {"kind": "Pod", "apiVersion": "v1",
               "metadata": {"name": "p", "annotations": {"a": "x" * 300, "b": "y" * 20000}},
               "spec": {"containers": [{"name": "c", "image": "i", "args": ["z" * 200]}]}}
        self.assertEqual(self.round_trip(pod), {**pod, "spec": {**pod["spec"], "containers": [
            {**pod["spec"]["containers"][0], "resources": {}}]}, "status": {}})
        # a null field is written as absent, as Go's decoding of the JSON leaves it
        with_nulls = {**pod, "spec": {"hostname": None, "containers": [
            {**pod["spec"]["containers"][0], "workingDir": None, "livenessProbe": None, "ports": None}]}}
        self.assertEqual(protobuf.encode_object(with_nulls), protobuf.encode_object(pod))

    def test_pods_sharing_template_parts_keep_their_own_values(self):
        # probes, ports, tolerations and volume sources are encoded once per JSON and then recalled:
        # a recalled part must be the one of equal JSON, never of a value that only prints alike
        def pod(port, grace, toleration_seconds, optional):
            probe = {"httpGet": {"path": "/healthz", "port": port}, "periodSeconds": 10}
            return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "i", "livenessProbe": probe,
                                             "ports": [{"containerPort": 8080, "name": "http"}]}],
                             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                              "tolerationSeconds": toleration_seconds}],
                             "volumes": [{"name": "v", "configMap": {"name": "cm", "optional": optional}}],
                             "terminationGracePeriodSeconds": grace}}
        variants = [pod(8080, 30, 300, True), pod("8080", 30, 300, True), pod(8080, 30, 301, False),
                    pod("http", 31, 300, True), pod(8080, 30, 300, True)]
        got = [self.round_trip(p)["spec"] for p in variants]
        self.assertEqual([g["containers"][0]["livenessProbe"]["httpGet"]["port"] for g in got],
                         [8080, "8080", 8080, "http", 8080])
        self.assertEqual([g["tolerations"][0]["tolerationSeconds"] for g in got], [300, 300, 301, 300, 300])
        self.assertEqual([g["volumes"][0]["configMap"]["optional"] for g in got], [True, True, False, True, True])
        self.assertEqual(protobuf.encode_object(variants[0]), protobuf.encode_object(variants[4]))
        # a part too large to keep, and one whose JSON cannot be written (a key that is no string),
        # are encoded afresh each time
        big = pod(8080, 30, 300, True)
        big["spec"]["volumes"][0]["configMap"]["items"] = [{"key": f"k{i}", "path": "p" * 40} for i in range(60)]
        self.assertEqual(len(self.round_trip(big)["spec"]["volumes"][0]["configMap"]["items"]), 60)
        odd = pod(8080, 30, 300, True)
        odd["spec"]["tolerations"][0][1] = "not a field"
        self.assertEqual(self.round_trip(odd)["spec"]["tolerations"], got[0]["tolerations"])

    def test_deployment_and_user_extra(self):
        deployment = {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web"},
                      "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                               "strategy": {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                               "template": {"metadata": {"labels": {"app": "web"}},
                                            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
        got = self.round_trip(deployment)
        self.assertEqual(got["spec"]["replicas"], 0)  # a pointer: explicit zero survives
        self.assertEqual(got["spec"]["strategy"], deployment["spec"]["strategy"])
        self.assertEqual(got["spec"]["template"]["spec"]["containers"], [{"name": "c", "image": "nginx",
                                                                           "resources": {}}])
        review = {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {},
                  "status": {"userInfo": {"username": "bob", "groups": ["dev"], "extra": {"scopes": ["a", "b"]}}}}
        self.assertEqual(self.round_trip(review)["status"]["userInfo"]["extra"], {"scopes": ["a", "b"]})

    def test_lease_micro_time_and_pointers(self):
        lease = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                 "metadata": {"name": "leader", "namespace": "kube-system", "resourceVersion": "42",
                              "uid": "0b0f5c52-3c2c-4d55-9b7e-6f1cb0a3a2d1", "generation": 3},
                 "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 15,
                          "acquireTime": "2024-02-29T23:59:59.000001Z",
                          "renewTime": "2024-03-01T00:00:00.123456Z", "leaseTransitions": 0}}
        self.assertEqual(self.round_trip(lease), lease)

    def test_micro_time_drops_sub_microseconds_and_time_drops_fraction(self):
        event = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": {"name": "e",
                 "creationTimestamp": "2024-01-02T03:04:05.999Z"},
                 "eventTime": "2024-01-02T03:04:05.1234567Z", "reportingController": "kubelet",
                 "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "type": "Normal"}
        got = self.round_trip(event)
        self.assertEqual(got["eventTime"], "2024-01-02T03:04:05.123456Z")
        self.assertEqual(got["metadata"]["creationTimestamp"], "2024-01-02T03:04:05Z")
        # non-pointer structs and zero times appear as Go's JSON writes them
        self.assertEqual(got["deprecatedSource"], {})
        self.assertIsNone(got["deprecatedFirstTimestamp"])

    def test_core_event_matches_go_json_shape(self):
        event = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "x.1", "namespace": "d"},
                 "involvedObject": {"kind": "Pod", "namespace": "d", "name": "x"}, "reason": "Started",
                 "count": 2, "lastTimestamp": "2024-05-05T05:05:05Z",
                 "series": {"count": 2, "lastObservedTime": "2024-05-05T05:05:05.500000Z"}}
        got = self.round_trip(event)
        self.assertEqual(got, {**event, "source": {}, "firstTimestamp": None, "eventTime": None,
                               "reportingComponent": "", "reportingInstance": ""})

    def test_negative_int64_and_false_pointer_survive(self):
        cm = {"kind": "ConfigMap", "apiVersion": "v1",
              "metadata": {"name": "c", "deletionGracePeriodSeconds": -1, "finalizers": ["a/b", "c/d"],
                           "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                                                "controller": False}]},
              "immutable": False, "binaryData": {"z": "AAEC", "a": ""}}
        self.assertEqual(self.round_trip(cm), cm)

    def test_managed_fields_keep_fields_v1_json(self):
        sa = {"kind": "ServiceAccount", "apiVersion": "v1",
              "metadata": {"name": "robot", "managedFields": [{
                  "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                  "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                  "fieldsV1": {"f:secrets": {".": {}, 'k:{"name":"x"}': {}}}}]},
              "secrets": [{"name": "x"}], "imagePullSecrets": [{"name": "reg"}],
              "automountServiceAccountToken": True}
        self.assertEqual(self.round_trip(sa), sa)

    def test_delete_options_in_any_group_version(self):
        opts = {"kind": "DeleteOptions", "apiVersion": "apps/v1", "gracePeriodSeconds": 0,
                "preconditions": {"uid": "abc"}, "propagationPolicy": "Foreground", "dryRun": ["All"]}
        self.assertEqual(self.round_trip(opts), opts)

    def test_scale_and_status(self):
        scale = {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "web"},
                 "spec": {}, "status": {"replicas": 0}}
        self.assertEqual(self.round_trip(scale), scale)
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": 'configmaps "x" not found', "reason": "NotFound",
                  "details": {"name": "x", "kind": "configmaps", "causes": [{"reason": "FieldValueInvalid",
                                                                             "field": "data"}]},
                  "code": 404}
        self.assertEqual(self.round_trip(status), status)

    def test_label_selector_and_int_or_string_quantity(self):
        fields = (protobuf_types.Field("selector", 1, protobuf_types.MESSAGE, message="meta.LabelSelector",
                                       pointer=True),
                  protobuf_types.Field("port", 2, protobuf_types.INT_OR_STRING),
                  protobuf_types.Field("target", 3, protobuf_types.INT_OR_STRING),
                  protobuf_types.Field("memory", 4, protobuf_types.QUANTITY))
        protobuf_types.MESSAGES["test.Probe"] = fields
        self.addCleanup(protobuf_types.MESSAGES.pop, "test.Probe")
        obj = {"selector": {"matchLabels": {"app": "x"},
                            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                                 {"key": "gone", "operator": "DoesNotExist"}]},
               "port": "http", "target": 8080, "memory": "128Mi"}
        raw = protobuf.encode_message("test.Probe", obj)
        self.assertEqual(protobuf.decode_message("test.Probe", raw, "", []), obj)


class MalformedTests(unittest.TestCase):
    def test_missing_magic(self):
        self.assertRaises(ProtobufError, protobuf.decode_object, b'{"kind":"Namespace"}')

    def test_truncated_body(self):
        self.assertRaises(ProtobufError, protobuf.decode_object, NAMESPACE_BODY[:-9])

    def test_unregistered_kind(self):
        body = envelope(b"apps/v1", b"Gizmo", b"")
        self.assertRaises(LookupError, protobuf.decode_object, body)

    def test_raw_extension_must_hold_json(self):
        # ControllerRevision{data: RawExtension{raw: "{"}}: 12 03 (data) 0a 01 7b (raw)
        body = envelope(b"apps/v1", b"ControllerRevision", h("12 03 0a 01 7b"))
        self.assertRaises(ProtobufError, protobuf.decode_object, body)


PB = "application/vnd.kubernetes.protobuf"


class ProtobufRequestTests(ServerTestCase):
    """POSTs with protobuf bodies through the real resource tree."""

    @run
    async def test_create_namespace_and_configmap(self):
        r = await self.client.post("/api/v1/namespaces", raw=NAMESPACE_BODY, content_type=PB)
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.body["metadata"]["name"], "demo")
        self.assertEqual(r.body["status"]["phase"], "Active")
        cm = protobuf.encode_object({"kind": "ConfigMap", "apiVersion": "v1",
                                     "metadata": {"name": "c", "labels": {"app": "web"}}, "data": {"a": "b"}})
        r = await self.client.post("/api/v1/namespaces/demo/configmaps", raw=cm, content_type=PB)
        self.assertEqual(r.code, 201, r.raw)
        got = await self.client.get("/api/v1/namespaces/demo/configmaps/c")
        self.assertEqual(got.body["data"], {"a": "b"})
        self.assertEqual(got.body["metadata"]["labels"], {"app": "web"})

    @run
    async def test_update_with_protobuf_and_unknown_field_warning(self):
        r = await self.client.post("/api/v1/namespaces/default/secrets", raw=SECRET_BODY, content_type=PB)
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.body["data"], {"bin": "AP8Q"})
        current = r.body
        current["data"] = {"bin": "AQI="}
        raw = protobuf.encode_object(current)
        # append field 99 (varint) to the Secret message: an unknown field
        env = protobuf.unwrap(raw)
        body = protobuf.wrap(env.api_version, env.kind, env.raw + h("98 06 01"))
        r = await self.client.put("/api/v1/namespaces/default/secrets/s", raw=body, content_type=PB)
        self.assertEqual(r.code, 200, r.raw)
        self.assertEqual(r.body["data"], {"bin": "AQI="})
        self.assertEqual(r.header("warning"), '299 - "unknown field \\"#99\\""')
        r = await self.client.put("/api/v1/namespaces/default/secrets/s?fieldValidation=Strict", raw=body,
                                  content_type=PB)
        self.assertEqual(r.code, 400, r.raw)
        self.assertIn('unknown field "#99"', r.body["message"])

    @run
    async def test_unregistered_kind_is_400(self):
        body = envelope(b"apps/v1", b"Gizmo", b"")
        r = await self.client.post("/apis/apps/v1/namespaces/default/controllerrevisions", raw=body, content_type=PB)
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["reason"], "BadRequest")
        self.assertEqual(r.body["message"], 'Gizmo in version "v1" cannot be handled as a ControllerRevision: '
                                            'no kind "Gizmo" is registered for version "apps/v1"')

    @run
    async def test_controller_revision_data_is_the_raw_json(self):
        # ControllerRevision{metadata{name "rev"}, data{raw '{"a":[1,true]}'}, revision 2}, by hand
        raw = b'{"a":[1,true]}'
        data = h("0a") + bytes([len(raw)]) + raw
        msg = h("0a 05 0a 03 726576") + h("12") + bytes([len(data)]) + data + h("18 02")
        body = envelope(b"apps/v1", b"ControllerRevision", msg)
        r = await self.client.post("/apis/apps/v1/namespaces/default/controllerrevisions", raw=body, content_type=PB,
                                   headers={"Accept": PB})
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.header("content-type"), PB)
        created = protobuf.decode_object(r.raw).obj
        self.assertEqual((created["data"], created["revision"]), ({"a": [1, True]}, 2))
        got = await self.client.get("/apis/apps/v1/namespaces/default/controllerrevisions/rev")
        self.assertEqual(got.body["data"], {"a": [1, True]})
        # the answer holds the data's JSON bytes in the RawExtension, as upstream does
        self.assertIn(h("12") + bytes([len(data)]) + data, protobuf.unwrap(r.raw).raw)

    @run
    async def test_custom_resources_never_take_protobuf(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "kind": "Widget", "singular": "widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        r = await self.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        self.assertEqual(r.code, 201, r.raw)
        url = "/apis/example.com/v1/namespaces/default/widgets"
        body = envelope(b"example.com/v1", b"Widget", h("0a 03 0a 01 77"))
        deadline = time.monotonic() + 10
        while True:
            r = await self.client.post(url, raw=body, content_type=PB)
            if r.code != 404 or time.monotonic() > deadline:
                break
            await task.deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(r.code, 415, r.raw)
        self.assertEqual(r.body["reason"], "UnsupportedMediaType")
        self.assertEqual(r.body["message"], "the body of the request was in an unknown format - accepted media "
                                            "types include: application/json, application/yaml")
        r = await self.client.post(url, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
        self.assertEqual(r.code, 201, r.raw)
        # answers: JSON where protobuf comes first; protobuf alone is not acceptable (upstream's message),
        # while errors follow the first media type, as upstream's
        r = await self.client.get(url + "/w", headers={"Accept": f"{PB}, application/json"})
        self.assertEqual((r.code, r.header("content-type"), r.body["metadata"]["name"]), (200, "application/json", "w"))
        r = await self.client.get(url + "/w", headers={"Accept": PB})
        self.assertEqual(r.code, 406, r.raw)
        self.assertEqual(r.body["message"], "only the following media types are accepted: application/json, "
                                            "application/yaml, application/vnd.kubernetes.protobuf")
        r = await self.client.get(url + "/missing", headers={"Accept": f"{PB}, application/json"})
        self.assertEqual((r.code, r.header("content-type")), (404, PB))
        self.assertEqual(protobuf.decode_object(r.raw).obj["message"], 'widgets.example.com "missing" not found')
        # metadata-only answers are protobuf for custom resources too
        r = await self.client.get(url, headers={
            "Accept": f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"})
        self.assertEqual((r.code, r.header("content-type")), (200, PB))
        listed = protobuf.decode_object(r.raw).obj
        self.assertEqual(listed["kind"], "PartialObjectMetadataList")
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["w"])

    @run
    async def test_garbage_is_400(self):
        r = await self.client.post("/api/v1/namespaces", raw=b"k8s\x00\x0a\xff", content_type=PB)
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["reason"], "BadRequest")

    @run
    async def test_mismatched_kind_is_rejected_like_json(self):
        r = await self.client.post("/api/v1/namespaces/default/configmaps", raw=SECRET_BODY, content_type=PB)
        self.assertEqual(r.code, 400, r.raw)

    @run
    async def test_delete_with_protobuf_delete_options(self):
        r = await self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone"}})
        self.assertEqual(r.code, 201, r.raw)
        opts = protobuf.encode_object({"kind": "DeleteOptions", "apiVersion": "v1",
                                       "preconditions": {"uid": "not-the-uid"}})
        r = await self.client.delete("/api/v1/namespaces/default/configmaps/gone", raw=opts, content_type=PB)
        self.assertEqual(r.code, 409, r.raw)
        opts = protobuf.encode_object({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        r = await self.client.delete("/api/v1/namespaces/default/configmaps/gone", raw=opts, content_type=PB)
        self.assertEqual(r.code, 200, r.raw)
        self.assertEqual(r.body["status"], "Success")

    @run
    async def test_protobuf_answers_when_listed_first(self):
        accept = {"Accept": "application/vnd.kubernetes.protobuf,application/json"}
        body = protobuf.encode_object({"kind": "ConfigMap", "apiVersion": "v1",
                                       "metadata": {"name": "c", "labels": {"app": "web"}}, "data": {"a": "b"}})
        r = await self.client.post("/api/v1/namespaces/default/configmaps", raw=body, content_type=PB,
                                   headers=accept)
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.header("content-type"), PB)
        created = protobuf.decode_object(r.raw).obj
        as_json = await self.client.get("/api/v1/namespaces/default/configmaps/c")
        self.assertEqual(created, as_json.body)
        got = await self.client.get("/api/v1/namespaces/default/configmaps/c", headers=accept)
        self.assertEqual(protobuf.decode_object(got.raw).obj, as_json.body)
        listed = await self.client.get("/api/v1/namespaces/default/configmaps", headers=accept)
        self.assertEqual(listed.header("content-type"), PB)
        items = protobuf.decode_object(listed.raw).obj
        self.assertEqual(items["kind"], "ConfigMapList")
        self.assertIn("c", [i["metadata"]["name"] for i in items["items"]])
        self.assertTrue(items["metadata"]["resourceVersion"])

    @run
    async def test_json_when_listed_first_and_errors_follow_the_first_type(self):
        r = await self.client.get("/api/v1/namespaces/default/configmaps",
                                  headers={"Accept": "application/json,application/vnd.kubernetes.protobuf"})
        self.assertEqual(r.header("content-type"), "application/json")
        # upstream encodes error Statuses like objects: protobuf when it comes first
        r = await self.client.get("/api/v1/namespaces/default/configmaps/missing",
                                  headers={"Accept": "application/vnd.kubernetes.protobuf,application/json"})
        self.assertEqual(r.code, 404)
        self.assertEqual(r.header("content-type"), PB)
        status = protobuf.decode_object(r.raw).obj
        self.assertEqual((status["kind"], status["reason"], status["code"]), ("Status", "NotFound", 404))
        self.assertEqual(status["details"], {"name": "missing", "kind": "configmaps"})
        r = await self.client.get("/api/v1/namespaces/default/configmaps/missing",
                                  headers={"Accept": "application/json,application/vnd.kubernetes.protobuf"})
        self.assertEqual((r.code, r.header("content-type"), r.body["reason"]), (404, "application/json", "NotFound"))

    @run
    async def test_delete_answers_a_protobuf_status(self):
        r = await self.client.post("/api/v1/namespaces/default/configmaps",
                                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bye"}})
        self.assertEqual(r.code, 201, r.raw)
        r = await self.client.delete("/api/v1/namespaces/default/configmaps/bye", headers={"Accept": PB})
        self.assertEqual((r.code, r.header("content-type")), (200, PB))
        status = protobuf.decode_object(r.raw).obj
        self.assertEqual((status["kind"], status["status"], status["details"]["name"]), ("Status", "Success", "bye"))

    @run
    async def test_partial_object_metadata_as_protobuf(self):
        await self.client.post("/api/v1/namespaces/default/configmaps",
                               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "meta", "labels": {"a": "b"}},
                                "data": {"secret": "not in metadata"}})
        r = await self.client.get("/api/v1/namespaces/default/configmaps/meta", headers={
            "Accept": f"{PB};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"})
        self.assertEqual((r.code, r.header("content-type")), (200, PB))
        env = protobuf.unwrap(r.raw)
        self.assertEqual((env.api_version, env.kind), ("meta.k8s.io/v1", "PartialObjectMetadata"))
        got = protobuf.decode_object(r.raw).obj
        self.assertEqual(got["metadata"]["labels"], {"a": "b"})
        self.assertNotIn(b"not in metadata", r.raw)
        # v1beta1's list has other field numbers than v1's (items 1, metadata 2)
        r = await self.client.get("/api/v1/namespaces/default/configmaps", headers={
            "Accept": f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1,application/json"})
        self.assertEqual((r.code, r.header("content-type")), (200, PB))
        listed = protobuf.decode_object(r.raw).obj
        self.assertEqual(listed["apiVersion"], "meta.k8s.io/v1beta1")
        self.assertIn("meta", [i["metadata"]["name"] for i in listed["items"]])
        self.assertTrue(listed["metadata"]["resourceVersion"])
        # Tables have no protobuf form: the next clause answers
        r = await self.client.get("/api/v1/namespaces/default/configmaps", headers={
            "Accept": f"{PB};as=Table;g=meta.k8s.io;v=v1,application/json"})
        self.assertEqual((r.code, r.header("content-type"), r.body["kind"]), (200, "application/json", "ConfigMapList"))

"""Request bodies are decoded into the kind's schema before anything else sees them.

What does not fit is a 4xx Status in upstream's words; what is stored is
always well-typed, so listing a kind keeps working for everyone.
"""
from __future__ import annotations

import base64
import datetime
import json

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kapiserver.machinery import protobuf
from kapiserver.testing.cases import ServerTestCase, run

CM = "/api/v1/namespaces/default/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"
SECRETS = "/api/v1/namespaces/default/secrets"
NS = "/api/v1/namespaces"


def cm(name: str, **fields) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def deployment(name: str, replicas=1) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


class TypeMismatchTests(ServerTestCase):
    async def assert_bad_request(self, path: str, body, message: str, **kw) -> None:
        r = await self.client.post(path, body, **kw)
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["reason"], "BadRequest")
        self.assertEqual(r.body["message"], message)

    @run
    async def test_wrong_types_are_400_in_go_words_and_nothing_is_stored(self):
        prefix = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        await self.assert_bad_request(CM, cm("a", metadata={"name": "a", "labels": ["a"]}),
                                      prefix + "array into Go struct field ObjectMeta.metadata.labels of type "
                                               "map[string]string")
        await self.assert_bad_request(CM, cm("a", data={"a": 1}),
                                      prefix + "number into Go struct field ConfigMap.data of type string")
        await self.assert_bad_request(CM, cm("a", metadata={"name": "a", "ownerReferences": "x"}),
                                      prefix + "string into Go struct field ObjectMeta.metadata.ownerReferences of "
                                               "type []v1.OwnerReference")
        await self.assert_bad_request(DEPLOY, deployment("d", "abc"),
                                      'Deployment in version "v1" cannot be handled as a Deployment: json: cannot '
                                      'unmarshal string into Go struct field DeploymentSpec.spec.replicas of type '
                                      'int32')
        await self.assert_bad_request(DEPLOY, deployment("d", 1 << 33),
                                      'Deployment in version "v1" cannot be handled as a Deployment: json: cannot '
                                      'unmarshal number 8589934592 into Go struct field DeploymentSpec.spec.replicas '
                                      'of type int32')
        listed = await self.client.get(CM)
        self.assertEqual(listed.code, 200)
        self.assertNotIn("a", [i["metadata"]["name"] for i in listed.body["items"]])
        self.assertEqual((await self.client.get(DEPLOY)).code, 200)

    @run
    async def test_quantities_base64_and_times_are_checked(self):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "lots"}}}]}}
        r = await self.client.post("/api/v1/namespaces/default/pods", pod)
        self.assertEqual(r.code, 400, r.raw)
        self.assertIn("quantities must match the regular expression", r.body["message"])
        r = await self.client.post(SECRETS, {"metadata": {"name": "s"}, "data": {"k": "not base64!"}})
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["message"], 'Secret in version "v1" cannot be handled as a Secret: illegal base64 '
                                            'data at input byte 3')
        r = await self.client.post(CM, cm("t", metadata={"name": "t", "deletionTimestamp": "yesterday"}))
        self.assertEqual(r.code, 400, r.raw)
        self.assertIn('parsing time "yesterday"', r.body["message"])

    @run
    async def test_null_fields_are_unset(self):
        r = await self.client.post(CM, cm("n", data=None, metadata={"name": "n", "labels": {"a": None}}))
        self.assertEqual(r.code, 201, r.raw)
        self.assertNotIn("data", r.body)
        self.assertEqual(r.body["metadata"]["labels"], {"a": ""})

    @run
    async def test_body_that_is_not_an_object(self):
        r = await self.client.post(CM, raw=b"[1, 2]")
        self.assertEqual(r.code, 400)
        self.assertTrue(r.body["message"].startswith(
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json "
            "parse error: json: cannot unmarshal array into Go value of type struct"), r.body["message"])
        r = await self.client.post(CM, {"apiVersion": 1, "kind": "ConfigMap"})
        self.assertEqual(r.code, 400)
        self.assertIn("cannot unmarshal number into Go struct field .apiVersion of type string", r.body["message"])


class DecodeErrorTests(ServerTestCase):
    @run
    async def test_yaml_sent_as_json(self):
        body = b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: y\n"
        r = await self.client.post(NS, raw=body)  # content type application/json, as kubectl create --raw
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["message"],
                         "the object provided is unrecognized (must be of type Namespace): couldn't get "
                         "version/kind; json parse error: invalid character 'a' looking for beginning of value "
                         f"({body[:30].hex()} ...)")

    @run
    async def test_wrong_kind_for_the_url(self):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
        r = await self.client.post(NS, pod)
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["message"], 'Pod in version "v1" cannot be handled as a Namespace: converting '
                                            '(v1.Pod) to (core.Namespace): unknown conversion')
        r = await self.client.post(NS, {"apiVersion": "v1", "kind": "Frobnicator", "metadata": {"name": "p"}})
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["message"], 'Frobnicator in version "v1" cannot be handled as a Namespace: no kind '
                                            '"Frobnicator" is registered for version "v1" in scheme '
                                            '"pkg/api/legacyscheme/scheme.go:30"')


class UnknownFieldTests(ServerTestCase):
    @run
    async def test_unknown_fields_are_dropped_and_reported_per_field_validation(self):
        body = cm("u", data={"a": "b"}, spec={"bogus": 1})
        r = await self.client.post(CM, body)
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.headers.getRawHeaders("warning"), ['299 - "unknown field \\"spec\\""'])
        self.assertNotIn("spec", (await self.client.get(CM + "/u")).body)
        r = await self.client.post(CM + "?fieldValidation=Ignore", dict(body, metadata={"name": "u2"}))
        self.assertEqual(r.code, 201)
        self.assertIsNone(r.headers.getRawHeaders("warning"))
        self.assertNotIn("spec", r.body)
        r = await self.client.post(CM + "?fieldValidation=Strict", dict(body, metadata={"name": "u3"}))
        self.assertEqual(r.code, 400)
        self.assertEqual(r.body["message"], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict '
                                            'decoding error: unknown field "spec"')

    @run
    async def test_nested_unknown_field_path(self):
        d = deployment("d")
        d["spec"]["template"]["spec"]["containers"][0]["bogus"] = True
        r = await self.client.post(DEPLOY + "?fieldValidation=Strict", d)
        self.assertEqual(r.code, 400)
        self.assertIn('unknown field "spec.template.spec.containers[0].bogus"', r.body["message"])

    @run
    async def test_duplicate_fields(self):
        raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1"},"data":{"b":"2"}}'
        r = await self.client.post(CM, raw=raw)
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.body["data"], {"b": "2"})
        self.assertEqual(r.headers.getRawHeaders("warning"), ['299 - "duplicate field \\"data\\""'])
        r = await self.client.post(CM + "?fieldValidation=Strict", raw=raw.replace(b"dup", b"dup2"))
        self.assertEqual(r.code, 400)
        self.assertIn('strict decoding error: duplicate field "data"', r.body["message"])
        # a colon inside a string is not a member
        r = await self.client.post(CM, raw=b'{"metadata":{"name":"c","annotations":{"n":"x:{y}"}},"data":{"a":"c:d"}}')
        self.assertEqual(r.code, 201)
        self.assertIsNone(r.headers.getRawHeaders("warning"))

    @run
    async def test_duplicate_fields_in_a_large_body(self):
        """A body of 64 KiB or more has its strings matched one at a time: the same answers."""
        data = b",".join(b'"k%05d":"v:%05d"' % (i, i) for i in range(5000))
        raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{' + data + b'}}'
        self.assertGreater(len(raw), 64 * 1024)
        r = await self.client.post(CM, raw=raw)
        self.assertEqual(r.code, 201, r.raw)
        self.assertIsNone(r.headers.getRawHeaders("warning"))
        self.assertEqual(r.body["data"]["k04999"], "v:04999")
        duplicated = raw.replace(b'"big"', b'"big2"')[:-2] + b',"k00000":"w:0"}}'
        r = await self.client.post(CM, raw=duplicated)
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.headers.getRawHeaders("warning"), ['299 - "duplicate field \\"data.k00000\\""'])
        self.assertEqual(r.body["data"]["k00000"], "w:0")


class YAMLTests(ServerTestCase):
    async def post_yaml(self, text: str, path: str = CM):
        return await self.client.post(path, raw=text.encode(), content_type="application/yaml")

    @run
    async def test_yaml_1_1_scalars_where_strings_belong_are_type_errors(self):
        for value, kind in (("yes", "bool"), ("0x10", "number"), ("on", "bool"), ("1.5", "number")):
            r = await self.post_yaml(f"metadata:\n  name: c\ndata:\n  a: {value}\n")
            self.assertEqual(r.code, 400, r.raw)
            self.assertEqual(r.body["message"], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: '
                                                f'cannot unmarshal {kind} into Go struct field ConfigMap.data of '
                                                'type string')
        r = await self.post_yaml("metadata:\n  name: c\ndata:\n  a: .nan\n")
        self.assertEqual(r.code, 400, r.raw)
        self.assertIn("json: unsupported value: NaN", r.body["message"])

    @run
    async def test_yaml_as_kubernetes_reads_it(self):
        r = await self.post_yaml("metadata:\n  name: c\n  labels:\n    1: x\n    true: z\n"
                                 "data:\n  quoted: \"yes\"\n  stamp: 2001-12-14\n  bin: !!binary aGVsbG8=\n")
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.body["metadata"]["labels"], {"1": "x", "true": "z"})
        self.assertEqual(r.body["data"], {"quoted": "yes", "stamp": "2001-12-14", "bin": "hello"})
        # !!binary is decoded to its bytes ("hello"), which binaryData then needs as base64: not "hello"
        r = await self.post_yaml("metadata:\n  name: d\nbinaryData:\n  b: !!binary aGVsbG8=\n")
        self.assertEqual(r.code, 400)
        self.assertIn("illegal base64 data", r.body["message"])

    @run
    async def test_alias_bomb_is_refused(self):
        lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        for prev, cur in zip("abcdefgh", "bcdefghi"):
            lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
        bomb = "metadata:\n  name: bomb\ndata:\n" + "".join("  " + line + "\n" for line in lines)
        self.assertLess(len(bomb), 600)
        r = await self.post_yaml(bomb)
        self.assertEqual(r.code, 400, r.raw[:300])
        self.assertIn("excessive aliasing", r.body["message"])
        # modest aliasing is fine
        r = await self.post_yaml("metadata:\n  name: ok\n  labels: &l {a: b}\n  annotations: *l\n")
        self.assertEqual(r.code, 201, r.raw)
        self.assertEqual(r.body["metadata"]["annotations"], {"a": "b"})


class OptionsTests(ServerTestCase):
    @run
    async def test_dry_run_must_be_all(self):
        r = await self.client.post(CM + "?dryRun=true", cm("dry"))
        self.assertEqual(r.code, 422, r.raw)
        self.assertEqual(r.body["message"], 'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
                                            '[]string{"true"}: supported values: "All"')
        self.assertEqual((await self.client.get(CM + "/dry")).code, 404)
        self.assertEqual((await self.client.post(CM + "?dryRun=All", cm("dry"))).code, 201)
        self.assertEqual((await self.client.get(CM + "/dry")).code, 404)

    @run
    async def test_delete_options_are_decoded_before_anything_is_deleted(self):
        await self.client.post(CM, cm("keep"))
        for raw in (b"not json at all", b'{"dryRun": ["Yes"]}', b'{"gracePeriodSeconds": "soon"}',
                    b'{"kind": "Pod"}', b'[]', b'{"propagationPolicy": "Sometimes"}'):
            r = await self.client.delete(CM + "/keep", raw=raw)
            self.assertIn(r.code, (400, 422), (raw, r.raw))
            self.assertTrue(r.body["reason"])
        r = await self.client.delete(CM + "/keep?dryRun=yes")
        self.assertEqual(r.code, 422)
        self.assertEqual((await self.client.get(CM + "/keep")).code, 200, "nothing may have been deleted")
        r = await self.client.delete(CM + "/keep", raw=b'{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}')
        self.assertEqual(r.code, 200)
        self.assertEqual((await self.client.get(CM + "/keep")).code, 200)

    @run
    async def test_list_options(self):
        # (a negative limit or timeoutSeconds is not refused: upstream validates neither, see test_rest_verbs)
        for query in ("continue=%%%garbage", "labelSelector=a%20in%20(",
                      "fieldSelector=metadata.name%3D%3D%3Dx", "resourceVersion=abc", "limit=abc"):
            r = await self.client.get(CM + "?" + query)
            self.assertIn(r.code, (400, 422), (query, r.raw))
            self.assertTrue(r.body["reason"], query)


class RenameTests(ServerTestCase):
    @run
    async def test_patch_and_put_cannot_rename_or_move(self):
        await self.client.post(CM, cm("orig"))
        r = await self.client.patch(CM + "/orig", {"metadata": {"name": "other"}})
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["message"], "the name of the object (other) does not match the name on the URL (orig)")
        # kube-apiserver, side by side: BeforeUpdate's words for a patch that moves the object, in every patch type
        moved = {"metadata": {"namespace": "kube-system"}}
        for patch, content_type in ((moved, "application/merge-patch+json"),
                                    (moved, "application/strategic-merge-patch+json"),
                                    ([{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}],
                                     "application/json-patch+json")):
            r = await self.client.patch(CM + "/orig", patch, content_type=content_type)
            self.assertEqual((r.code, r.body["message"]), (400, "the namespace of the provided object does not match "
                                                                "the namespace sent on the request"), content_type)
        # a cluster-scoped object's namespace is cleared, whatever a patch or a PUT sets it to
        roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "moved"}}
        self.assertEqual((await self.client.post(roles, role)).code, 201)
        for value in ("x", "", "default"):
            r = await self.client.patch(roles + "/moved",
                                        [{"op": "replace", "path": "/metadata/namespace", "value": value}],
                                        content_type="application/json-patch+json")
            self.assertEqual((r.code, "namespace" in r.body["metadata"]), (200, False), (value, r.body))
            r = await self.client.patch(roles + "/moved", {"metadata": {"namespace": value}})
            self.assertEqual((r.code, "namespace" in r.body["metadata"]), (200, False), (value, r.body))
        r = await self.client.patch(roles + "/moved?fieldManager=m",
                                    {**role, "metadata": {"name": "moved", "namespace": "x"}},
                                    content_type="application/apply-patch+yaml")
        self.assertEqual((r.code, "namespace" in r.body["metadata"]), (200, False), r.body)
        r = await self.client.patch(CM + "/orig", [{"op": "remove", "path": "/metadata/name"}],
                                    content_type="application/json-patch+json")
        self.assertEqual(r.code, 400, r.raw)
        current = (await self.client.get(CM + "/orig")).body
        current["metadata"]["name"] = "else"
        r = await self.client.put(CM + "/orig", current)
        self.assertEqual(r.code, 400)
        self.assertEqual(r.body["message"], "the name of the object (else) does not match the name on the URL (orig)")
        self.assertEqual((await self.client.get(CM + "/else")).code, 404)


class PatchTypeTests(ServerTestCase):
    @run
    async def test_patches_that_break_the_type_are_refused(self):
        await self.client.post(CM, cm("p", data={"a": "b"}))
        for content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            r = await self.client.patch(CM + "/p", {"data": "str"}, content_type=content_type)
            self.assertEqual(r.code, 422, r.raw)
            self.assertEqual(r.body["reason"], "Invalid")
            self.assertIn("json: cannot unmarshal string into Go struct field ConfigMap.data of type "
                          "map[string]string", r.body["message"])
        r = await self.client.patch(CM + "/p", [{"op": "replace", "path": "/data/a", "value": 7}],
                                    content_type="application/json-patch+json")
        self.assertEqual(r.code, 422, r.raw)
        r = await self.client.patch(CM + "/p", {"data": {"$patch": "bogus"}},
                                    content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 400, r.raw)
        self.assertEqual(r.body["reason"], "BadRequest")
        # found by bench/fuzz.py: a list where a merge key's value belongs (was a 500)
        r = await self.client.patch("/api/v1/namespaces/default", {"status": {"conditions": [{"type": []}]}},
                                    content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 422, r.raw)
        # found by bench/fuzz.py: a YAML integer past 64 bits in free-form data (was a 500 when stored)
        r = await self.client.post("/apis/apps/v1/namespaces/default/controllerrevisions",
                                   raw=b"metadata: {name: big}\nrevision: 1\ndata: {n: 18446744073709551616}\n",
                                   content_type="application/yaml")
        self.assertEqual(r.code, 201, r.raw)
        # what a patch leaves as stored is not decoded again: true where the stored value is 1 still is
        deployments = "/apis/apps/v1/namespaces/default/deployments"
        r = await self.client.post(deployments, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
        self.assertEqual(r.code, 201, r.raw)
        for replicas in (True, 1.0):
            r = await self.client.patch(deployments + "/d", {"spec": {"replicas": replicas}})
            self.assertEqual(r.code, 422, r.raw)
            self.assertIn("into Go struct field DeploymentSpec.spec.replicas of type int32", r.body["message"])
        self.assertEqual((await self.client.get(deployments + "/d")).body["spec"]["replicas"], 1)
        r = await self.client.patch(CM + "/p", {"data": {"c": "d"}, "bogus": 1})
        self.assertEqual(r.code, 200, r.raw)
        self.assertEqual(r.headers.getRawHeaders("warning"), ['299 - "unknown field \\"bogus\\""'])
        self.assertNotIn("bogus", r.body)
        listed = await self.client.get(CM)
        self.assertEqual(listed.code, 200)
        self.assertEqual({"a": "b", "c": "d"}, [i for i in listed.body["items"]
                                                if i["metadata"]["name"] == "p"][0]["data"])


class DepthTests(ServerTestCase):
    @run
    async def test_deep_bodies_are_400_in_every_content_type(self):
        deep_json = b'{"metadata":{"name":"deep"},"data":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
        deep_yaml = b"metadata:\n  name: deep\ndata: " + b"[" * 50_000 + b"]" * 50_000 + b"\n"
        cases = [("application/json", deep_json), ("application/yaml", deep_yaml),
                 ("application/merge-patch+json", b'{"data":' + b'{"a":' * 20_000 + b"1" + b"}" * 20_001),
                 ("application/json-patch+json",
                  b'[{"op":"add","path":"/data","value":' + b"[" * 50_000 + b"]" * 50_000 + b"}]")]
        await self.client.post(CM, cm("deep"))
        for content_type, body in cases:
            if "patch" in content_type:
                r = await self.client.patch(CM + "/deep", raw=body, content_type=content_type)
            else:
                r = await self.client.post(CM, raw=body, content_type=content_type)
            self.assertEqual(r.code, 400, (content_type, r.raw[:300]))
            self.assertIn("depth", r.body["message"])
        # an object just inside the limit is fine where the schema allows any JSON (a CRD default)
        self.assertEqual((await self.client.get(CM)).code, 200)


class ListStaysHealthyTests(ServerTestCase):
    @run
    async def test_envelope_field_of_another_wire_type_is_unrecognized(self):
        """kube-apiserver v1.32.13 refuses an envelope whose Raw (or TypeMeta, APIVersion...) comes with another
        wire type, even after a good one; it skips fields the envelope does not have."""
        good = protobuf.encode_object(cm("pb", data={"k": "v"}))
        r = await self.client.post(CM, raw=good + b"\x10\x01", content_type=protobuf.MEDIA_TYPE)
        self.assertEqual(r.code, 400, r.body)
        self.assertTrue(r.body["message"].startswith(
            "the object provided is unrecognized (must be of type ConfigMap): proto: wrong wireType = 0 for field "
            "Raw (6b387300"), r.body["message"])
        r = await self.client.post(CM, raw=good + b"\x28\x01", content_type=protobuf.MEDIA_TYPE)  # field 5
        self.assertEqual((r.code, r.body["data"]), (201, {"k": "v"}))

    @run
    async def test_envelope_keys_go_cannot_read_are_unrecognized(self):
        """As kube-apiserver v1.32.13, side by side: a key whose field number is not positive as Go's int32,
        or of a wire type protobuf has not, after a good envelope; a number past 32 bits is read truncated."""
        def varint(n: int) -> bytes:
            out = bytearray()
            while n > 0x7F:
                out.append((n & 0x7F) | 0x80)
                n >>= 7
            return bytes(out + bytes([n]))
        cases = {"-422677738 (wire type 30978316469)": varint((3872289558 << 3) | 5) + b"\0\0\0\0",
                 "-2147483648 (wire type 17179869189)": varint(((1 << 31) << 3) | 5) + b"\0\0\0\0",
                 "0 (wire type 0)": b"\0\0"}
        for i, (words, tail) in enumerate(cases.items()):
            good = protobuf.encode_object(cm(f"t{i}", data={"k": "v"}))
            r = await self.client.post(CM, raw=good + tail, content_type=protobuf.MEDIA_TYPE)
            self.assertEqual(r.code, 400, r.body)
            self.assertTrue(r.body["message"].startswith("the object provided is unrecognized (must be of type "
                                                         f"ConfigMap): proto: Unknown: illegal tag {words} (6b387300"),
                            r.body["message"])
        good = protobuf.encode_object(cm("w", data={"k": "v"}))
        r = await self.client.post(CM, raw=good + varint((7 << 3) | 6), content_type=protobuf.MEDIA_TYPE)
        self.assertTrue(r.body["message"].startswith("the object provided is unrecognized (must be of type ConfigMap): "
                                                     "proto: illegal wireType 6 (6b387300"), r.body["message"])
        r = await self.client.post(CM, raw=good + varint(((1 << 32) + 9 << 3) | 0) + b"\0",
                                   content_type=protobuf.MEDIA_TYPE)
        self.assertEqual((r.code, r.body["data"]), (201, {"k": "v"}))

    @run
    async def test_list_in_every_encoding_after_rejected_writes(self):
        bad = [cm("x", data={"a": 1}), cm("y", metadata={"name": "y", "labels": ["a"]}),
               cm("z", metadata={"name": "z", "ownerReferences": "x"})]
        for body in bad:
            self.assertEqual((await self.client.post(CM, body)).code, 400)
        for accept in ("application/json", "application/yaml",
                       "application/json;as=Table;v=v1;g=meta.k8s.io",
                       "application/vnd.kubernetes.protobuf"):
            r = await self.client.get(CM, headers={"Accept": accept})
            self.assertEqual(r.code, 200, (accept, r.raw[:200]))
        self.assertEqual(json.loads((await self.client.get(CM)).raw)["kind"], "ConfigMapList")


class CorruptObjectTests(ServerTestCase):
    """One undecodable stored value fails reads of that object only; the kind stays listable and watchable."""

    async def store_raw(self, name: str, value: bytes) -> str:
        store = self.server.api.served.store("", "v1", "configmaps")
        key = store.rtype.storage_key("default", name)
        await store.storage.create(key, value)
        return key

    @run
    async def test_corrupt_object(self):
        self.assertEqual((await self.client.post(CM, cm("good", data={"a": "b"}))).code, 201)
        key = await self.store_raw("bad", b'{"metadata": {"name": "bad"')
        await self.store_raw("weird", b'["not", "an", "object"]')
        r = await self.client.get(CM + "/bad")
        self.assertEqual(r.code, 500)
        self.assertEqual(r.body["reason"], "InternalError")
        self.assertIn(f"StorageError: corrupt object, Code: 7, Key: {key}", r.body["message"])
        for accept in ("application/json", "application/yaml", "application/json;as=Table;v=v1;g=meta.k8s.io",
                       "application/vnd.kubernetes.protobuf"):
            listed = await self.client.get(CM, headers={"Accept": accept})
            self.assertEqual(listed.code, 200, accept)
        listed = await self.client.get(CM)
        names = [i["metadata"]["name"] for i in listed.body["items"]]
        self.assertIn("good", names)
        self.assertNotIn("bad", names)
        warnings = listed.headers.getRawHeaders("warning")
        self.assertEqual(len(warnings), 2)
        self.assertIn(key, warnings[0])
        # a watch from the start sees the readable object and goes on
        watch = await self.client.get(CM + "?watch=true&timeoutSeconds=1")
        self.assertEqual(watch.code, 200)
        self.assertIn(b'"name":"good"', watch.raw)
        # an ordinary delete must read the object: it fails; the unsafe one removes it
        self.assertEqual((await self.client.delete(CM + "/bad")).code, 500)
        r = await self.client.delete(CM + "/bad?ignoreStoreReadErrorWithClusterBreakingPotential=true")
        self.assertEqual(r.code, 200, r.raw)
        self.assertEqual((await self.client.get(CM + "/bad")).code, 404)
        r = await self.client.delete(CM + "/weird", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                     "ignoreStoreReadErrorWithClusterBreakingPotential": True})
        self.assertEqual(r.code, 200, r.raw)
        listed = await self.client.get(CM)
        self.assertIsNone(listed.headers.getRawHeaders("warning"))
        self.flushLoggedErrors()


def _ca_pem() -> bytes:
    """A self-signed CA certificate (what a caBundle holds)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bytes-test-ca")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def _csr_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bytes-test")])
    return (x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
            .public_bytes(serialization.Encoding.PEM))


def _sent(raw: bytes, tail: str = "\r\n") -> str:
    """``raw`` as a client may send a []byte field: base64 with a line ending after it (Go's decoder
    ignores CR and LF), and with the pad bits of a short last group set (Go ignores those too)."""
    text = base64.b64encode(raw).decode()
    return text + tail


class BytesFieldTests(ServerTestCase):
    """A ``[]byte`` field (``format: byte``) is kept as Go keeps it: the decoded bytes, written back in
    canonical base64. Sent with a trailing CR/LF it used to be stored as sent, and from then on every
    protobuf list of the kind was a 500 ``illegal base64 data``."""

    @run
    async def test_bytes_sent_with_line_endings_list_as_protobuf(self):
        ca, csr = _ca_pem(), _csr_pem()
        service = {"namespace": "default", "name": "hook", "port": 443}
        objects = {
            "/api/v1/namespaces/default/secrets": (
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                 "data": {"a": _sent(b"hello"), "b": _sent(b"hi", "\n"), "c": "aGVsbG9=\n"}},
                lambda o: o["data"], {"a": b"hello", "b": b"hi", "c": b"hello"}),
            CM: ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                  "binaryData": {"bin": _sent(b"\x00\xff\x10")}},
                 lambda o: o["binaryData"], {"bin": b"\x00\xff\x10"}),
            "/apis/certificates.k8s.io/v1/certificatesigningrequests": (
                {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                 "metadata": {"name": "csr"},
                 "spec": {"request": _sent(csr), "signerName": "kubernetes.io/kube-apiserver-client",
                          "usages": ["client auth"]}},
                lambda o: {"request": o["spec"]["request"]}, {"request": csr}),
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": (
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                 "metadata": {"name": "hooks"},
                 "webhooks": [{"name": "a.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                               "clientConfig": {"service": service, "caBundle": _sent(ca)}}]},
                lambda o: {"caBundle": o["webhooks"][0]["clientConfig"]["caBundle"]}, {"caBundle": ca}),
            "/apis/apiregistration.k8s.io/v1/apiservices": (
                {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                 "metadata": {"name": "v1.bytes.example.com"},
                 "spec": {"group": "bytes.example.com", "version": "v1", "groupPriorityMinimum": 100,
                          "versionPriority": 100, "caBundle": _sent(ca), "service": service}},
                lambda o: {"caBundle": o["spec"]["caBundle"]}, {"caBundle": ca}),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": (
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": "widgets.bytes.example.com"},
                 "spec": {"group": "bytes.example.com", "scope": "Namespaced",
                          "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                          "versions": [{"name": "v1", "served": True, "storage": True,
                                        "schema": {"openAPIV3Schema": {"type": "object"}}}],
                          "conversion": {"strategy": "Webhook", "webhook": {
                              "conversionReviewVersions": ["v1"],
                              "clientConfig": {"service": service, "caBundle": _sent(ca)}}}}},
                lambda o: {"caBundle": o["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]},
                {"caBundle": ca}),
        }
        for path, (body, fields, expected) in objects.items():
            created = await self.client.post(path, body)
            self.assertEqual(created.code, 201, (path, created.raw[:300]))
            canonical = {k: base64.b64encode(v).decode() for k, v in expected.items()}
            self.assertEqual(fields(created.body), canonical, path)  # what upstream answers: the decoded bytes
        for path, (body, fields, expected) in objects.items():
            # what client-go asks for (informers, controllers, kubectl's protobuf paths)
            r = await self.client.get(path, headers={"Accept": "application/vnd.kubernetes.protobuf, */*"})
            self.assertEqual((r.code, r.header("content-type")), (200, protobuf.MEDIA_TYPE), (path, r.raw[:300]))
            items = protobuf.decode_object(r.raw).obj["items"]
            name = body["metadata"]["name"]
            stored = next(i for i in items if i["metadata"]["name"] == name)
            self.assertEqual({k: base64.b64decode(v) for k, v in fields(stored).items()}, expected, path)

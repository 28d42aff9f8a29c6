"""``/openapi/v2`` as gnostic's protobuf ``Document`` (what kubectl asks for).

The encoding was checked against gnostic itself while it was written (the
Document gnostic compiles from the same JSON, YAML of ``Any`` values
normalised, is equal, for kapiserver's document and for kube-apiserver
1.32's); these tests read the bytes back with the wire-level reader and
compare them with the JSON document.
"""
from __future__ import annotations

import hashlib
from typing import Any

import orjson
import yaml
from twisted.trial import unittest

from kapiserver.endpoints.openapi_endpoint import negotiate_v2
from kapiserver.machinery import openapi_v2_protobuf as pb
from kapiserver.machinery.protobuf import iter_fields
from kapiserver.testing.cases import ServerTestCase, run

KUBECTL_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def fields(data: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for number, _, value in iter_fields(data):
        out.setdefault(number, []).append(value)
    return out


def named(data: bytes, number: int) -> dict[str, bytes]:
    """The ``Named*`` entries of repeated field ``number``: name → value bytes."""
    entries = {}
    for entry in fields(data).get(number, []):
        f = fields(entry)
        entries[f[1][0].decode()] = f.get(2, [b""])[0]
    return entries


class EncodingTests(unittest.TestCase):
    DOC = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.13"},
        "paths": {"/api/v1/namespaces/{namespace}/pods/{name}": {
            "get": {"operationId": "readCoreV1NamespacedPod", "produces": ["application/json"],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/Pod"}},
                                  "401": {"description": "Unauthorized"}},
                    "x-kubernetes-action": "get"},
            "parameters": [{"name": "name", "in": "path", "required": True, "type": "string", "uniqueItems": True},
                           {"name": "body", "in": "body", "required": True, "schema": {"$ref": "#/definitions/Pod"}},
                           {"$ref": "#/parameters/pretty"}],
        }},
        "definitions": {"Pod": {
            "description": "a pod",
            "type": "object",
            "required": ["spec"],
            "properties": {"spec": {"type": "object", "additionalProperties": {"type": "string"}},
                           "phase": {"type": "string", "enum": ["Pending", "Running"], "default": "Pending"},
                           "open": {"type": "object", "additionalProperties": False},
                           "count": {"type": "integer", "format": "int32", "minimum": 0, "maxLength": 5}},
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
        }},
        "security": [{"BearerToken": []}],
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
    }

    def setUp(self):
        self.doc = fields(pb.encode_document(self.DOC))

    def test_document_fields(self):
        self.assertEqual(self.doc[1], [b"2.0"])
        info = fields(self.doc[2][0])
        self.assertEqual((info[1], info[2]), ([b"Kubernetes"], [b"v1.32.13"]))

    def test_definitions_with_vendor_extension_and_properties_in_order(self):
        pod = fields(named(self.doc[9][0], 1)["Pod"])
        self.assertEqual(pod[4], [b"a pod"])
        self.assertEqual(pod[19], [b"spec"])  # required
        self.assertEqual(fields(pod[22][0])[1], [b"object"])  # TypeItem
        extensions = {}
        for entry in pod[31]:
            f = fields(entry)
            extensions[f[1][0].decode()] = yaml.safe_load(fields(f[2][0])[2][0].decode())
        self.assertEqual(extensions, {"x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod",
                                                                           "version": "v1"}]})
        props = named(pod[25][0], 1)
        self.assertEqual(list(props), ["spec", "phase", "open", "count"])
        spec_additional = fields(fields(props["spec"])[21][0])
        self.assertEqual(fields(fields(spec_additional[1][0])[22][0])[1], [b"string"])  # a schema
        self.assertEqual(fields(fields(props["open"])[21][0]), {2: [0]})  # boolean false, still written
        phase = fields(props["phase"])
        self.assertEqual([yaml.safe_load(fields(e)[2][0]) for e in phase[20]], ["Pending", "Running"])
        self.assertEqual(yaml.safe_load(fields(phase[5][0])[2][0]), "Pending")
        count = fields(props["count"])
        self.assertEqual((count[2], count[11]), ([b"int32"], [5]))
        self.assertNotIn(9, count)  # minimum 0 is proto3's zero: left out

    def test_paths_operations_and_parameter_oneofs(self):
        item = fields(named(self.doc[8][0], 2)["/api/v1/namespaces/{namespace}/pods/{name}"])
        get = fields(item[2][0])
        self.assertEqual(get[5], [b"readCoreV1NamespacedPod"])
        responses = named(get[9][0], 1)
        ok = fields(fields(responses["200"])[1][0])  # ResponseValue.response
        self.assertEqual(ok[1], [b"OK"])
        self.assertEqual(fields(fields(ok[2][0])[1][0])[1], [b"#/definitions/Pod"])  # SchemaItem.schema._ref
        path_param, body_param, ref_param = (fields(p) for p in item[9])
        non_body = fields(fields(path_param[1][0])[2][0])
        self.assertEqual(fields(non_body[4][0])[4], [b"name"])  # PathParameterSubSchema.name
        self.assertEqual(fields(fields(body_param[1][0])[1][0])[2], [b"body"])  # BodyParameter.name
        self.assertEqual(fields(ref_param[2][0])[1], [b"#/parameters/pretty"])  # JsonReference

    def test_security(self):
        requirement = named(self.doc[12][0], 1)
        self.assertEqual(requirement, {"BearerToken": b""})
        api_key = fields(fields(named(self.doc[13][0], 1)["BearerToken"])[2][0])
        self.assertEqual((api_key[1], api_key[2], api_key[3]), ([b"apiKey"], [b"authorization"], [b"header"]))


class NegotiationTests(unittest.TestCase):
    def test_kube_openapi_rules(self):
        self.assertEqual(negotiate_v2(KUBECTL_ACCEPT), pb.MEDIA_TYPE)
        self.assertEqual(negotiate_v2(pb.MEDIA_TYPE), pb.MEDIA_TYPE)
        self.assertEqual(negotiate_v2(None), "application/json")
        self.assertEqual(negotiate_v2("*/*"), "application/json")
        self.assertEqual(negotiate_v2(f"application/json;q=0.5, {KUBECTL_ACCEPT}"), pb.MEDIA_TYPE)
        self.assertEqual(negotiate_v2(f"{KUBECTL_ACCEPT};q=0, application/json"), "application/json")
        self.assertIsNone(negotiate_v2("text/html"))


class EndpointTests(ServerTestCase):
    @run
    async def test_protobuf_document_matches_json_and_shares_its_etag(self):
        as_json = await self.client.get("/openapi/v2")
        as_pb = await self.client.get("/openapi/v2", headers={"Accept": KUBECTL_ACCEPT})
        self.assertEqual(as_pb.code, 200)
        self.assertEqual(as_pb.header("content-type"), pb.MEDIA_TYPE)
        etag = '"' + hashlib.sha512(as_json.raw).hexdigest().upper() + '"'
        self.assertEqual(as_json.header("etag"), etag)
        self.assertEqual(as_pb.header("etag"), etag)
        doc = orjson.loads(as_json.raw)
        definitions = named(fields(as_pb.raw)[9][0], 1)
        self.assertEqual(list(definitions), list(doc["definitions"]))
        paths = named(fields(as_pb.raw)[8][0], 2)
        self.assertEqual(list(paths), list(doc["paths"]))
        again = await self.client.get("/openapi/v2", headers={"Accept": KUBECTL_ACCEPT})
        self.assertEqual(again.raw, as_pb.raw)

    @run
    async def test_not_modified_and_not_acceptable(self):
        first = await self.client.get("/openapi/v2", headers={"Accept": KUBECTL_ACCEPT})
        cached = await self.client.get("/openapi/v2", headers={"Accept": KUBECTL_ACCEPT,
                                                               "If-None-Match": first.header("etag")})
        self.assertEqual((cached.code, cached.raw), (304, b""))
        refused = await self.client.get("/openapi/v2", headers={"Accept": "text/html"})
        self.assertEqual(refused.code, 406)

"""Protobuf end to end against a real kapiserver process: CustomResourceDefinitions
created with ``kubectl create -f`` and with a protobuf body (what client-go's typed
apiextensions client sends, e.g. in upstream's conformance suite) read back as
protobuf, and protobuf watch frames of objects kubectl writes."""
from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import threading

import yaml
from twisted.trial import unittest

from kapiserver.machinery import protobuf
from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, shared_server

PB = protobuf.MEDIA_TYPE

CRD_YAML = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.pb.example.com
spec:
  group: pb.example.com
  scope: Namespaced
  names: {{plural: {plural}, singular: {singular}, kind: {kind}, shortNames: [{short}]}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale: {{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}
    additionalPrinterColumns:
    - {{name: Size, type: integer, jsonPath: .spec.size}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - {{rule: "self.size <= 100", message: too big}}
            properties:
              size: {{type: integer, minimum: 1, maximum: 100, default: 3}}
              ratio: {{type: number, multipleOf: 0.25}}
              replicas: {{type: integer, format: int32}}
              color: {{type: string, enum: [red, green], pattern: "^[a-z]+$"}}
              tags: {{type: array, items: {{type: string}}, x-kubernetes-list-type: set}}
              labels: {{type: object, additionalProperties: {{type: string}}}}
              free: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
              conf: {{type: object, default: {{a: 1}}, properties: {{a: {{type: integer}}}}}}
          status:
            type: object
            properties:
              replicas: {{type: integer}}
"""


class RawProtobufClient:
    """Plain HTTPS with the admin kubeconfig's credentials, bodies as bytes."""

    def __init__(self, kubeconfig: str, workdir: str) -> None:
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        self.host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
        self.port = int(port)
        files = {}
        for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
            fd, files[key] = tempfile.mkstemp(dir=workdir, suffix=".pem")
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(cluster.get(key) or user.get(key)))
        self.context = ssl.create_default_context(cafile=files["certificate-authority-data"])
        self.context.load_cert_chain(files["client-certificate-data"], files["client-key-data"])

    def request(self, method: str, path: str, body: bytes | None = None, accept: str = PB,
                timeout: float = 30) -> tuple[int, str, bytes]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = PB
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, resp.getheader("content-type") or "", data


class ProtobufClientTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.client = RawProtobufClient(self.server.kubeconfig, self.server.workdir)

    def crd_file(self, plural: str, kind: str, short: str) -> str:
        path = os.path.join(self.server.workdir, f"{plural}.yaml")
        with open(path, "w") as f:
            f.write(CRD_YAML.format(plural=plural, singular=kind.lower(), kind=kind, short=short))
        self.addCleanup(lambda: self.kubectl("delete", "-f", path, "--wait=false", check=False))
        return path

    def test_crd_from_kubectl_create_file_reads_back_as_protobuf(self):
        path = self.crd_file("sprockets", "Sprocket", "spr")
        self.kubectl("create", "-f", path)
        # (kubectl wait fails at once, not waits, while status.conditions is still null)
        wait_for(lambda: self.kubectl("wait", "--for", "condition=established", "crd/sprockets.pb.example.com",
                                      "--timeout=20s", check=False).returncode == 0, timeout=30)
        as_json = json.loads(self.kubectl("get", "crd", "sprockets.pb.example.com", "-o", "json",
                                          "--show-managed-fields").stdout)
        code, content_type, body = self.client.request(
            "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sprockets.pb.example.com")
        self.assertEqual((code, content_type), (200, PB), body[:300])
        # kapiserver's JSON shows the defaulted false; upstream's (omitempty) and protobuf do not
        self.assertIs(as_json["spec"].pop("preserveUnknownFields", False), False)
        self.assertEqual(protobuf.decode_object(body).obj, as_json)
        schema = as_json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        self.assertEqual(schema["properties"]["size"]["default"], 3)
        self.assertEqual(schema["properties"]["labels"]["additionalProperties"], {"type": "string"})
        # the list, too (client-go's informers list CRDs as protobuf)
        code, _, body = self.client.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        names = [i["metadata"]["name"] for i in protobuf.decode_object(body).obj["items"]]
        self.assertIn("sprockets.pb.example.com", names)

    def test_crd_created_with_a_protobuf_body_serves_its_kind(self):
        path = self.crd_file("gears", "Gear", "gr")
        with open(path) as f:
            crd = yaml.safe_load(f)
        code, content_type, body = self.client.request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", protobuf.encode_object(crd))
        self.assertEqual((code, content_type), (201, PB), body[:500])
        created = protobuf.decode_object(body).obj
        self.assertEqual(created["spec"]["versions"][0]["schema"], crd["spec"]["versions"][0]["schema"])
        # (kubectl wait fails at once, not waits, while status.conditions is still null)
        wait_for(lambda: self.kubectl("wait", "--for", "condition=established", "crd/gears.pb.example.com",
                                      "--timeout=20s", check=False).returncode == 0, timeout=30)
        self.kubectl("apply", "-f", "-", input="apiVersion: pb.example.com/v1\nkind: Gear\nmetadata: {name: g1, "
                     "namespace: default}\nspec: {size: 7, color: red}\n")
        gear = json.loads(self.kubectl("get", "gr", "g1", "-o", "json").stdout)
        self.assertEqual(gear["spec"], {"size": 7, "color": "red", "conf": {"a": 1}})  # the schema's defaults
        rejected = self.kubectl("apply", "-f", "-", check=False, input="apiVersion: pb.example.com/v1\nkind: Gear\n"
                                "metadata: {name: g2, namespace: default}\nspec: {size: 200}\n")
        self.assertIn("spec.size", rejected.stderr)  # the CRD's maximum, sent as a protobuf double
        self.assertIn("SIZE", self.kubectl("get", "gears", "-n", "default").stdout)  # printer columns
        # custom resources themselves stay JSON/YAML
        code, _, body = self.client.request("GET", "/apis/pb.example.com/v1/namespaces/default/gears/g1")
        self.assertEqual(code, 406, body[:300])

    def test_protobuf_watch_frames_of_kubectl_writes(self):
        ns = "pb-watch"
        self.kubectl("create", "ns", ns, check=False)
        self.kubectl("-n", ns, "create", "configmap", "first", "--from-literal=a=1")
        conn = http.client.HTTPSConnection(self.client.host, self.client.port, context=self.client.context,
                                           timeout=30)
        conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true&"
                            "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=4"
                            "&fieldSelector=metadata.name!%3Dkube-root-ca.crt",
                     headers={"Accept": f"{PB};stream=watch"})
        response = conn.getresponse()  # the headers come once the watch is established
        self.assertEqual((response.status, response.getheader("content-type")), (200, f"{PB};stream=watch"))
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.append(response.read()))  # until timeoutSeconds
        reader.start()
        self.kubectl("-n", ns, "create", "configmap", "second", "--from-literal=b=2")
        self.kubectl("-n", ns, "label", "configmap", "second", "x=y")
        self.kubectl("-n", ns, "delete", "configmap", "second")
        reader.join(30)
        conn.close()
        frames, rest = protobuf.split_watch_frames(received[0])
        self.assertEqual(rest, b"")
        events = [protobuf.decode_watch_event(f) for f in frames]
        seen = [(t, obj["metadata"].get("name")) for t, _, obj in events]
        self.assertEqual(seen[:2], [("ADDED", "first"), ("BOOKMARK", None)])
        self.assertEqual(seen[2:], [("ADDED", "second"), ("MODIFIED", "second"), ("DELETED", "second")])
        self.assertEqual(events[3][2]["metadata"]["labels"], {"x": "y"})
        self.assertEqual(events[1][2]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true")

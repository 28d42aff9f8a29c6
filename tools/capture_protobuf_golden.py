"""Capture upstream's protobuf bytes: tests/machinery/fixtures/protobuf_upstream.json.

Creates the objects of tools/protobuf_golden_objects.yaml on a real
kube-apiserver (the project's v1.32.13 reference: ../shared/anchor), then
reads each back twice, as JSON and as protobuf, and records a protobuf
watch-list stream of ConfigMaps with the JSON of its objects.  The codec
tests decode upstream's bytes and compare with upstream's JSON, and encode
that JSON and compare with upstream's bytes.

    python3 tools/capture_protobuf_golden.py --kubeconfig ~/.cache/kube-anchor/admin.kubeconfig

Run it on a fresh server: the watch records every ConfigMap of ``default``.
The objects are deleted again at the end.
"""
from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import ssl
import sys
import urllib.parse

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
OBJECTS = os.path.join(HERE, "protobuf_golden_objects.yaml")
OUTPUT = os.path.join(HERE, "..", "tests", "machinery", "fixtures", "protobuf_upstream.json")
PB = "application/vnd.kubernetes.protobuf"
# objects the server makes itself, read as well
BUILT_IN_PATHS = [
    "/api/v1/namespaces/default",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
    "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/system-leader-election",
    "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/exempt",
    "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps",
    "/apis/apps/v1/namespaces/default/deployments/web/scale",
    "/api/v1/namespaces/default/configmaps",
]
WATCH = ("/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
         "&allowWatchBookmarks=true&timeoutSeconds=2")


class Client:
    def __init__(self, kubeconfig: str) -> None:
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        url = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                stream: bool = False) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = b""
        while True:
            chunk = resp.read1(65536) if stream else resp.read()
            if not chunk:
                break
            data += chunk
            if not stream:
                break
        conn.close()
        return resp.status, dict(resp.getheaders()), data

    def get_json(self, path: str) -> dict:
        code, _, data = self.request("GET", path, headers={"Accept": "application/json"})
        if code != 200:
            raise SystemExit(f"GET {path}: {code} {data[:300]!r}")
        return json.loads(data)


def certificate_request() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "demo")])).sign(key, hashes.SHA256()))
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def resource_paths(client: Client, docs: list[dict]) -> list[str]:
    """The URL of each object, from discovery (kind -> plural, namespaced)."""
    resources: dict[tuple[str, str], tuple[str, bool]] = {}
    for api_version in {d["apiVersion"] for d in docs}:
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        for r in client.get_json(base)["resources"]:
            if "/" not in r["name"]:
                resources[(api_version, r["kind"])] = (r["name"], r["namespaced"])
    paths = []
    for d in docs:
        plural, namespaced = resources[(d["apiVersion"], d["kind"])]
        base = "/api/v1" if d["apiVersion"] == "v1" else f"/apis/{d['apiVersion']}"
        ns = f"/namespaces/{d['metadata'].get('namespace', 'default')}" if namespaced else ""
        paths.append(f"{base}{ns}/{plural}")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args()
    client = Client(args.kubeconfig)
    with open(OBJECTS) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    client.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                   json.dumps({"metadata": {"name": "default"}}).encode(), {"Content-Type": "application/json"})
    collections = resource_paths(client, docs)
    for doc, collection in zip(docs, collections):
        if doc["kind"] == "CertificateSigningRequest":
            doc["spec"]["request"] = certificate_request()
        code, _, data = client.request("POST", collection, json.dumps(doc).encode(),
                                       {"Content-Type": "application/json"})
        if code not in (201, 409):
            raise SystemExit(f"create {doc['kind']} {doc['metadata']['name']}: {code} {data[:300]!r}")
    captured = []
    for path in [f"{c}/{d['metadata']['name']}" for d, c in zip(docs, collections)] + BUILT_IN_PATHS:
        as_json = client.get_json(path)
        code, headers, raw = client.request("GET", path, headers={"Accept": PB})
        if code != 200 or headers.get("Content-Type") != PB:
            raise SystemExit(f"GET {path} as protobuf: {code} {headers.get('Content-Type')}")
        captured.append({"path": path, "json": as_json, "protobuf": base64.b64encode(raw).decode()})
    code, headers, stream = client.request("GET", WATCH, headers={"Accept": PB}, stream=True)
    watch_json = client.get_json("/api/v1/namespaces/default/configmaps")
    result = {"server": client.get_json("/version")["gitVersion"], "objects": captured,
              "watch": {"path": WATCH, "content_type": headers.get("Content-Type"),
                        "stream": base64.b64encode(stream).decode(), "objects": watch_json["items"]}}
    for doc, collection in reversed(list(zip(docs, collections))):  # leave the server as it was
        client.request("DELETE", f"{collection}/{doc['metadata']['name']}")
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)  # key order kept: FieldsV1 bytes are JSON text in that order
        f.write("\n")
    print(f"{len(captured)} objects and a watch stream of {len(stream)} bytes from {result['server']}",
          file=sys.stderr)


if __name__ == "__main__":
    main()

"""A CRD with a conversion webhook, end to end: kubectl 1.32 against a real kapiserver
process, which calls an HTTPS webhook this test serves from a thread."""
from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml
from twisted.trial import unittest

from kapiserver.server.certs import ensure_certificates
from tests.apiextensions.test_conversion import _rename_spec, webhook_crd
from kapiserver.testing.process import E2E_CONFIG, shared_server

GROUP = "conv.example.com"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        body = json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {
            "uid": req["uid"], "result": {"status": "Success"},
            "convertedObjects": [_rename_spec(o, req["desiredAPIVersion"]) for o in req["objects"]]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class ConversionWebhookKubectlTests(unittest.TestCase):
    def setUp(self):
        certs = tempfile.mkdtemp(prefix="kapiserver-e2e-webhook-")
        bundle = ensure_certificates(certs)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(bundle.path("apiserver.crt"), bundle.path("apiserver.key"))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        crd = webhook_crd(f"https://127.0.0.1:{self.httpd.server_address[1]}/convert",
                          base64.b64encode(bundle.ca_cert_pem).decode())
        crd["metadata"]["name"] = f"widgets.{GROUP}"
        crd["spec"]["group"] = GROUP
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(crd))
        self.addCleanup(lambda: self.kubectl("delete", "crd", f"widgets.{GROUP}", "--wait=false", check=False))
        self.kubectl("wait", "--for", "condition=established", f"crd/widgets.{GROUP}", "--timeout=10s")

    def test_create_in_v1_read_and_edit_in_v2(self):
        widget = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
                  "spec": {"replicas": 3}}
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(widget))
        self.addCleanup(lambda: self.kubectl("delete", f"widgets.v1.{GROUP}", "w", "-n", "default", check=False))
        got = json.loads(self.kubectl("get", f"widgets.v2.{GROUP}", "w", "-n", "default", "-o", "json").stdout)
        self.assertEqual((got["apiVersion"], got["spec"]), (f"{GROUP}/v2", {"size": 3}))
        listed = json.loads(self.kubectl("get", f"widgets.v2.{GROUP}", "-n", "default", "-o", "json").stdout)
        self.assertEqual([i["spec"] for i in listed["items"]], [{"size": 3}])
        self.kubectl("patch", f"widgets.v2.{GROUP}", "w", "-n", "default", "--type=merge", "-p",
                     '{"spec":{"size":8}}')
        v1 = json.loads(self.kubectl("get", f"widgets.v1.{GROUP}", "w", "-n", "default", "-o", "json").stdout)
        self.assertEqual(v1["spec"], {"replicas": 8})

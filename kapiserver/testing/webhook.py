"""A TLS admission webhook server for tests (plain Python: ``http.server`` and ``ssl``).

It runs in a thread of the test process (or, with ``python -m
kapiserver.testing.webhook``, as a process of its own, e.g. inside a network
namespace) and answers AdmissionReviews with a handler the test gives::

    def handler(review: dict) -> dict:      # the request's AdmissionReview
        return allow(review)                # or deny(review, "why"), patch(review, ops)
    # (or a dict path -> handler; paths without one allow)

    certs = WebhookCertificates.create(tmpdir, ["127.0.0.1"])
    with AdmissionWebhookServer(handler, certs) as server:
        server.url("/validate"), certs.ca_bundle  # -> clientConfig.url, clientConfig.caBundle

Every review received is kept in ``server.reviews`` (path, review).

:class:`AdmissionWebhooks` puts such a server in front of a test server's
admission chain: it registers Validating/MutatingWebhookConfigurations whose
``clientConfig`` (URL and caBundle) reaches the test process, waits until the
API server calls them, and deletes them again (docs/testing.md, "Admission
webhooks"); the pytest plugin's ``kube_webhooks`` fixture is one per test.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

if TYPE_CHECKING:
    from kapiserver.testing.process import ServerProcess

Handler = Callable[[dict], dict]


@dataclass(frozen=True)
class WebhookCertificates:
    """A CA and a serving certificate for the webhook's names (IP addresses or DNS names)."""

    cert_path: str
    key_path: str
    ca_pem: bytes

    @property
    def ca_bundle(self) -> str:
        """``clientConfig.caBundle``: the CA certificate, PEM, base64-encoded."""
        return base64.b64encode(self.ca_pem).decode()

    @classmethod
    def create(cls, directory: str, names: Iterable[str]) -> "WebhookCertificates":
        from kapiserver.server.certs import ensure_certificates
        bundle = ensure_certificates(directory, extra_sans=list(names))
        return cls(bundle.path("apiserver.crt"), bundle.path("apiserver.key"), bundle.ca_cert_pem)


def _response(review: dict, **fields: Any) -> dict:
    request = review.get("request") or {}
    return {"apiVersion": review.get("apiVersion") or "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request.get("uid", ""), **fields}}


def allow(review: dict, **fields: Any) -> dict:
    return _response(review, allowed=True, **fields)


def deny(review: dict, message: str, code: int = 403, reason: str = "") -> dict:
    status: dict = {"code": code, "message": message}
    if reason:
        status["reason"] = reason
    return _response(review, allowed=False, status=status)


def patch(review: dict, operations: list, **fields: Any) -> dict:
    """Allow with a JSON patch (``patchType: JSONPatch``, base64 as the protocol wants)."""
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return _response(review, allowed=True, patchType="JSONPatch", patch=encoded, **fields)


class _RequestHandler(BaseHTTPRequestHandler):
    server: "_HTTPServer"
    protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses its connections

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle's algorithm holds the body
        # until the client's delayed ACK (40 ms) on a kept-alive connection
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        try:
            review = json.loads(self.rfile.read(length))
        except ValueError:
            self.send_error(400, "not JSON")
            return
        owner = self.server.owner
        owner.reviews.append((self.path, review))
        owner.headers.append((self.path, dict(self.headers.items())))
        delay = owner.delays.get(self.path.split("?", 1)[0], 0.0)
        if delay:
            time.sleep(delay)
        handler = owner.handler_for(self.path.split("?", 1)[0])
        answer = handler(review) if handler is not None else allow(review)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: "AdmissionWebhookServer"


class AdmissionWebhookServer:
    def __init__(self, handler: Union[Handler, dict[str, Handler], None], certs: WebhookCertificates,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        # one handler for every path, or one per path (others allow)
        self.handler = handler
        self.certs = certs
        self.host = host
        self.port = port
        # path -> seconds to wait before answering (a slow webhook)
        self.delays: dict[str, float] = {}
        self.reviews: list[tuple[str, dict]] = []
        self.headers: list[tuple[str, dict]] = []  # the request headers of each review
        self._httpd: Optional[_HTTPServer] = None

    def start(self) -> "AdmissionWebhookServer":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certs.cert_path, self.certs.key_path)
        httpd = _HTTPServer((self.host, self.port), _RequestHandler)
        httpd.owner = self
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "AdmissionWebhookServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def handler_for(self, path: str) -> Optional[Handler]:
        if isinstance(self.handler, dict):
            return self.handler.get(path)
        return self.handler

    def url(self, path: str) -> str:
        return f"https://{self.host}:{self.port}{path}"

    def reviews_for(self, path: str) -> list[dict]:
        return [review for p, review in self.reviews if p.split("?", 1)[0] == path]

    def client_config(self, path: str) -> dict:
        """A webhook's ``clientConfig`` reaching ``path`` of this server: its URL and the caBundle."""
        return {"url": self.url(path), "caBundle": self.certs.ca_bundle}


ADMISSION_GROUP = "admissionregistration.k8s.io/v1"
# the probe that tells when a configuration is in effect (see AdmissionWebhooks.register)
PROBE_PATH = "/kapiserver-testing/probe"
PROBE_LABEL = "kapiserver.testing/webhook-probe"
PROBE_WEBHOOK = "probe.webhooks.kapiserver.testing"
REGISTER_TIMEOUT_SECONDS = 30.0


class AdmissionWebhooks:
    """An :class:`AdmissionWebhookServer` in the test process, wired into a test server's admission chain.

    ::

        with AdmissionWebhooks(server, tmpdir) as hooks:
            hooks.validating("no-latest.example.com", handler, rules=[{
                "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["deployments"]}])
            ...   # the API server now sends matching requests to handler

    Each registration is one WebhookConfiguration object of one webhook
    (``sideEffects: None``, ``admissionReviewVersions: [v1]``, more fields as
    keyword arguments: ``namespaceSelector``, ``failurePolicy``...), served
    at ``path`` (``/<name>`` by default).  It returns once the API server calls
    it: as kube-apiserver, kapiserver picks configurations up from a watch, a
    moment after they are written.  Leaving the ``with`` (or :meth:`stop`)
    deletes the configurations and stops the server.
    """

    def __init__(self, api: "ServerProcess", directory: str, host: str = "127.0.0.1",
                 certs: Optional[WebhookCertificates] = None) -> None:
        self.api = api
        self.certs = certs or WebhookCertificates.create(directory, [host])
        self.handlers: dict[str, Handler] = {}
        self.server = AdmissionWebhookServer(self.handlers, self.certs, host)
        self.configurations: list[tuple[str, str]] = []  # (resource path, name) to delete at the end

    def start(self) -> "AdmissionWebhooks":
        self.server.start()
        return self

    def stop(self) -> None:
        for path, name in reversed(self.configurations):
            self.api.admin_request("DELETE", f"{path}/{name}")
        self.configurations.clear()
        self.server.stop()

    def __enter__(self) -> "AdmissionWebhooks":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def validating(self, name: str, handler: Handler, rules: list[dict], path: Optional[str] = None,
                   **fields: Any) -> dict:
        """Register a validating webhook ``name`` answered by ``handler``; the configuration written."""
        return self.register("ValidatingWebhookConfiguration", name, handler, rules, path, **fields)

    def mutating(self, name: str, handler: Handler, rules: list[dict], path: Optional[str] = None,
                 **fields: Any) -> dict:
        """Register a mutating webhook ``name`` answered by ``handler`` (use :func:`patch`)."""
        return self.register("MutatingWebhookConfiguration", name, handler, rules, path, **fields)

    def reviews(self, name: str, path: Optional[str] = None) -> list[dict]:
        """The AdmissionReviews webhook ``name`` received, oldest first."""
        return self.server.reviews_for(path or "/" + name)

    def register(self, kind: str, name: str, handler: Handler, rules: list[dict], path: Optional[str] = None,
                 **fields: Any) -> dict:
        path = path or "/" + name
        self.handlers[path] = handler
        webhook = {"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                   "clientConfig": self.server.client_config(path), "rules": rules, **fields}
        # a second webhook in the same object, called only for the probe's dry-run ConfigMaps: the API server
        # swaps a configuration in whole, so once the probe is called, so will the webhook be
        probe = {"name": PROBE_WEBHOOK, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "clientConfig": self.server.client_config(PROBE_PATH),
                 "objectSelector": {"matchLabels": {PROBE_LABEL: name}},
                 "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                            "resources": ["configmaps"]}]}
        configuration = {"apiVersion": ADMISSION_GROUP, "kind": kind, "metadata": {"name": name},
                         "webhooks": [webhook, probe]}
        resource_path = f"/apis/{ADMISSION_GROUP}/{kind.lower()}s"
        status, body = self.api.admin_request("POST", resource_path, configuration)
        if status != 201:
            raise RuntimeError(f"registering {kind} {name} answered {status}: {body.get('message', body)}")
        self.configurations.append((resource_path, name))
        self._wait_until_called(name)
        return body

    def _wait_until_called(self, name: str) -> None:
        probe = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"generateName": "webhook-probe-", "labels": {PROBE_LABEL: name}}}
        deadline = time.monotonic() + REGISTER_TIMEOUT_SECONDS
        while not any(review["request"]["object"]["metadata"]["labels"].get(PROBE_LABEL) == name
                      for review in self.server.reviews_for(PROBE_PATH)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"webhook {name} not called {REGISTER_TIMEOUT_SECONDS}s after its registration")
            # dry run: the webhooks are called (sideEffects None), nothing is stored
            self.api.admin_request("POST", "/api/v1/namespaces/default/configmaps?dryRun=All", probe)
            time.sleep(0.05)


def _label_policy(deny_label: str, add_label: str) -> Handler:
    """The command line's handler: refuse objects carrying ``deny_label``, add ``add_label``."""
    def handler(review: dict) -> dict:
        request = review.get("request") or {}
        labels = (((request.get("object") or {}).get("metadata") or {}).get("labels")) or {}
        if deny_label and deny_label in labels:
            return deny(review, f"label {deny_label} is not allowed here")
        if add_label:
            key, _, value = add_label.partition("=")
            ops = [] if labels else [{"op": "add", "path": "/metadata/labels", "value": {}}]
            ops.append({"op": "add", "path": "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1"),
                        "value": value})
            return patch(review, ops)
        return allow(review)
    return handler


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="A TLS admission webhook for tests.")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--deny-label", default="", help="refuse objects with this label")
    parser.add_argument("--add-label", default="", help="add this key=value label (mutating)")
    parser.add_argument("--ready-file", default="", help="written once the server listens")
    args = parser.parse_args(argv)
    server = AdmissionWebhookServer(_label_policy(args.deny_label, args.add_label),
                                    WebhookCertificates(args.cert, args.key, b""), args.host, args.port).start()
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write(str(server.port))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    os._exit(0)


if __name__ == "__main__":
    main()

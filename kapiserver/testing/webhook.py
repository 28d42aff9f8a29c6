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
from typing import Any, Callable, Iterable, Optional, Union

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

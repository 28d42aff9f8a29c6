"""SIGTERM with requests and watches in flight, on SQLite and on a real etcd.

What a user must see, as with kube-apiserver: ``STOPPING=1`` and a failing ``/readyz`` at once,
requests still served for ``shutdown.delay_seconds``, then every request already received
answered in full (no empty reply), every watch ended with a clean end of stream (the raw
HTTP/1.1 terminating chunk, HTTP/2 END_STREAM; ``kubectl get -w`` exits 0, the Python client's
watch generator simply ends), and exit status 0.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from typing import Any, Optional

from twisted.trial import unittest

from kapiserver.testing.cases import HANG_GUARD
from kapiserver.testing.etcd import shared_etcd, skip_reason
from kapiserver.testing.process import ServerProcess, kubectl_binary
from tests.e2e.rawclients import H2Client, address, connect, head_of, read_until_closed, tls_context

NAMESPACE = "default"
OBJECTS = 300
DELAY = 4.0
LISTS = 30
CREATES = 10


class _Notifications(threading.Thread):
    """systemd's side of NOTIFY_SOCKET, bound again after the fixture's READY=1."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__(daemon=True)
        path = os.path.join(server.workdir, "notify.sock")
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.received: list[str] = []
        self.done = False

    def run(self) -> None:
        while not self.done:
            try:
                self.received.extend(self.sock.recv(4096).decode().splitlines())
            except socket.timeout:
                continue
            except OSError:
                return


def _raw_watch(server: ServerProcess, results: dict, name: str, ready: threading.Event) -> None:
    sock = connect(server, timeout=60)
    sock.sendall(f"GET /api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion=0 HTTP/1.1\r\n"
                 f"Host: 127.0.0.1\r\n\r\n".encode())
    ready.set()
    data = read_until_closed(sock)
    status, body = head_of(data)
    results[name] = (status, body.endswith(b"0\r\n\r\n"), body.count(b'"type":"ADDED"'))


def _python_watch(server: ServerProcess, results: dict, ready: threading.Event) -> None:
    from kubernetes import client, watch
    api = client.CoreV1Api(server.python_client())
    try:
        # with timeout_seconds the client returns when the server ends the stream
        events = watch.Watch().stream(api.list_namespaced_config_map, NAMESPACE, timeout_seconds=600,
                                      _request_timeout=120)
        ready.set()
        results["python"] = ("ended", sum(1 for _ in events))
    except Exception as e:  # the test asserts on this
        results["python"] = ("error", repr(e))
        ready.set()


class GracefulShutdownTests(unittest.TestCase):
    backend = "sqlite"

    def start(self) -> ServerProcess:
        config: dict[str, Any] = {"shutdown": {"delay_seconds": DELAY, "drain_seconds": 10}}
        if self.backend == "etcd":
            reason = skip_reason()
            if reason:
                raise unittest.SkipTest(reason)
            config["storage"] = {"backend": "etcd3", "etcd": {
                "servers": [shared_etcd().endpoint], "prefix": f"/shutdown-{uuid.uuid4().hex[:8]}"}}
        server = ServerProcess(extra_config=config).start()
        self.addCleanup(server.cleanup)
        return server

    def request(self, server: ServerProcess, method: str, path: str, body: Optional[dict] = None,
                connection: Optional[http.client.HTTPSConnection] = None) -> tuple[int, bytes]:
        host, port = address(server)
        conn = connection or http.client.HTTPSConnection(host, port, context=tls_context(server), timeout=60)
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()

    def test_requests_and_watches_in_flight_are_finished(self) -> None:
        server = self.start()
        for i in range(OBJECTS):
            status, _ = self.request(server, "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"fill-{i:03d}"},
                                      "data": {"k": "v" * 16000}})
            self.assertEqual(status, 201)
        notifications = _Notifications(server)
        notifications.start()

        # watches: raw HTTP/1.1, the Python client, kubectl (HTTP/2), a raw HTTP/2 stream
        watches: dict[str, Any] = {}
        threads = []
        for name in ("raw-1", "raw-2"):
            ready = threading.Event()
            threads.append(threading.Thread(target=_raw_watch, args=(server, watches, name, ready), daemon=True))
            threads[-1].start()
            ready.wait(10)
        ready = threading.Event()
        threads.append(threading.Thread(target=_python_watch, args=(server, watches, ready), daemon=True))
        threads[-1].start()
        ready.wait(10)
        kubectl = subprocess.Popen([kubectl_binary(), "--kubeconfig", server.kubeconfig, "get", "configmaps",
                                    "-n", NAMESPACE, "--watch-only", "-o", "name", "-v=6"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        watching = threading.Event()
        kubectl_log: list[str] = []

        def follow_kubectl() -> None:
            assert kubectl.stderr is not None
            for line in kubectl.stderr:
                kubectl_log.append(line)
                if "watch=true" in line and " 200 OK" in line:
                    watching.set()
        threading.Thread(target=follow_kubectl, daemon=True).start()
        self.assertTrue(watching.wait(30), "".join(kubectl_log))
        h2 = H2Client(server)
        self.addCleanup(h2.close)
        h2_watch = h2.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion=0")
        h2.pump(lambda: h2.responses[h2_watch]["status"] is not None)
        self.assertEqual(h2.responses[h2_watch]["status"], 200)
        # read it as a client does, all along (its flow-control window is opened as it reads)
        h2_reader = threading.Thread(target=h2.pump, daemon=True, kwargs={
            "until": lambda: h2.responses[h2_watch]["ended"] or h2.responses[h2_watch]["reset"] is not None,
            "timeout": 90})
        h2_reader.start()
        time.sleep(1.0)  # the Python client's stream is established too

        # requests in flight: LISTs of ~5 MB and creates, all sent before the signal
        answers: list[tuple[str, Any]] = []
        lock = threading.Lock()
        sent = threading.Barrier(LISTS + CREATES + 1)

        def send(method: str, body: Optional[dict]) -> None:
            host, port = address(server)
            conn = http.client.HTTPSConnection(host, port, context=tls_context(server), timeout=60)
            conn.request(method, f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                         body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"})
            sent.wait()
            try:
                response = conn.getresponse()
                outcome = (method, response.status, response.read())
            except Exception as e:
                outcome = (method, type(e).__name__, b"")
            with lock:
                answers.append(outcome)

        workers = [threading.Thread(target=send, args=("GET", None)) for _ in range(LISTS)]
        workers += [threading.Thread(target=send, args=("POST", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "late-"}, "data": {"k": "v"}}))
            for _ in range(CREATES)]
        for worker in workers:
            worker.start()
        sent.wait()
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)

        # during the shutdown delay: /readyz fails, requests are still served
        time.sleep(0.2)
        status, body = self.request(server, "GET", "/readyz")
        self.assertEqual(status, 500)
        self.assertIn(b"readyz check failed", body)
        status, _ = self.request(server, "GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/fill-000")
        self.assertEqual(status, 200)

        code = server.proc.wait(HANG_GUARD)
        exited = time.monotonic() - signalled
        for worker in workers:
            worker.join(30)
        for thread in threads:
            thread.join(30)
        self.assertEqual(kubectl.wait(30), 0, "".join(kubectl_log[-5:]))
        h2_reader.join(30)
        notifications.done = True

        # exit 0, not before the shutdown delay.  How soon after it is not timed: what would make
        # it late (a drain waiting out drain_seconds, then cutting the watches) shows below as
        # watches without their clean end
        self.assertEqual(code, 0)
        self.assertGreaterEqual(exited, DELAY)
        self.assertIn("STOPPING=1", notifications.received)
        self.assertEqual(len(answers), LISTS + CREATES)
        for method, status, payload in answers:
            if method == "GET":
                self.assertEqual(status, 200)
                # complete, not cut (the namespace's kube-root-ca.crt and early creates come too)
                self.assertGreaterEqual(len(json.loads(payload)["items"]), OBJECTS)
            else:
                self.assertEqual(status, 201)
        for name in ("raw-1", "raw-2"):
            status, clean_end, added = watches[name]
            self.assertEqual((status, clean_end), (200, True))
            self.assertGreaterEqual(added, OBJECTS)
        self.assertEqual(watches["python"][0], "ended", watches["python"])
        self.assertGreaterEqual(watches["python"][1], OBJECTS)
        self.assertTrue(h2.responses[h2_watch]["ended"])
        self.assertIsNone(h2.responses[h2_watch]["reset"])
        # the drain began with GOAWAY (NO_ERROR), taking no new stream but finishing this one
        self.assertEqual(h2.goaways[0], (h2_watch, 0))
        self.assertIn(b'"type":"ADDED"', h2.responses[h2_watch]["body"])


class GracefulShutdownEtcdTests(GracefulShutdownTests):
    backend = "etcd"

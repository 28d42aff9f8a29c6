"""Several kapiserver processes on one etcd: they behave as one cluster.

A real etcd and two ``twistd -n kapiserver`` processes that share it and the
same certificate directory (the second starts after the first generated the
CA, so one admin credential works for both).  What a user must see: a write
through one server shows up in a watch on the other, resourceVersions from
one are valid on the other, killing one leaves the other serving, and while
etcd is down requests get a 5xx Status (not a hang) and ``/readyz/etcd`` fails,
until etcd is back.
"""
from __future__ import annotations

import atexit
import http.client
import json
import os
import shutil
import signal
import ssl
import tempfile
import uuid
from typing import Any, Optional

from twisted.trial import unittest

from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.etcd import EtcdServer, skip_reason
from kapiserver.testing.process import ServerProcess

# a guard against a hang, longer than the server's own request timeout (60 s): its answer comes first
REQUEST_TIMEOUT = 90.0
ETCD_MAX_REQUEST_BYTES = 512 * 1024


class _HTTPS:
    """Plain HTTPS requests to one server with the shared admin certificate."""

    def __init__(self, server: ServerProcess, cert_dir: str) -> None:
        host, port = server.server_url.removeprefix("https://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.ctx = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(cert_dir, "admin.crt"), os.path.join(cert_dir, "admin.key"))

    def connect(self, timeout: float = REQUEST_TIMEOUT) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(self, method: str, path: str, body: Optional[dict] = None) -> tuple[int, bytes]:
        conn = self.connect()
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body),
                         headers={"Content-Type": "application/json", "Accept": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: Optional[dict] = None, expect: int = 200) -> Any:
        status, data = self.request(method, path, body)
        if status != expect:
            raise AssertionError(f"{method} {path}: expected {expect}, got {status}: {data[:500]!r}")
        return json.loads(data)

    def watch(self, path: str) -> http.client.HTTPResponse:
        conn = self.connect(timeout=10)
        conn.request("GET", path, headers={"Accept": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise AssertionError(f"watch {path}: {resp.status} {resp.read()[:300]!r}")
        return resp


def _configmap(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _next_event(stream: http.client.HTTPResponse, want_name: str) -> dict:
    """The next watch event about ``want_name`` (bookmarks and other objects skipped)."""
    while True:
        line = stream.readline()
        if not line:
            raise AssertionError(f"watch ended before an event for {want_name}")
        event = json.loads(line)
        if event["object"].get("metadata", {}).get("name") == want_name:
            return event


class _Cluster:
    """One etcd and two servers sharing it and one certificate directory."""

    def __init__(self) -> None:
        # a request limit under the ConfigMap's own (1 MiB) lets a test see etcd refuse a write
        self.etcd = EtcdServer(["--experimental-watch-progress-notify-interval", "500ms",
                                "--max-request-bytes", str(ETCD_MAX_REQUEST_BYTES)])
        self.cert_dir = tempfile.mkdtemp(prefix="kapiserver-ha-certs-")
        self.config = {"cert_dir": self.cert_dir, "storage": {"backend": "etcd3", "etcd": {
            "servers": [self.etcd.endpoint], "prefix": "/registry"}}}
        self.servers: list[ServerProcess] = []
        atexit.register(self.cleanup)
        self.etcd.start()
        # One after the other: the first generates the CA and certificates, the next reuses them.
        for _ in range(2):
            self.servers.append(ServerProcess(self.config).start())
        self.clients = [_HTTPS(s, self.cert_dir) for s in self.servers]

    def alive(self) -> bool:
        return all(s.proc is not None and s.proc.poll() is None for s in self.servers)

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()
        self.etcd.cleanup()
        shutil.rmtree(self.cert_dir, ignore_errors=True)


_cluster: Optional[_Cluster] = None


def cluster() -> _Cluster:
    """The cluster shared by this module's tests (started on first use, stopped at exit)."""
    global _cluster
    if _cluster is None or not _cluster.alive():
        if _cluster is not None:
            _cluster.cleanup()
        _cluster = None
        _cluster = _Cluster()
    return _cluster


class EtcdHATests(unittest.TestCase):
    """Two servers, one etcd, one set of certificates (shared by the module's tests)."""

    def setUp(self) -> None:
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        c = cluster()
        if not c.etcd.running:
            c.etcd.start()
        self.etcd, self.servers, self.config, self.cert_dir = c.etcd, c.servers, c.config, c.cert_dir
        self.a, self.b = c.clients
        self.ns = "ha-" + uuid.uuid4().hex[:8]
        self.a.json("POST", "/api/v1/namespaces", {"metadata": {"name": self.ns}}, expect=201)
        self.path = f"/api/v1/namespaces/{self.ns}/configmaps"

    def test_both_servers_share_one_ca_and_admin_credentials(self):
        """The second server reused the first one's certificates: one kubeconfig reaches both."""
        self.assertEqual(self.servers[0].kubectl("version", "-o", "json").returncode, 0)
        with open(self.servers[0].kubeconfig) as f:
            first = f.read()
        with open(self.servers[1].kubeconfig) as f:
            second = f.read()
        self.assertEqual(first.replace(self.servers[0].server_url, "URL"),
                         second.replace(self.servers[1].server_url, "URL"))
        self.assertEqual(self.b.json("GET", f"/api/v1/namespaces/{self.ns}")["metadata"]["name"], self.ns)

    def test_write_through_one_is_seen_in_a_watch_on_the_other(self):
        """A watch on B, started from a resourceVersion A returned, sees A's writes in order."""
        rv = self.a.json("GET", self.path)["metadata"]["resourceVersion"]
        stream = self.b.watch(f"{self.path}?watch=1&resourceVersion={rv}")
        try:
            created = self.a.json("POST", self.path, _configmap("seen", v="1"), expect=201)
            event = _next_event(stream, "seen")
            self.assertEqual(event["type"], "ADDED")
            self.assertEqual(event["object"]["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"])
            self.assertEqual(event["object"]["data"], {"v": "1"})
            updated = self.a.json("PUT", f"{self.path}/seen", _configmap("seen", v="2"))
            event = _next_event(stream, "seen")
            self.assertEqual((event["type"], event["object"]["data"]), ("MODIFIED", {"v": "2"}))
            self.assertEqual(event["object"]["metadata"]["resourceVersion"], updated["metadata"]["resourceVersion"])
        finally:
            stream.close()

    def test_resource_versions_from_one_are_valid_on_the_other(self):
        """An exact list on B at A's write revision shows that revision; B's RV preconditions A's update."""
        first = self.a.json("POST", self.path, _configmap("one", v="1"), expect=201)
        rv1 = first["metadata"]["resourceVersion"]
        self.a.json("POST", self.path, _configmap("two", v="1"), expect=201)
        listed = self.b.json("GET", f"{self.path}?resourceVersion={rv1}&resourceVersionMatch=Exact")
        self.assertEqual(listed["metadata"]["resourceVersion"], rv1)
        names = {item["metadata"]["name"] for item in listed["items"]}
        self.assertIn("one", names)
        self.assertNotIn("two", names)  # created after rv1
        # Read on B, conditional write on A with B's resourceVersion: accepted; a stale one: 409.
        read = self.b.json("GET", f"{self.path}/two")
        body = _configmap("two", v="2")
        body["metadata"]["resourceVersion"] = read["metadata"]["resourceVersion"]
        self.a.json("PUT", f"{self.path}/two", body)
        status, data = self.b.request("PUT", f"{self.path}/two", body)
        self.assertEqual(status, 409, data)
        self.assertEqual(json.loads(data)["reason"], "Conflict")

    def test_killing_one_server_leaves_the_other_serving(self):
        """SIGKILL of a third server (same etcd, same certificates) does not disturb the others."""
        extra = ServerProcess(self.config).start()
        self.addCleanup(extra.cleanup)
        c = _HTTPS(extra, self.cert_dir)
        c.json("POST", self.path, _configmap("before-kill"), expect=201)
        stream = self.a.watch(f"{self.path}?watch=1&resourceVersion="
                              f"{self.b.json('GET', self.path)['metadata']['resourceVersion']}")
        try:
            extra.stop(sig=signal.SIGKILL)
            self.assertEqual(extra.proc.returncode, -signal.SIGKILL)
            self.b.json("POST", self.path, _configmap("after-kill"), expect=201)
            self.assertEqual(_next_event(stream, "after-kill")["type"], "ADDED")
        finally:
            stream.close()
        names = {i["metadata"]["name"] for i in self.a.json("GET", self.path)["items"]}
        self.assertTrue({"before-kill", "after-kill"} <= names, names)

    def test_a_write_etcd_refuses_answers_etcds_reason(self):
        """Upstream answers a storage error that is no API status with 500 and the etcd client's text."""
        status, body = self.a.request("POST", self.path, _configmap("huge", v="x" * (ETCD_MAX_REQUEST_BYTES + 1)))
        self.assertEqual(status, 500, body[:300])
        payload = json.loads(body)
        self.assertEqual((payload["message"], payload.get("reason", "")), ("etcdserver: request is too large", ""))
        status, _ = self.a.request("GET", f"{self.path}/huge")
        self.assertEqual(status, 404)

    def test_etcd_down_gives_5xx_and_recovers(self):
        """While etcd is stopped: /readyz/etcd fails and writes get a 5xx Status of their own; then all recovers."""
        self.a.json("POST", self.path, _configmap("kept"), expect=201)
        self.etcd.stop()
        try:
            for server in (self.a, self.b):
                status, body = server.request("GET", "/readyz/etcd")
                self.assertGreaterEqual(status, 500, body)
                status, body = server.request("POST", self.path, _configmap("while-down"))
                self.assertGreaterEqual(status, 500, body)
                self.assertLess(status, 600, body)
                payload = json.loads(body)
                self.assertEqual((payload["kind"], payload["status"], payload["code"]), ("Status", "Failure", status))
                # the write failed on etcd's absence; it did not hang until the server's request
                # timeout answered for it (how soon it failed is not timed)
                self.assertNotEqual((status, payload.get("reason")), (504, "Timeout"), payload)
                # the Status says etcd is the cause, without the address only the operator should see
                self.assertIn("etcd", payload["message"])
                self.assertNotIn(self.etcd.endpoint.split("//")[1], payload["message"])
        finally:
            self.etcd.start()
        for server in (self.a, self.b):
            wait_for(lambda: server.request("GET", "/readyz")[0] == 200, timeout=HANG_GUARD)
        self.b.json("POST", self.path, _configmap("after-recovery"), expect=201)
        names = {i["metadata"]["name"] for i in self.a.json("GET", self.path)["items"]}
        self.assertTrue({"kept", "after-recovery"} <= names, names)
        self.assertNotIn("while-down", names)

"""``workers: 2``: two server processes behind one address behave as one server.

Each test finds out which worker serves a connection (the kernel hands each
new connection to one of them) from ``/proc``, so it can watch through one
worker and write through the other.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import time
import uuid
from typing import Any, Optional

import yaml
from twisted.trial import unittest

from kapiserver.testing.etcd import shared_etcd, skip_reason
from kapiserver.testing.process import ServerProcess
from tests.e2e.rawclients import address, connect, descriptor_targets


def worker_pids(server: ServerProcess) -> list[int]:
    assert server.proc is not None
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _socket_inodes(pid: int) -> set[str]:
    return {target[8:-1] for target in descriptor_targets(pid) if target.startswith("socket:[")}


def serving_worker(server: ServerProcess, conn: http.client.HTTPConnection) -> Optional[int]:
    """The pid of the worker holding the server end of ``conn``."""
    assert conn.sock is not None
    client_port = conn.sock.getsockname()[1]
    server_port = address(server)[1]
    inode = None
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
                inode = fields[9]
    for pid in worker_pids(server):
        if inode in _socket_inodes(pid):
            return pid
    return None


def open_connection(server: ServerProcess) -> http.client.HTTPConnection:
    host, port = address(server)
    conn = http.client.HTTPConnection(host, port, timeout=20)
    conn.sock = connect(server, timeout=20)
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client's own connect()
    return conn


def connections_to_each_worker(server: ServerProcess) -> dict[int, http.client.HTTPConnection]:
    """One open connection per worker (the kernel picks the worker: keep trying)."""
    found: dict[int, http.client.HTTPConnection] = {}
    spare = []
    wanted = set(worker_pids(server))
    for _ in range(200):
        conn = open_connection(server)
        call(conn, "GET", "/version")  # the worker has accepted it once it answered
        pid = serving_worker(server, conn)
        if pid is not None and pid not in found:
            found[pid] = conn
        else:
            spare.append(conn)
        if set(found) == wanted:
            break
    for conn in spare:
        conn.close()
    assert set(found) == wanted, f"connections reached workers {sorted(found)} of {sorted(wanted)}"
    return found


def call(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"test": "workers"}},
            "data": {"n": name}}


class WorkersTests(unittest.TestCase):
    """On the embedded store: two processes sharing one SQLite file."""

    def server_config(self) -> dict:
        return {"workers": 2}

    def setUp(self) -> None:
        self.server = ServerProcess(self.server_config()).start()
        self.addCleanup(self.server.cleanup)
        self.namespace = "w-" + uuid.uuid4().hex[:8]
        conn = open_connection(self.server)
        status, _ = call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        conn.close()
        self.assertEqual(status, 201)
        self.cms = f"/api/v1/namespaces/{self.namespace}/configmaps"
        self.ours = "labelSelector=test%3Dworkers"  # not the kube-root-ca.crt ConfigMap

    def test_a_watch_through_one_worker_sees_writes_through_both_in_order(self):
        (pid_a, a), (pid_b, b) = connections_to_each_worker(self.server).items()
        status, listed = call(a, "GET", f"{self.cms}?{self.ours}")
        self.assertEqual(status, 200)
        watch = open_connection(self.server)
        while serving_worker(self.server, watch) is None:  # not yet accepted: ask again
            watch.close()
            watch = open_connection(self.server)
        watch.request("GET", f"{self.cms}?{self.ours}&watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
        stream = watch.getresponse()
        self.assertEqual(stream.status, 200)
        acknowledged = []
        for i in range(40):
            status, created = call(a if i % 2 else b, "POST", self.cms, configmap(f"cm-{i}"))
            self.assertEqual(status, 201, created)
            acknowledged.append((created["metadata"]["name"], int(created["metadata"]["resourceVersion"])))
        seen = []
        while len(seen) < len(acknowledged):
            event = json.loads(stream.readline())
            self.assertEqual(event["type"], "ADDED")
            meta = event["object"]["metadata"]
            seen.append((meta["name"], int(meta["resourceVersion"])))
        watch.close()
        self.assertEqual(seen, sorted(acknowledged, key=lambda nr: nr[1]))
        self.assertEqual(sorted(seen), sorted(acknowledged))

    def test_a_write_through_one_worker_is_read_at_once_through_the_other(self):
        (_, a), (_, b) = connections_to_each_worker(self.server).items()
        for i in range(30):
            writer, reader = (a, b) if i % 2 else (b, a)
            status, created = call(writer, "POST", self.cms, configmap(f"rw-{i}"))
            self.assertEqual(status, 201)
            status, got = call(reader, "GET", f"{self.cms}/rw-{i}")
            self.assertEqual(status, 200, got)
            self.assertEqual(got["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"])
            status, listed = call(reader, "GET", f"{self.cms}?{self.ours}")
            self.assertEqual(len(listed["items"]), i + 1)
        # one resourceVersion sequence: a conflict is a conflict whichever worker is asked
        stale = created
        status, updated = call(a, "PUT", f"{self.cms}/rw-29", {**stale, "data": {"n": "a"}})
        self.assertEqual(status, 200, updated)
        status, refused = call(b, "PUT", f"{self.cms}/rw-29", {**stale, "data": {"n": "b"}})
        self.assertEqual((status, refused["reason"]), (409, "Conflict"))

    def test_a_killed_worker_is_replaced_and_no_acknowledged_write_is_lost(self):
        conns = connections_to_each_worker(self.server)
        victim, survivor = list(conns)
        names = []
        for i in range(60):
            status, created = call(conns[victim if i % 2 else survivor], "POST", self.cms, configmap(f"k-{i}"))
            self.assertEqual(status, 201)
            names.append(created["metadata"]["name"])
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = worker_pids(self.server)
            if len(pids) == 2 and victim not in pids:
                break
            time.sleep(0.1)
        self.assertEqual(len(worker_pids(self.server)), 2, "the killed worker was not replaced")
        self.assertNotIn(victim, worker_pids(self.server))
        # the survivor served throughout; the replacement serves once it is ready
        status, listed = call(conns[survivor], "GET", f"{self.cms}?{self.ours}")
        self.assertEqual(sorted(i["metadata"]["name"] for i in listed["items"]), sorted(names))
        replacement = next(p for p in worker_pids(self.server) if p != survivor)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            conn = open_connection(self.server)
            status, listed = call(conn, "GET", f"{self.cms}?{self.ours}")
            if serving_worker(self.server, conn) == replacement:
                self.assertEqual(len(listed["items"]), len(names))
                break
            conn.close()
        else:
            self.fail("no connection reached the replacement worker")
        out = self.server.kubectl("get", "configmaps", "-n", self.namespace, "-o", "name").stdout
        self.assertEqual(len(out.split()), len(names) + 1)  # and kube-root-ca.crt

    def test_the_workers_end_with_their_supervisor(self):
        workers = worker_pids(self.server)
        assert self.server.proc is not None
        os.kill(self.server.proc.pid, signal.SIGKILL)
        self.server.proc.wait(10)
        deadline = time.monotonic() + 30  # each drains as on SIGTERM
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in workers):
            time.sleep(0.1)
        self.assertEqual([pid for pid in workers if os.path.exists(f"/proc/{pid}")], [])

    def test_the_leader_elected_controllers_run_in_one_worker(self):
        kubectl = self.server.kubectl
        lease = yaml.safe_load(kubectl("get", "lease", "-n", "kube-system", "kapiserver-controllers",
                                       "-o", "yaml").stdout)
        holder = lease["spec"]["holderIdentity"]
        self.assertTrue(holder)
        with open(self.server.log_path, errors="replace") as f:
            log = f.read()
        started = [line for line in log.splitlines() if "started" in line and "controllers" in line
                   and "controllers.manager" in line]
        self.assertEqual(len(started), 1, started)
        # and they work: the namespace controller empties and removes a deleted namespace
        kubectl("delete", "namespace", self.namespace, "--wait=true", "--timeout=60s")
        gone = kubectl("get", "namespace", self.namespace, check=False)
        self.assertNotEqual(gone.returncode, 0)


class EtcdWorkersTests(WorkersTests):
    """On etcd: two processes sharing one etcd (as two kube-apiservers do)."""

    def server_config(self) -> dict:
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        return {"workers": 2, "storage": {"backend": "etcd3", "etcd": {
            "servers": [shared_etcd().endpoint], "prefix": f"/workers-{uuid.uuid4().hex[:8]}"}}}


class AuditWorkersTests(unittest.TestCase):
    def test_each_worker_writes_its_own_audit_log(self):
        workdir = self.mktemp()
        os.makedirs(workdir)
        policy = os.path.abspath(os.path.join(workdir, "policy.yaml"))
        with open(policy, "w") as f:
            yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}, f)
        log = os.path.abspath(os.path.join(workdir, "audit.log"))
        server = ServerProcess({"workers": 2, "audit": {"policy_file": policy, "log_path": log}}).start()
        self.addCleanup(server.cleanup)
        for pid, conn in connections_to_each_worker(server).items():
            status, _ = call(conn, "GET", f"/api/v1/namespaces?worker={pid}")
            self.assertEqual(status, 200)
        server.stop()
        for index in (0, 1):
            with open(os.path.join(workdir, f"audit.worker-{index}.log")) as f:
                events = [json.loads(line) for line in f]
            self.assertTrue(any("worker=" in e["requestURI"] for e in events), events[-3:])
        self.assertFalse(os.path.exists(log))

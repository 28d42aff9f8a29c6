"""The server process as an operator meets it: twistd, systemd notifications, certificates, SIGTERM."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from cryptography.hazmat.primitives import serialization
from twisted.trial import unittest

from kapiserver import kube_version

from tests.server.process import ServerProcess, https_get, server_port, write_config

KUBECTL = shutil.which("kubectl")


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]

CURL = shutil.which("curl")


class ServerProcessTests(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.cert_dir = os.path.join(self.dir, "certs")
        self.kubeconfig = os.path.join(self.dir, "admin.kubeconfig")
        self.config_data = {
            "secure_port": 0, "cert_dir": self.cert_dir, "data_dir": os.path.join(self.dir, "data"),
            "admin_kubeconfig": self.kubeconfig, "shutdown": {"drain_seconds": 2}}
        self.config = write_config(self.dir, self.config_data)
        sock_dir = tempfile.mkdtemp(prefix="kap-sd-")  # AF_UNIX paths must be short
        self.addCleanup(shutil.rmtree, sock_dir, True)
        self.notify_path = os.path.join(sock_dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(self.sock.close)
        self.sock.bind(self.notify_path)

    def start(self, **env: str) -> ServerProcess:
        server = ServerProcess(self.dir, self.config, env={"NOTIFY_SOCKET": self.notify_path, **env})
        self.addCleanup(server.kill)
        return server

    def wait_for(self, message: bytes, timeout: float = 60) -> list[bytes]:
        """Collect notifications until ``message`` arrives; returns everything received."""
        seen: list[bytes] = []
        deadline = time.monotonic() + timeout
        while message not in seen:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                seen.append(self.sock.recv(1024))
            except socket.timeout:
                self.fail(f"no {message!r} within {timeout}s; got {seen!r}")
        return seen

    def test_ready_watchdog_sigterm(self) -> None:
        server = self.start(WATCHDOG_USEC="400000")
        self.wait_for(b"READY=1")
        port = server_port(self.kubeconfig)
        self.assertNotEqual(port, 0)
        # READY=1 was sent only once /readyz passes.
        self.assertEqual(https_get(port, "/readyz", self.cert_dir), (200, "ok"))
        # With WatchdogSec= systemd expects pings at least every WATCHDOG_USEC.
        self.wait_for(b"WATCHDOG=1", timeout=5)
        self.wait_for(b"WATCHDOG=1", timeout=5)
        # The admin client certificate authenticates; without one a caller is system:anonymous, who may
        # probe health (a load balancer) and nothing else.
        self.assertEqual(https_get(port, "/livez", self.cert_dir, client_cert=False), (200, "ok"))
        self.assertEqual(https_get(port, "/api/v1/namespaces", self.cert_dir, client_cert=False)[0], 403)
        self.assertEqual(https_get(port, "/api/v1/namespaces", self.cert_dir)[0], 200)
        if KUBECTL:
            out = subprocess.run([KUBECTL, "--kubeconfig", self.kubeconfig, "version", "-o", "json"],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(json.loads(out.stdout)["serverVersion"]["gitVersion"], kube_version.GIT_VERSION)
        if CURL:
            out = subprocess.run([CURL, "-s", "--http2", "-w", " %{http_version}", "--cacert",
                                  os.path.join(self.cert_dir, "ca.crt"), "--cert", os.path.join(self.cert_dir, "admin.crt"),
                                  "--key", os.path.join(self.cert_dir, "admin.key"),
                                  f"https://127.0.0.1:{port}/readyz"], capture_output=True, text=True, timeout=30)
            self.assertEqual(out.stdout, "ok 2")  # HTTP/2 via ALPN, client certificate honoured
        server.proc.send_signal(15)
        self.wait_for(b"STOPPING=1", timeout=10)
        self.assertEqual(server.proc.wait(30), 0)
        self.assertEqual(server.stderr(), "")

    def test_a_stuck_worker_is_killed_and_replaced(self) -> None:
        self.config = write_config(self.dir, {**self.config_data, "workers": 2})
        server = self.start(WATCHDOG_USEC="1000000")
        self.wait_for(b"READY=1")
        stuck = children(server.proc.pid)[0]
        os.kill(stuck, signal.SIGSTOP)  # its reactor no longer runs: no more WATCHDOG=1 to the supervisor
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            workers = children(server.proc.pid)
            if stuck not in workers and len(workers) == 2:
                break
            time.sleep(0.1)
        self.assertNotIn(stuck, children(server.proc.pid))
        self.assertEqual(len(children(server.proc.pid)), 2)
        self.wait_for(b"WATCHDOG=1", timeout=5)  # the server as a whole is alive: systemd keeps it
        port = server_port(self.kubeconfig)
        for _ in range(4):  # whichever worker answers
            self.assertEqual(https_get(port, "/api/v1/namespaces", self.cert_dir)[0], 200)
        self.assertIn("missed its watchdog", open(server.log_path).read())
        self.assertEqual(server.stop(), 0)

    def test_restart_reuses_certificates_and_updates_port(self) -> None:
        server = self.start()
        self.wait_for(b"READY=1")
        first_port = server_port(self.kubeconfig)
        with open(os.path.join(self.cert_dir, "ca.crt"), "rb") as f:
            ca = f.read()
        self.assertEqual(server.stop(), 0)
        # Hold the old port so the second start must pick a new one.
        holder = socket.socket()
        self.addCleanup(holder.close)
        holder.bind(("127.0.0.1", first_port))
        server = self.start()
        self.wait_for(b"READY=1")
        second_port = server_port(self.kubeconfig)
        self.assertNotEqual(first_port, second_port)
        with open(os.path.join(self.cert_dir, "ca.crt"), "rb") as f:
            self.assertEqual(f.read(), ca)
        self.assertEqual(https_get(second_port, "/healthz?verbose", self.cert_dir)[0], 200)
        self.assertEqual(server.stop(), 0)


class EmptyDatabaseFileTests(unittest.TestCase):
    def test_zero_length_database_is_refused_with_one_line(self) -> None:
        from kapiserver.testing.process import ServerProcess as E2EServer

        server = E2EServer()
        self.addCleanup(shutil.rmtree, server.workdir, True)
        os.makedirs(os.path.join(server.workdir, "data"))
        path = os.path.join(server.workdir, "data", "kapiserver.db")
        open(path, "wb").close()  # a database that was truncated
        with self.assertRaises(RuntimeError) as caught:
            server.start()
        self.assertIn("exited with 1", str(caught.exception))
        # the one line on stderr (the log has it too, as every startup error)
        lines = [line for line in server.log().splitlines() if line.startswith("kapiserver: ")]
        self.assertEqual(len(lines), 1, server.log())
        self.assertIn("the SQLite database file is empty (0 bytes)", lines[0])
        self.assertEqual(os.path.getsize(path), 0, "the file must be left as it was")


class DamagedSigningKeyTests(unittest.TestCase):
    def test_a_damaged_service_account_key_is_refused_with_one_line(self) -> None:
        """The signing key is checked as Go checks it (not OpenSSL's slow primality tests):
        a key whose numbers disagree does not start the server."""
        from kapiserver.server.certs import ensure_certificates
        from kapiserver.testing.process import ServerProcess as E2EServer

        from tests.auth.test_private_key import Numbers

        server = E2EServer()
        self.addCleanup(shutil.rmtree, server.workdir, True)
        certs = os.path.join(server.workdir, "certs")
        ensure_certificates(certs, [])
        key_path = os.path.join(certs, "sa.key")
        with open(key_path, "rb") as f:
            numbers = Numbers.of(serialization.load_pem_private_key(f.read(), None))
        with open(key_path, "wb") as f:
            f.write(dataclasses.replace(numbers, iqmp=numbers.iqmp + 1).pem())
        with self.assertRaises(RuntimeError) as caught:
            server.start()
        self.assertIn("exited with 1", str(caught.exception))
        lines = [line for line in server.log().splitlines() if line.startswith("kapiserver: ")]
        self.assertEqual(lines, [f"kapiserver: {key_path}: invalid RSA key: its CRT values do not match its primes "
                                 "and exponent"], server.log())

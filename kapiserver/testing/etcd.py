"""A real etcd for tests: free loopback ports, a temporary data dir, clean stop.

Tests of the etcd backend (and end-to-end tests of the server on etcd) need a
genuine etcd, not a fake, because the point is to match its semantics.  This
fixture starts ``/usr/bin/etcd`` (or ``$KAPISERVER_TEST_ETCD``) as a single-member cluster bound to
127.0.0.1, waits until it answers, and can stop it, kill it, or restart it on
the same ports and data (for fault tests).

Starting blocks the calling thread for well under a second; that is fine in
test set-up code and is why this module lives under ``kapiserver.testing``,
never in the server.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Optional

# Debian's etcd-server (3.4 on bookworm); KAPISERVER_TEST_ETCD names another build (e.g. 3.5,
# whose answers to progress requests the watch cache relies on: docs/etcd.md).
ETCD_BINARY = os.environ.get("KAPISERVER_TEST_ETCD", "/usr/bin/etcd")


def etcd_available() -> bool:
    """True when the etcd binary the fixture needs is installed."""
    return os.access(ETCD_BINARY, os.X_OK)


def skip_reason() -> Optional[str]:
    """The SkipTest message for etcd tests, or None when etcd can run."""
    if etcd_available():
        return None
    return f"etcd is not installed at {ETCD_BINARY} (Debian package etcd-server); etcd backend tests skipped"


def free_port() -> int:
    """An ephemeral TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scratch_root() -> Optional[str]:
    # tmpfs makes etcd's fsyncs nearly free, which keeps the suite fast.
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class EtcdServer:
    """One etcd process on 127.0.0.1 with its own temporary data directory.

    ``extra_args`` are appended to the command line (e.g. TLS flags or
    ``--experimental-watch-progress-notify-interval=500ms``).  ``scheme`` is
    ``https`` when the extra args configure client TLS.
    """

    def __init__(self, extra_args: Optional[list[str]] = None, scheme: str = "http", name: str = "default",
                 host: str = "127.0.0.1", command_prefix: tuple[str, ...] = ()):
        self.extra_args = list(extra_args or [])
        self.scheme = scheme
        # a member of a cluster (:class:`EtcdCluster`) has a name and an address of its own, and may
        # run under another command (``ip netns exec <ns>``: in a network namespace)
        self.name = name
        self.host = host
        self.command_prefix = command_prefix
        self.initial_cluster = ""  # ``name=peer-url,...``; this member alone when empty
        self.client_port = free_port()
        self.peer_port = free_port()
        while self.peer_port == self.client_port:
            self.peer_port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="kapiserver-etcd-", dir=_scratch_root())
        self.data_dir = os.path.join(self.workdir, "data")
        self.log_path = os.path.join(self.workdir, "etcd.log")
        self.process: Optional[subprocess.Popen] = None
        atexit.register(self.cleanup)

    @property
    def endpoint(self) -> str:
        """The client URL, e.g. ``http://127.0.0.1:40123``."""
        return f"{self.scheme}://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    def command(self) -> list[str]:
        client = self.endpoint
        # A cluster's members pre-vote, as etcd 3.5 (every release kube-apiserver 1.32 supports) does by
        # default and 3.4 (Debian's) does not: without it a member cut off from its peers keeps raising
        # its term, and when it is back it deposes the leader at a moment of its own, an election after
        # the fault is over.
        cluster = ["--pre-vote=true"] if self.initial_cluster else []
        return [*self.command_prefix, ETCD_BINARY, "--name", self.name, "--data-dir", self.data_dir,
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", self.initial_cluster or f"{self.name}={self.peer_url}",
                "--initial-cluster-state", "new", *cluster, *self.extra_args]

    def start(self, timeout: float = 15.0) -> "EtcdServer":
        """Start etcd (again, on the same ports and data) and wait until it serves."""
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting (a cluster's first member serves only once a quorum is up)."""
        if self.process is not None and self.process.poll() is None:
            return
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Wait until the launched etcd answers on its client URL."""
        if self.process is None:
            raise RuntimeError("etcd was not launched")
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        process = self.process
        assert process is not None
        deadline = time.monotonic() + timeout
        process = self.process
        assert process is not None  # (started)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"etcd exited with {process.returncode}; log:\n{self.log_tail()}")
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd did not become ready within {timeout}s; log:\n{self.log_tail()}")

    def _answers(self) -> bool:
        if self.scheme != "http":
            # A TLS etcd with client-cert auth cannot be probed without the
            # test's certificates; an open port is a good enough signal
            # (etcd opens client listeners only once it is ready to serve).
            try:
                with socket.create_connection((self.host, self.client_port), timeout=0.2):
                    return True
            except OSError:
                return False
        req = urllib.request.Request(f"{self.endpoint}/v3/maintenance/status", data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=0.5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def status(self) -> Optional[dict]:
        """This member's ``/v3/maintenance/status`` (its id, the leader's, the raft index), None if it does not answer."""
        req = urllib.request.Request(f"{self.endpoint}/v3/maintenance/status", data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:
                return json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def stop(self, kill: bool = False) -> None:
        """Stop etcd (SIGTERM, or SIGKILL with ``kill=True``) and wait for it; data is kept."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, kill: bool = False) -> None:
        """Stop then start on the same ports and data directory."""
        self.stop(kill=kill)
        self.start()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def cleanup(self) -> None:
        """Stop etcd and delete its data directory (idempotent)."""
        self.stop(kill=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
        try:
            atexit.unregister(self.cleanup)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return ""


class EtcdCluster:
    """Several etcd members forming one cluster; ``members`` are :class:`EtcdServer` s made by the caller
    (each with its own name, address and command prefix)."""

    def __init__(self, members: list[EtcdServer]) -> None:
        self.members = members
        cluster = ",".join(f"{m.name}={m.peer_url}" for m in members)
        for member in members:
            member.initial_cluster = cluster

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def start(self, timeout: float = 30.0) -> "EtcdCluster":
        for member in self.members:  # all at once: none serves clients before a quorum has met
            member.launch()
        for member in self.members:
            member.wait_ready(timeout)
        return self

    def leader(self, among: Optional[list[EtcdServer]] = None) -> Optional[EtcdServer]:
        """The member that ``among`` (default: all running members) agree leads, None while they do not."""
        ids: dict[str, EtcdServer] = {}
        leaders = set()
        for member in among if among is not None else [m for m in self.members if m.running]:
            status = member.status()
            if status is None:
                return None
            ids[status["header"]["member_id"]] = member
            leaders.add(status.get("leader", "0"))
        if len(leaders) != 1:
            return None
        return ids.get(leaders.pop())

    def transfer_leadership(self, to: EtcdServer) -> bool:
        """Ask the leader to hand over to ``to`` (etcd's MoveLeader); True once it did."""
        leader, status = self.leader(), to.status()
        if leader is None or status is None:
            return False
        if leader is to:
            return True
        body = json.dumps({"targetID": status["header"]["member_id"]}).encode()
        req = urllib.request.Request(f"{leader.endpoint}/v3/maintenance/transfer-leadership", data=body,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10):
                pass
        except (urllib.error.URLError, OSError):
            return False
        return self.leader() is to

    def cleanup(self) -> None:
        for member in self.members:
            member.cleanup()


_shared: Optional[EtcdServer] = None


def shared_etcd() -> EtcdServer:
    """A process-wide etcd shared by tests that isolate themselves by key prefix.

    Started on first use and stopped when the test process exits.
    """
    global _shared
    if _shared is None or not _shared.running:
        if _shared is not None:
            _shared.cleanup()
        _shared = EtcdServer(["--experimental-watch-progress-notify-interval", "500ms"]).start()
    return _shared

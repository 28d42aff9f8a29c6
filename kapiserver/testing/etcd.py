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

    def __init__(self, extra_args: Optional[list[str]] = None, scheme: str = "http"):
        self.extra_args = list(extra_args or [])
        self.scheme = scheme
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
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    def command(self) -> list[str]:
        client = f"{self.scheme}://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [ETCD_BINARY, "--name", "default", "--data-dir", self.data_dir,
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"default={peer}", "--initial-cluster-state", "new",
                *self.extra_args]

    def start(self, timeout: float = 15.0) -> "EtcdServer":
        """Start etcd (again, on the same ports and data) and wait until it serves."""
        if self.process is not None and self.process.poll() is None:
            return self
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
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
                with socket.create_connection(("127.0.0.1", self.client_port), timeout=0.2):
                    return True
            except OSError:
                return False
        req = urllib.request.Request(f"{self.endpoint}/v3/maintenance/status", data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=0.5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

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

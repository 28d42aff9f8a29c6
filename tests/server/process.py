"""Run ``twistd -n kapiserver`` as a child process for tests, on an ephemeral port."""
from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from typing import Optional

import yaml

from kapiserver.testing.process import child_env, twistd_command


def write_config(directory: str, data: dict) -> str:
    path = os.path.join(directory, "apiserver.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


def run_to_exit(cwd: str, config_path: Optional[str], *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the server expecting it to exit on its own (bad configuration)."""
    return subprocess.run(twistd_command(config_path, *extra), cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=timeout)


class ServerProcess:
    """A running server child; ``stop()`` (SIGTERM) and ``kill()`` clean it up."""

    def __init__(self, cwd: str, config_path: str, env: Optional[dict] = None) -> None:
        self.cwd = cwd
        self.log_path = os.path.join(cwd, "server.log")
        self.log = open(self.log_path, "w")
        self.err_path = os.path.join(cwd, "server.err")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(twistd_command(config_path), cwd=cwd, env=child_env(**(env or {})),
                                     stdout=self.log, stderr=self.err)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close()

    def close(self) -> None:
        self.log.close()
        self.err.close()

    def stderr(self) -> str:
        with open(self.err_path) as f:
            return f.read()


def wait_for_file(path: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode} before writing {path}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not written within {timeout}s")
        time.sleep(0.05)


def server_port(kubeconfig_path: str) -> int:
    with open(kubeconfig_path) as f:
        server = yaml.safe_load(f)["clusters"][0]["cluster"]["server"]
    return int(server.rsplit(":", 1)[1])


def https_get(port: int, path: str, cert_dir: str, client_cert: bool = True) -> tuple[int, str]:
    """GET over TLS (HTTP/1.1), verifying the server against the cluster CA."""
    ctx = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.crt"))
    if client_cert:
        ctx.load_cert_chain(os.path.join(cert_dir, "admin.crt"), os.path.join(cert_dir, "admin.key"))
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

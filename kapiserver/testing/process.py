"""kapiserver as a real process (``twistd -n kapiserver``) for end-to-end tests.

The server listens on an ephemeral TLS port; the fixture learns that it is
ready the way systemd does, from ``READY=1`` on a NOTIFY_SOCKET it creates,
then reads the admin kubeconfig the server wrote.  One process is shared by
all tests of a module (clients are synchronous, the server is another
process, so tests may block while they talk to it).
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import json
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

import yaml

from kapiserver.testing import TEST_ADVERTISE_ADDRESS

READY_TIMEOUT_SECONDS = 30.0
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def twistd_command(config_path: Optional[str], *extra: str, plugin: str = "kapiserver") -> list[str]:
    """``twistd -n kapiserver`` (or another twistd ``plugin``) with this interpreter.

    (``python -m twisted.scripts.twistd`` does nothing: that module has no
    __main__ block, so call ``run()`` as the console script does.)
    """
    cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()",
           "-n", "--pidfile=", plugin]
    if config_path is not None:
        cmd += ["--config", config_path]
    return cmd + list(extra)


def child_env(**extra: str) -> dict:
    """The environment for a server child: the checkout first on sys.path (plugin discovery)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env

# The shared end-to-end server compacts often, so tests can see 410 Gone quickly.
E2E_CONFIG = {"storage": {"sqlite": {"compaction_interval_seconds": 1, "compaction_retain_revisions": 200}}}


class ServerProcess:
    """``reset=True``: the server serves ``/debug/kapiserver/{snapshot,reset}`` (``testing.enable_reset``)
    and ``start()`` snapshots its bootstrap state, which :meth:`reset` brings back."""

    def __init__(self, extra_config: Optional[dict] = None, extra_args: tuple[str, ...] = (),
                 workdir: Optional[str] = None, command_prefix: tuple[str, ...] = (), reset: bool = False) -> None:
        self.workdir = workdir or tempfile.mkdtemp(prefix="kapiserver-e2e-")
        self.extra_config = extra_config or {}
        self.resettable = reset
        self.extra_args = extra_args
        # run the server under another command (``ip netns exec <ns>``: a network namespace)
        self.command_prefix = command_prefix
        self.proc: Optional[subprocess.Popen] = None
        self.kubeconfig = os.path.join(self.workdir, "admin.kubeconfig")
        self.config_path = os.path.join(self.workdir, "apiserver.yaml")
        self.log_path = os.path.join(self.workdir, "server.log")
        self.notifications: list[str] = []
        self.server_url = ""

    @property
    def cert_dir(self) -> str:
        """Where the server keeps its CA, serving and admin certificates (generated at first start)."""
        return os.path.join(self.workdir, "certs")

    @property
    def ca_path(self) -> str:
        """The cluster CA certificate (PEM): it signed the serving and client certificates."""
        return os.path.join(self.cert_dir, "ca.crt")

    def write_config(self) -> None:
        config: dict[str, Any] = {
            "secure_port": 0,
            "bind_address": "127.0.0.1",
            "workers": 1,  # one process unless a test asks for more (tests/e2e/test_workers.py)
            "advertise_address": TEST_ADVERTISE_ADDRESS,  # Endpoints refuse loopback addresses
            "cert_dir": self.cert_dir,
            "data_dir": os.path.join(self.workdir, "data"),
            "admin_kubeconfig": self.kubeconfig,
        }
        if self.resettable:
            config["testing"] = {"enable_reset": True}
        deep_merge(config, self.extra_config)
        with open(self.config_path, "w") as f:
            yaml.safe_dump(config, f)

    def start(self, on_ready: Optional[Callable[[subprocess.Popen], None]] = None) -> "ServerProcess":
        """Spawn the server and wait for its READY=1; ``on_ready(proc)`` is called the moment it
        comes (a benchmark reads what the process had used by then)."""
        self.write_config()
        sock_path = os.path.join(self.workdir, "notify.sock")
        if os.path.exists(sock_path):
            os.unlink(sock_path)
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(sock_path)
        notify.settimeout(0.2)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([*self.command_prefix, *twistd_command(self.config_path, *self.extra_args)],
                                     stdout=log,
                                     stderr=subprocess.STDOUT, env=child_env(NOTIFY_SOCKET=sock_path),
                                     cwd=self.workdir)
        log.close()
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"kapiserver exited with {self.proc.returncode}:\n{self.log()}")
                try:
                    message = notify.recv(4096).decode()
                except socket.timeout:
                    continue
                self.notifications.extend(message.splitlines())
                if "READY=1" in message.splitlines():
                    if on_ready is not None:
                        on_ready(self.proc)
                    break
            else:
                raise RuntimeError(f"kapiserver not ready after {READY_TIMEOUT_SECONDS}s:\n{self.log()}")
        finally:
            notify.close()
        with open(self.kubeconfig) as f:
            self.server_url = yaml.safe_load(f)["clusters"][0]["cluster"]["server"]
        atexit.register(self.stop)
        if self.resettable:
            self.snapshot()
        return self

    # ------------------------------------------------------------ per-test isolation

    def snapshot(self) -> int:
        """Save what the store holds now as the state :meth:`reset` returns to; the revision saved.

        ``start()`` took one of the bootstrap state; call it again to keep what a test
        suite set up once (CRDs, namespaces) across resets."""
        return int(self._debug_post("snapshot")["revision"])

    def reset(self) -> dict:
        """The store back to the snapshot, without a restart: what was created since is
        deleted, what was changed or deleted is written back, each at a new resourceVersion
        with its watch event. Returns the server's counts (``deleted``, ``rewritten``,
        ``recreated``) and the ``revision`` after it."""
        return self._debug_post("reset")

    def _debug_post(self, action: str) -> dict:
        status, body = self.admin_request("POST", f"/debug/kapiserver/{action}")
        if status != 200:
            hint = " (start the ServerProcess with reset=True)" if status == 404 else ""
            raise RuntimeError(f"kapiserver {action} answered {status}: {body.get('message', body)}{hint}")
        return body

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-5000:]
        except OSError:
            return ""

    def log_lines(self) -> list[str]:
        """Every line the server logged so far."""
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            return []

    def failures(self, limit: int = 10) -> list[str]:
        """The last ``limit`` failures the server logged with a traceback (a generic 500's cause), each
        the logged line and its traceback: what a test that saw a 5xx reports beside it."""
        lines = self.log_lines()
        found: list[str] = []
        for index, line in enumerate(lines):
            if index + 1 < len(lines) and lines[index + 1].lstrip().startswith("Traceback"):
                block = [line]
                for following in lines[index + 1:]:
                    if not following.startswith(("\t", " ")):
                        break
                    block.append(following)
                found.append("\n".join(block))
        return found[-limit:]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> Optional[int]:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------ clients

    def kubectl(self, *args: str, input: Optional[str] = None, check: bool = True, env: Optional[dict] = None,
                timeout: float = 60.0) -> subprocess.CompletedProcess:
        cmd = [kubectl_binary(), "--kubeconfig", self.kubeconfig, *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                                env=dict(os.environ, **(env or {})))
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def python_client(self, kubeconfig: Optional[str] = None):
        """An ApiClient of the official ``kubernetes`` package for this server (as ``kubeconfig``'s user)."""
        from kubernetes import client, config
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig or self.kubeconfig, client_configuration=configuration)
        return client.ApiClient(configuration)

    def admin_request(self, method: str, path: str, body: Optional[dict] = None,
                      timeout: float = 30.0) -> tuple[int, dict]:
        """One HTTPS request as the admin (client certificate), with no client library: (status, JSON body)."""
        context = ssl.create_default_context(cafile=self.ca_path)
        context.load_cert_chain(os.path.join(self.cert_dir, "admin.crt"), os.path.join(self.cert_dir, "admin.key"))
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            with error:
                return error.code, json.loads(error.read() or b"{}")

    def kubeconfig_for(self, user: str, groups: tuple[str, ...] = ()) -> str:
        """A kubeconfig acting as ``user`` (in ``groups``): a client certificate signed by the cluster CA.

        The file sits beside the admin kubeconfig; its client certificate and key
        are files too (``<name>.crt``/``.key``), for raw HTTPS clients.
        """
        from kapiserver.server.certs import issue_client_certificate
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        path = os.path.join(self.workdir, f"user-{safe}.kubeconfig")
        if os.path.exists(path):
            return path
        cert, key = issue_client_certificate(self.cert_dir, user, groups)
        cert_path = os.path.join(self.workdir, f"user-{safe}.crt")
        key_path = os.path.join(self.workdir, f"user-{safe}.key")
        for file_path, data in ((cert_path, cert), (key_path, key)):
            with open(file_path, "wb") as f:
                f.write(data)
        with open(self.kubeconfig) as f:
            admin = yaml.safe_load(f)
        admin["users"] = [{"name": safe, "user": {"client-certificate": cert_path, "client-key": key_path}}]
        for context in admin["contexts"]:
            context["context"]["user"] = safe
        with open(path, "w") as f:
            yaml.safe_dump(admin, f)
        return path


def kubectl_binary() -> str:
    """kubectl 1.32 as the issue asks, else whatever kubectl is on PATH."""
    for candidate in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.32", shutil.which("kubectl.1.32") or "",
                      shutil.which("kubectl") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("kubectl is not installed")


def deep_merge(base: dict, extra: dict) -> None:
    """Merge ``extra`` into ``base`` in place: mappings key by key, anything else replaced."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value


_shared: dict[str, tuple[ServerProcess, dict[str, Any]]] = {}


def shared_server(name: str = "default", **kwargs: Any) -> ServerProcess:
    """One server process per name for the whole test run (stopped at exit).

    Every test asking for a name must ask with the same arguments: the first one to run
    starts the server, and which test that is depends on how the run is split across
    workers (a test that asked for the default server without its fast compaction once
    left another waiting a minute for a 410)."""
    shared = _shared.get(name)
    if shared is not None and shared[1] != kwargs:
        raise ValueError(f"the shared server {name!r} was started with {shared[1]!r}; "
                         f"a test asked for it with {kwargs!r}")
    server = shared[0] if shared is not None else None
    if server is None or server.proc is None or server.proc.poll() is not None:
        server = ServerProcess(**kwargs).start()
        atexit.register(server.cleanup)  # (its working directory too, not only the process)
        _shared[name] = (server, kwargs)
    return server

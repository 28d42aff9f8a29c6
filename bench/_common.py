"""Helpers shared by the server benchmarks: processes, a keep-alive HTTPS client, timing, tables.

Every benchmark drives a real ``twistd -n kapiserver`` process (started with
``kapiserver.testing.process.ServerProcess``) over HTTPS with the admin client
certificate, so the numbers include TLS, the request filters and the Store, as
a user would see them.  Clients run in threads with one keep-alive connection
each; the server is one Python process, so on a small machine the client
threads compete with it for CPU: read the numbers as a lower bound.
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import re
import selectors
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from kapiserver.testing.etcd import EtcdServer  # noqa: E402
from kapiserver.testing.process import ServerProcess  # noqa: E402

BACKENDS = ("sqlite", "etcd")


# ------------------------------------------------------------------ processes

def start_etcd(tmpfs: bool = False) -> EtcdServer:
    """A throw-away single-member etcd on loopback ports, with progress notifications on.

    Its data lives on disk like SQLite's (the test fixture's default is tmpfs,
    where fsync is free), unless ``tmpfs``.
    """
    etcd = EtcdServer(["--experimental-watch-progress-notify-interval", "500ms",
                       "--quota-backend-bytes", str(4 << 30)])
    if not tmpfs:
        shutil.rmtree(etcd.workdir, ignore_errors=True)
        etcd.workdir = tempfile.mkdtemp(prefix="kapi-bench-etcd-")
        etcd.data_dir = os.path.join(etcd.workdir, "data")
        etcd.log_path = os.path.join(etcd.workdir, "etcd.log")
    return etcd.start()


def scratch_dir(tmpfs: bool = False) -> str:
    """A new temporary directory for a server, on disk or (``tmpfs``) in /dev/shm."""
    return tempfile.mkdtemp(prefix="kapi-bench-", dir="/dev/shm" if tmpfs else None)


def server_config(backend: str, etcd: Optional[EtcdServer] = None, **extra: Any) -> dict:
    """ServerProcess ``extra_config`` for a backend; etcd servers get a unique key prefix."""
    config: dict[str, Any] = {"log_level": "warn",
                              "limits": {"max_requests_inflight": 2000, "max_mutating_requests_inflight": 1000}}
    if backend == "etcd":
        assert etcd is not None, "the etcd backend needs an etcd"
        config["storage"] = {"backend": "etcd3", "etcd": {
            "servers": [etcd.endpoint], "prefix": f"/bench-{uuid.uuid4().hex[:8]}"}}
    for key, value in extra.items():
        config[key] = value
    return config


def start_server(backend: str, etcd: Optional[EtcdServer] = None, workdir: Optional[str] = None,
                 config: Optional[dict] = None) -> ServerProcess:
    """Start a server process on ``backend`` (``sqlite`` or ``etcd``) and wait for READY=1."""
    return ServerProcess(extra_config=config or server_config(backend, etcd), workdir=workdir).start()


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident set size of a process in MiB (``field`` of /proc/<pid>/status: VmRSS, or
    RssFile for its file-backed part: shared libraries and other mapped files)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


# ------------------------------------------------------------------ HTTPS


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a supervisor and its workers)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(p) for p in f.read().split()]
    except OSError:
        children = []
    return [pid] + [p for c in children for p in process_tree(c)]


def tree_rss_mb(pid: int, field: str = "VmRSS") -> float:
    """:func:`rss_mb` of a process and its descendants."""
    return sum(rss_mb(p, field) for p in process_tree(pid))


@dataclass
class Endpoint:
    """Where a server answers and how to authenticate to it (from a kubeconfig)."""
    host: str
    port: int
    ctx: ssl.SSLContext
    headers: dict[str, str] = field(default_factory=dict)  # a bearer token's, when the user has one

    @classmethod
    def from_kubeconfig(cls, path: str) -> "Endpoint":
        with open(path) as f:
            config = yaml.safe_load(f)
        current = config.get("current-context") or config["contexts"][0]["name"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        scratch = tempfile.mkdtemp(prefix="bench-creds-")

        def material(entry: dict, name: str) -> Optional[str]:
            if entry.get(name + "-data"):
                target = os.path.join(scratch, name)
                with open(target, "wb") as out:
                    out.write(base64.b64decode(entry[name + "-data"]))
                return target
            found = entry.get(name)
            return os.path.join(os.path.dirname(path), found) if found else None
        ctx = ssl.create_default_context(cafile=material(cluster, "certificate-authority"))
        cert, key = material(user, "client-certificate"), material(user, "client-key")
        if cert and key:
            ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["http/1.1"])
        host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
        headers = {"Authorization": f"Bearer {user['token']}"} if "token" in user else {}
        return cls(host, int(port), ctx, headers)


def open_raw_watch(host: str, port: int, ctx: ssl.SSLContext, path: str) -> tuple[ssl.SSLSocket, bytes]:
    """Open one watch stream over TLS (blocking), the socket left non-blocking for a selector;
    returns it and the bytes that came after the answer's headers."""
    sock = ctx.wrap_socket(socket.create_connection((host, port)), server_hostname=host)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise RuntimeError("the server closed a watch before answering")
        data += more
    head, rest = data.split(b"\r\n\r\n", 1)
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"watch answered {head[:120]!r}")
    sock.setblocking(False)
    return sock, rest

def read_stamped_events(selector: "selectors.BaseSelector", streams: int, expect: int, stamp: "re.Pattern[bytes]",
                        deadline: float) -> tuple[int, list[float]]:
    """Read the watch streams registered on ``selector`` (each key's data ``[partial line, events
    counted]``) until each has ``expect`` events, ends, or ``deadline`` (``time.time()``) passes.

    An event counts when ``stamp`` finds its write time (seconds since the epoch) in a complete
    line; its delay is arrival minus that.  Raw bytes and one regular expression, no JSON: the
    client's share of the CPUs is what the server loses.  Returns (events delivered, delays).
    """
    delays: list[float] = []
    delivered = 0
    open_streams = streams
    while open_streams and time.time() < deadline:
        for key, _ in selector.select(timeout=1.0):
            state = key.data
            try:
                data = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            now = time.time()
            if data:
                complete, _, state[0] = (state[0] + data).rpartition(b"\n")
                for t in stamp.findall(complete):
                    delays.append(now - float(t))
                    state[1] += 1
            if not data or state[1] >= expect:
                selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                delivered += state[1]
                open_streams -= 1
    for key in list(selector.get_map().values()):  # streams still short of events at the deadline
        delivered += key.data[1]
        key.fileobj.close()  # type: ignore[union-attr]
    return delivered, delays


def cpu_seconds(pid: int, waited_for_children: bool = False) -> float:
    """User and system CPU of every thread of ``pid`` so far, or with ``waited_for_children``
    that of its children that have exited and been waited for (a finished process pool's)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    first = 13 if waited_for_children else 11  # cutime, cstime; else utime, stime
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """:func:`cpu_seconds` of a process and its living descendants."""
    return sum(cpu_seconds(p) for p in process_tree(pid))

def ssl_context(server: ServerProcess, client_certificate: bool = True) -> ssl.SSLContext:
    """Verify the server with its CA and present the admin client certificate (unless not asked)."""
    certs = os.path.join(server.workdir, "certs")
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
    if client_certificate:
        ctx.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def host_port(server: ServerProcess) -> tuple[str, int]:
    host, port = server.server_url.removeprefix("https://").rsplit(":", 1)
    return host, int(port)


class Client:
    """One keep-alive HTTPS/1.1 connection (not thread-safe: one per thread); authenticated by
    the admin client certificate, or by a bearer ``token`` alone."""

    def __init__(self, server: ServerProcess, timeout: float = 120.0, token: str = "") -> None:
        self.host, self.port = host_port(server)
        self.ctx = ssl_context(server, client_certificate=not token)
        self.token = token
        self.timeout = timeout
        self.conn: Optional[http.client.HTTPSConnection] = None

    def request(self, method: str, path: str, body: Any = None, accept: str = "application/json",
                content_type: str = "application/json") -> tuple[int, bytes]:
        """Send one request; reconnects once if the kept-alive connection was closed."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, body: Any = None, ok: Iterable[int] = (200, 201)) -> dict:
        status, data = self.request(method, path, body)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def configmap(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data or {"key": "v" * 200}}


def ensure_namespace(client: Client, name: str) -> None:
    client.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                ok=(201, 409))


# ------------------------------------------------------------------ load

class Result:
    """Count, wall time and per-request latencies of one measured phase."""

    def __init__(self, count: int, seconds: float, latencies: list[float], errors: int) -> None:
        self.count = count
        self.seconds = seconds
        self.latencies = sorted(latencies)
        self.errors = errors

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def pct(self, p: float) -> float:
        """The p-quantile latency in milliseconds."""
        if not self.latencies:
            return float("nan")
        return self.latencies[min(len(self.latencies) - 1, int(len(self.latencies) * p))] * 1000


def run_parallel(server: ServerProcess, concurrency: int, count: int,
                 op: Callable[[Client, int], int], token: str = "") -> Result:
    """Run ``op(client, i)`` for i in range(count) on ``concurrency`` threads, each with its own
    keep-alive connection (the admin certificate, or bearer ``token``).  ``op`` returns the HTTP
    status; anything >= 400 counts as an error."""
    clients = [Client(server, token=token) for _ in range(concurrency)]
    for c in clients:  # connect (TLS handshake) before the clock starts
        c.request("GET", "/version")
    lock = threading.Lock()
    next_index = [0]
    latencies: list[list[float]] = [[] for _ in clients]
    errors = [0] * concurrency

    def worker(w: int) -> None:
        client, lat = clients[w], latencies[w]
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= count:
                return
            t0 = time.perf_counter()
            try:
                status = op(client, i)
            except Exception:
                status = 599
            lat.append(time.perf_counter() - t0)
            if status >= 400:
                errors[w] += 1

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for c in clients:
        c.close()
    return Result(count, elapsed, [x for lat in latencies for x in lat], sum(errors))


def create_many(server: ServerProcess, namespace: str, count: int, prefix: str = "cm",
                concurrency: int = 32) -> Result:
    """Create ``count`` ConfigMaps ``<prefix>-<i>`` in ``namespace`` over concurrent connections."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    return run_parallel(server, concurrency, count,
                        lambda c, i: c.request("POST", path, configmap(f"{prefix}-{i:06d}"))[0])


# ------------------------------------------------------------------ output

def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def print_table(headers: list[str], rows: list[list[Any]], title: str = "") -> None:
    """A GitHub-flavoured Markdown table (pastes straight into issue notes)."""
    if title:
        print(f"\n{title}\n")
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(row, widths)) + " |")
    sys.stdout.flush()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _numeric(text: str) -> bool:
    return text.replace(",", "").replace(".", "").replace("-", "").isdigit()


def machine() -> str:
    """One line describing where the numbers were taken."""
    return f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"

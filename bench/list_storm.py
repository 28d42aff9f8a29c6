"""A storm of large LISTs: 1,000 clients list 2,000 Pods (about 4.8 MB each) at the same moment.

``python3 bench/list_storm.py [--clients 1000] [--pods 2000] [--users 1] [--protobuf]
[--modes apf,max-in-flight] [--tmpfs]``

For each mode (API Priority and Fairness, the default; max-in-flight with
``--enable-priority-and-fairness=false``) a fresh server process is started
with upstream's default limits (400 + 200), ``--pods`` Pods are created, and
``--clients`` connections, spread over worker processes and authenticated as
``--users`` ordinary users (client certificates of the cluster CA, group
``system:authenticated``: the ``global-default`` level), each send one LIST
of the namespace at the same moment and read the answer as fast as they can.
Meanwhile another user GETs one Pod and ``/readyz`` every 50 ms.  Printed:
the answers by status, how long the storm took, list latencies, the probe
GET's and ``/readyz``'s p50/p99/max during the storm, and the server's peak
RSS and open descriptors (sampled every 50 ms).
"""
from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Client, ServerProcess, ensure_namespace, machine, print_table, run_parallel, scratch_dir  # noqa: E402
from protobuf_throughput import pod  # noqa: E402

from kapiserver.machinery import protobuf  # noqa: E402
from kapiserver.server.certs import issue_client_certificate  # noqa: E402

NS = "storm"
PROBE_INTERVAL = 0.05
WORKER_PROCESSES = 4


def user_credentials(server: ServerProcess, name: str) -> tuple[str, str, str]:
    """A client certificate for ``name`` (no groups: system:authenticated only); (ca, cert, key) paths."""
    certs = os.path.join(server.workdir, "certs")
    base = os.path.join(server.workdir, f"user-{name}")
    if not os.path.exists(base + ".key"):
        cert, key = issue_client_certificate(certs, name)
        with open(base + ".crt", "wb") as f:
            f.write(cert)
        with open(base + ".key", "wb") as f:
            f.write(key)
    return os.path.join(certs, "ca.crt"), base + ".crt", base + ".key"


def _context(creds: tuple[str, str, str]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=creds[0])
    ctx.load_cert_chain(creds[1], creds[2])
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _worker(host: str, port: int, path: str, accept: str, creds: list, ready: Any, go: Any, out: Any) -> None:
    """One worker process: a thread per client, connected before ``go``; one LIST each."""
    results: list[tuple[int, float, int]] = []
    lock = threading.Lock()
    conns = []
    for c in creds:
        conn = http.client.HTTPSConnection(host, port, context=_context(c), timeout=300)
        try:
            conn.connect()
        except OSError:
            conn = None
        conns.append(conn)
    ready.release()
    go.wait()

    def one(conn) -> None:
        start = time.perf_counter()
        status, size = 599, 0
        if conn is not None:
            try:
                conn.request("GET", path, headers={"Accept": accept})
                response = conn.getresponse()
                while True:
                    chunk = response.read(1 << 20)
                    if not chunk:
                        break
                    size += len(chunk)
                status = response.status
            except Exception:
                status = 599
            finally:
                conn.close()
        with lock:
            results.append((status, time.perf_counter() - start, size))

    threads = [threading.Thread(target=one, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(results)


class Sampler(threading.Thread):
    """The server's RSS and open descriptors every 50 ms (peaks)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_rss = 0.0
        self.peak_fds = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.peak_rss = max(self.peak_rss, int(line.split()[1]) / 1024)
                self.peak_fds = max(self.peak_fds, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                pass
            time.sleep(0.05)


class Prober(threading.Thread):
    def __init__(self, host: str, port: int, path: str, creds: tuple[str, str, str]) -> None:
        super().__init__(daemon=True)
        self.host, self.port, self.path = host, port, path
        self.ctx = _context(creds)
        self.samples: list[tuple[int, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        conn = None
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
                conn.request("GET", self.path, headers={"Accept": "application/json"})
                response = conn.getresponse()
                response.read()
                status = response.status
            except Exception:
                status = 599
                if conn is not None:
                    conn.close()
                conn = None
            self.samples.append((status, time.perf_counter() - start))
            time.sleep(PROBE_INTERVAL)


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000


def storm(mode: str, args: argparse.Namespace) -> list:
    workdir = scratch_dir(args.tmpfs)
    config = {"log_level": "warn", "limits": {"enable_priority_and_fairness": mode == "apf"}}
    server = ServerProcess(extra_config=config, workdir=workdir).start()
    try:
        setup = Client(server)
        ensure_namespace(setup, NS)
        # RBAC: every authenticated user may read the namespace's pods (else each LIST is a 403)
        setup.json("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "read-pods"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
        setup.json("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "read-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-pods"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]})
        path = f"/api/v1/namespaces/{NS}/pods"
        created = run_parallel(server, 16, args.pods, lambda c, i: c.request("POST", path, pod(f"p-{i:05d}"))[0])
        if created.errors:
            raise RuntimeError(f"{created.errors} pod creates failed")
        accept = protobuf.MEDIA_TYPE if args.protobuf else "application/json"
        status, body = setup.request("GET", path, accept=accept)
        list_bytes = len(body)
        host, port_text = server.server_url.removeprefix("https://").rsplit(":", 1)
        port = int(port_text)
        users = [user_credentials(server, f"storm-{u}") for u in range(args.users)]
        probe_user = user_credentials(server, "probe")
        # the same list again, as an ordinary user (warms the memoized encodings as a first LIST would)
        print(f"[{mode}] {args.pods} pods, a list is {list_bytes / 1e6:.2f} MB; connecting {args.clients} clients",
              file=sys.stderr)
        ready = multiprocessing.Semaphore(0)
        go = multiprocessing.Event()
        out: Any = multiprocessing.Queue()
        per_worker: list[list] = [[] for _ in range(WORKER_PROCESSES)]
        for i in range(args.clients):
            per_worker[i % WORKER_PROCESSES].append(users[i % len(users)])
        workers = [multiprocessing.Process(target=_worker, args=(host, port, path, accept, creds, ready, go, out))
                   for creds in per_worker]
        for w in workers:
            w.start()
        for _ in workers:
            ready.acquire()
        sampler = Sampler(server.proc.pid)
        get_probe = Prober(host, port, f"{path}/p-00007", probe_user)
        ready_probe = Prober(host, port, "/readyz", probe_user)
        for t in (sampler, get_probe, ready_probe):
            t.start()
        profiler = None
        if args.profile:  # py-spy samples the server during the storm (collapsed stacks)
            profiler = subprocess.Popen(["py-spy", "record", "-p", str(server.proc.pid), "-r", "200", "--format",
                                         "raw", "-o", f"{args.profile}.{mode}.txt"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        time.sleep(0.3 if profiler is None else 1.0)
        started = time.perf_counter()
        go.set()
        results: list[tuple[int, float, int]] = []
        for _ in workers:
            results.extend(out.get())
        elapsed = time.perf_counter() - started
        for t in (sampler, get_probe, ready_probe):
            t.stop.set()
        for w in workers:
            w.join()
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(30)
        codes: dict[int, int] = {}
        for code, _, _ in results:
            codes[code] = codes.get(code, 0) + 1
        ok = [s for code, s, _ in results if code == 200]
        full = sum(1 for code, _, size in results if code == 200 and size == list_bytes)
        gets = [s for code, s in get_probe.samples]
        readys = [s for code, s in ready_probe.samples]
        probe_errors = sum(1 for code, _ in get_probe.samples + ready_probe.samples if code != 200)
        with open(f"/proc/{server.proc.pid}/status") as f:
            hwm = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
        print(f"[{mode}] done in {elapsed:.1f}s: {codes}", file=sys.stderr)
        return [mode, "protobuf" if args.protobuf else "json", f"{list_bytes / 1e6:.1f}", args.clients,
                codes.get(200, 0), full, codes.get(429, 0), sum(v for k, v in codes.items() if k not in (200, 429)),
                elapsed, pct(ok, 0.5), pct(ok, 0.99), pct(gets, 0.5), pct(gets, 0.99), pct(gets, 1.0),
                pct(readys, 0.5), pct(readys, 0.99), pct(readys, 1.0), probe_errors, max(sampler.peak_rss, hwm),
                sampler.peak_fds]
    finally:
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--users", type=int, default=1, help="ordinary users the clients are spread over")
    parser.add_argument("--protobuf", action="store_true", help="Accept protobuf instead of JSON")
    parser.add_argument("--modes", default="apf,max-in-flight")
    parser.add_argument("--tmpfs", action="store_true")
    parser.add_argument("--profile", default="", help="py-spy the server during the storm into <PROFILE>.<mode>.txt")
    args = parser.parse_args()
    rows = [storm(mode, args) for mode in args.modes.split(",")]
    print_table(["mode", "encoding", "list MB", "clients", "200", "complete", "429", "other", "storm s",
                 "list p50 ms", "list p99 ms", "GET p50 ms", "GET p99 ms", "GET max ms", "readyz p50 ms",
                 "readyz p99 ms", "readyz max ms", "probe errors", "peak RSS MB", "peak fds"], rows,
                f"{args.clients} concurrent LISTs of {args.pods} Pods by {args.users} user(s) ({machine()})")


if __name__ == "__main__":
    main()

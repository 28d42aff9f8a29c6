"""Large bodies of many tiny parts: does the reactor stay free, and does memory stay in proportion?

``python3 bench/large_bodies.py [--case NAME ...] [--backend sqlite|etcd] [--repeat N] [--then]``
``python3 bench/large_bodies.py --kubeconfig FILE --pid PID [--case NAME ...]``  (any server, e.g. kube-apiserver)

Issue 31's goal: 400,000 finalizers, 100,000 labels or a 3 MB body of tiny items keep ``/readyz``
under 100 ms and RSS growth under 10x the body size.  Without ``--kubeconfig`` the script starts a
``twistd -n kapiserver`` (ServerProcess) on 127.0.0.1; with it, it talks to the kubeconfig's server
(client certificate or bearer token) and samples the RSS of ``--pid`` and its children.

For each case one connection sends the body while another, already connected, GETs ``/readyz``
every ~10 ms and a thread samples the server's RSS every 5 ms.  Printed per case: the answer's
code and reason, the request's time, the number of /readyz polls during it with their max and p99,
the most CPU time the server's main thread used while one poll waited (/proc/PID/schedstat: for
kapiserver the reactor's own work, which a busy machine does not stretch as it stretches the wait;
it leaves out the waits for the GIL that another thread's long C call holds; for a Go server it
means little), and RSS before / peak / 1 s after with (peak - before) / body size.  Each case deletes what it
created (answers 201) before the next; with ``--then`` that delete, and a merge patch of one label
before it, are measured too (a row each: a small request on a large stored object).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import sys
import threading
import time
from typing import Any, Callable, NamedTuple, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Endpoint, ServerProcess, machine, print_table, scratch_dir, server_config, start_etcd,  # noqa: E402
                     tree_rss_mb)

READYZ_EVERY = 0.010
RSS_EVERY = 0.005
NAMESPACE = "default"


class Target(NamedTuple):
    host: str
    port: int
    context: ssl.SSLContext
    headers: dict[str, str]
    pid: int


class Body(NamedTuple):
    path: str          # where to POST
    data: bytes
    content_type: str
    created: str       # the object's path, to delete if it was created


# ------------------------------------------------------------------ the bodies

def _named(kind: str, name: str, **metadata: Any) -> dict:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, **metadata}}


def _json(resource: str, obj: dict) -> Body:
    base = f"/api/v1/namespaces/{NAMESPACE}/{resource}"
    return Body(base, json.dumps(obj, separators=(",", ":")).encode(), "application/json",
                f"{base}/{obj['metadata']['name']}")


def finalizers_json(resource: str, kind: str) -> Callable[[], Body]:
    return lambda: _json(resource, {**_named(kind, "fin", finalizers=["a"] * 400_000), "data": {}})


def finalizers_yaml() -> Body:
    base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fin\n  finalizers:\n" + "  - a\n" * 400_000
    return Body(base, text.encode(), "application/yaml", f"{base}/fin")


def finalizers_protobuf() -> Body:
    from kapiserver.machinery.protobuf import encode_object
    base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    data = encode_object({**_named("ConfigMap", "fin", finalizers=["a"] * 400_000), "data": {}})
    return Body(base, data, "application/vnd.kubernetes.protobuf", f"{base}/fin")


def labels(valid: bool) -> Callable[[], Body]:
    # valid: k000000=v ...; invalid: a space is not allowed in a label key
    key = "k{:06d}" if valid else "bad key {:06d}"
    return lambda: _json("configmaps", _named("ConfigMap", "labels", labels={key.format(i): "v" for i in range(100_000)}))


def tiny_data_keys(total: int) -> Callable[[], Body]:
    # "k0000000":"", is 14 bytes
    return lambda: _json("configmaps", {**_named("ConfigMap", "data"),
                                        "data": {f"k{i:07d}": "" for i in range(total // 14)}})


def pod_env() -> Body:
    env = [{"name": f"E{i:06d}", "value": ""} for i in range(100_000)]
    return _json("pods", {**_named("Pod", "env"), "spec": {"containers": [
        {"name": "c", "image": "registry.k8s.io/pause:3.10", "env": env}]}})


CASES: dict[str, Callable[[], Body]] = {
    "configmap-400k-finalizers-json": finalizers_json("configmaps", "ConfigMap"),
    "secret-400k-finalizers-json": finalizers_json("secrets", "Secret"),
    "configmap-400k-finalizers-yaml": finalizers_yaml,
    "configmap-400k-finalizers-protobuf": finalizers_protobuf,
    "configmap-100k-labels-valid": labels(True),
    "configmap-100k-labels-invalid-keys": labels(False),
    "configmap-3mb-tiny-data-keys": tiny_data_keys(3_000_000),
    "configmap-1mb-tiny-data-keys": tiny_data_keys(1_000_000),
    "configmap-3.5mb-tiny-data-keys": tiny_data_keys(3_500_000),
    "pod-100k-env-vars": pod_env,
}


# ------------------------------------------------------------------ the target

def target_from_kubeconfig(path: str, pid: int) -> Target:
    endpoint = Endpoint.from_kubeconfig(path)
    return Target(endpoint.host, endpoint.port, endpoint.ctx, endpoint.headers, pid)

def target_of(server: ServerProcess) -> Target:
    certs = os.path.join(server.workdir, "certs")
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
    ctx.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
    ctx.set_alpn_protocols(["http/1.1"])
    host, port = server.server_url.removeprefix("https://").rsplit(":", 1)
    assert server.proc is not None
    return Target(host, int(port), ctx, {}, server.proc.pid)


def connect(target: Target) -> http.client.HTTPSConnection:
    conn = http.client.HTTPSConnection(target.host, target.port, context=target.context, timeout=300)
    conn.connect()
    return conn


# ------------------------------------------------------------------ one case

class ReadyzPoller(threading.Thread):
    """GET /readyz over one kept-alive connection every READYZ_EVERY; records each answer's latency."""

    def __init__(self, target: Target) -> None:
        super().__init__(daemon=True)
        self.conn = connect(target)
        self.headers = target.headers
        self.pid = target.pid
        self.stop_event = threading.Event()
        self.latencies: list[float] = []
        self.cpu: list[float] = []  # the server's main thread's CPU seconds during each poll
        self.failures = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            t0 = time.perf_counter()
            cpu0 = cpu_seconds(self.pid)
            try:
                self.conn.request("GET", "/readyz", headers=self.headers)
                response = self.conn.getresponse()
                ok = response.read() == b"ok" and response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            self.latencies.append(time.perf_counter() - t0)
            self.cpu.append(cpu_seconds(self.pid) - cpu0)
            self.failures += not ok
            self.stop_event.wait(READYZ_EVERY)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()
        self.conn.close()


def cpu_seconds(pid: int) -> float:
    """The CPU time the main thread of ``pid`` has used."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop_event = threading.Event()
        self.peak = tree_rss_mb(pid)

    def run(self) -> None:
        while not self.stop_event.wait(RSS_EVERY):
            self.peak = max(self.peak, tree_rss_mb(self.pid))

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


def reason_of(status: int, data: bytes) -> str:
    try:
        answer = json.loads(data)
    except ValueError:
        return repr(data[:60])
    if answer.get("kind") == "Status":
        causes = len((answer.get("details") or {}).get("causes") or [])
        message = answer.get("message", "")
        return f"{answer.get('reason', '')} ({causes} causes) {message[:70]}"
    return answer.get("kind", "")


def measured(target: Target, name: str, method: str, path: str, data: bytes, content_type: str,
             size: int) -> tuple[int, list[Any]]:
    """Send one request while /readyz is polled and the RSS sampled: its code and table row
    (growth per ``size`` bytes, the case's body)."""
    sender = connect(target)
    before = tree_rss_mb(target.pid)
    poller = ReadyzPoller(target)
    sampler = RssSampler(target.pid)
    poller.start()
    sampler.start()
    time.sleep(0.1)  # a few polls before the body, to see the idle latency is small
    polls_before = len(poller.latencies)
    t0 = time.perf_counter()
    headers = {**target.headers, "Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    sender.request(method, path, body=data or None, headers=headers)
    response = sender.getresponse()
    answer = response.read()
    elapsed = time.perf_counter() - t0
    polls_after = len(poller.latencies)
    during = poller.latencies[polls_before:polls_after]
    cpu_max = max(poller.cpu[polls_before:polls_after], default=float("nan")) * 1000
    time.sleep(1.0)
    poller.stop()
    sampler.stop()
    sender.close()
    after = tree_rss_mb(target.pid)
    during.sort()
    readyz_max = during[-1] * 1000 if during else float("nan")
    readyz_p99 = during[min(len(during) - 1, int(len(during) * 0.99))] * 1000 if during else float("nan")
    growth = (sampler.peak - before) / (size / (1 << 20))
    return response.status, [name, f"{size / 1e6:.2f}", response.status, reason_of(response.status, answer),
                             round(elapsed * 1000), len(during), readyz_max, readyz_p99, cpu_max, poller.failures,
                             before, sampler.peak, after, f"{growth:.1f}x"]


# --then: a small change to the object a case created, then its deletion
LABEL_PATCH = b'{"metadata":{"labels":{"patched":"yes"}}}'


def run_case(target: Target, name: str, body: Body, then: bool = False) -> list[list[Any]]:
    """The case's POST (a row); with ``then``, after a 201 a merge patch of one label and the DELETE
    (a row each), else the object deleted unmeasured."""
    size = len(body.data)
    code, row = measured(target, name, "POST", body.path, body.data, body.content_type, size)
    rows = [row]
    if code != 201:
        return rows
    if then:
        rows.append(measured(target, f"{name}, then a label patch", "PATCH", body.created, LABEL_PATCH,
                             "application/merge-patch+json", size)[1])
        rows.append(measured(target, f"{name}, then its delete", "DELETE", body.created, b"", "", size)[1])
    else:
        sender = connect(target)
        sender.request("DELETE", body.created, headers=target.headers)
        sender.getresponse().read()
        sender.close()
    return rows


HEADERS = ["case", "body MB", "code", "reason", "request ms", "readyz polls", "readyz max ms", "readyz p99 ms",
           "main thread CPU ms in one poll", "readyz failed", "RSS before MiB", "peak MiB", "after MiB", "growth / body"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="(repeatable; default all)")
    parser.add_argument("--backend", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--kubeconfig", help="measure this server instead of starting a kapiserver")
    parser.add_argument("--pid", type=int, help="the --kubeconfig server's process (its RSS is sampled)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case")
    parser.add_argument("--then", action="store_true",
                        help="after a case's 201, also measure a label patch of the object and its delete")
    args = parser.parse_args()
    server: Optional[ServerProcess] = None
    etcd = None
    if args.kubeconfig:
        if not args.pid:
            parser.error("--kubeconfig needs --pid")
        target = target_from_kubeconfig(args.kubeconfig, args.pid)
        who = f"server of {args.kubeconfig}"
    else:
        etcd = start_etcd() if args.backend == "etcd" else None
        server = ServerProcess(extra_config=server_config(args.backend, etcd), workdir=scratch_dir()).start()
        target = target_of(server)
        who = f"kapiserver ({args.backend})"
    rows = []
    try:
        for name in args.case or list(CASES):
            body = CASES[name]()
            for _ in range(args.repeat):
                for row in run_case(target, name, body, args.then):
                    rows.append(row)
                    print(" | ".join(str(c) for c in row), file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.cleanup()
        if etcd is not None:
            etcd.stop()
    print_table(HEADERS, rows, title=f"Large bodies against {who}; {machine()}, load average "
                                     f"{os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

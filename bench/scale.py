"""Issue 34's scale workload against any kubeconfig: memory, restart, big lists, selective lists, watches.

``python bench/scale.py [--configmaps 100000 --pods 20000 --watches 500 --rate 100 --watch-seconds 10]
  (--start kapiserver[:WORKERS] | --start kube-apiserver | --target name=N,kubeconfig=K[,pids=P+P][,restart=CMD])...``

Per target, one after the other (so they do not share the CPUs with each other):

1. load: ``--configmaps`` ConfigMaps of 1 KB and ``--pods`` realistic Pods (two containers with env,
   probes, resources and mounts; ``spec.nodeName`` on one of 100 nodes; label ``group`` one of 100
   values) over 10 namespaces each, by ``--clients`` processes of 4 keep-alive connections;
2. RSS: the sum over the server's processes (a target's ``pids`` and their descendants: all workers);
3. a full paginated LIST of pods (``limit=500``, consistent), a ``resourceVersion=0`` LIST of all pods
   in JSON and in protobuf, lists with a selective label selector (``group=g7``, 1 % of pods) and a
   selective field selector (``spec.nodeName=node-7``, 1 %), consistent and at ``resourceVersion=0``:
   seconds of the first of ``--repeat`` runs and their median (repeated lists of unchanged objects reuse
   what the first encoded, on kapiserver);
4. watches: ``--watches`` pod watch streams on one namespace, read by two client processes; pods of that
   namespace are patched at ``--rate`` per second for ``--watch-seconds`` (the write time carried in an
   annotation); delivery delay p50/p99/max and events delivered of those expected; RSS then;
5. restart (``--start`` targets, or a target's ``restart`` command, which must stop the server and start
   it again in the background): seconds from the restart until ``/readyz`` answers 200, then the first
   selective LIST of pods (a watch cache built lazily is built by it), and RSS then.

With ``--start kube-apiserver`` the benchmark makes its own PKI and runs ``etcd-3.5`` and
``kube-apiserver`` from ``~/.cache/kube-anchor/bin`` on ports 17443/12479 (the anchor kit's flags);
its RSS is kube-apiserver's alone, etcd's is shown beside it. ``--start kapiserver:2`` runs this
checkout on SQLite with two workers. Everything started is stopped at the end.
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Endpoint, open_raw_watch, process_tree, read_stamped_events  # noqa: E402

NAMESPACES = 10
NODES = 100
GROUPS = 100
WATCH_NAMESPACE = "scale-p0"
ANCHOR_BIN = os.path.expanduser("~/.cache/kube-anchor/bin")
KUBE_API_PORT = 17443
ETCD_PORT = 12479
PROTOBUF = "application/vnd.kubernetes.protobuf"


# ------------------------------------------------------------------ connections

class Connection:
    """One keep-alive HTTPS/1.1 connection (one per thread)."""

    def __init__(self, endpoint: Endpoint, timeout: float = 600.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.conn: Optional[http.client.HTTPSConnection] = None

    def request(self, method: str, path: str, body: Any = None, accept: str = "application/json",
                content_type: str = "application/json") -> tuple[int, bytes]:
        for attempt in range(3):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.endpoint.host, self.endpoint.port,
                                                        context=self.endpoint.ctx, timeout=self.timeout)
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Accept": accept}
            if data is not None:
                headers["Content-Type"] = content_type
            try:
                self.conn.request(method, path, data, headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# ------------------------------------------------------------------ objects

def configmap(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:06d}", "labels": {"group": f"g{i % GROUPS}", "app": "scale-bench"}},
            "data": {"payload": ("%06d" % i) * 150}}  # 900 B of data, about 1 KB stored


def pod(i: int) -> dict:
    """A pod as a Deployment's ReplicaSet makes it, already bound to a node."""
    app = f"app-{i % 50}"
    env = [{"name": f"SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(6)]
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "initialDelaySeconds": 5, "periodSeconds": 10}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:06d}",
            "labels": {"app": app, "group": f"g{i % GROUPS}", "pod-template-hash": "5d8f7c9b6f", "tier": "backend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T00:00:00Z",
                            "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-5d8f7c9b6f",
                                 "uid": f"00000000-0000-0000-0000-{i % 50:012d}", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "nodeName": f"node-{i % NODES}",
            "containers": [
                {"name": "app", "image": f"registry.example.com/team/{app}:v1.2.3",
                 "args": ["--port=8080", "--metrics-port=9090", "--log-level=info"],
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                           {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                 "env": env,
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "500m", "memory": "512Mi"}},
                 "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                                  {"name": "cache", "mountPath": "/var/cache/app"}],
                 "livenessProbe": probe, "readinessProbe": probe,
                 "imagePullPolicy": "IfNotPresent"},
                {"name": "sidecar", "image": "registry.example.com/infra/log-shipper:v0.9.1",
                 "args": ["--input=/var/log/app", "--output=stdout"],
                 "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
                 "volumeMounts": [{"name": "cache", "mountPath": "/var/log/app", "readOnly": True}]},
            ],
            "volumes": [{"name": "config", "configMap": {"name": f"{app}-config"}},
                        {"name": "cache", "emptyDir": {}}],
            "terminationGracePeriodSeconds": 30,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 2000},
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                    "labelSelector": {"matchLabels": {"app": app}}}}]}},
        },
    }


# ------------------------------------------------------------------ load

def _load_worker(args: tuple[str, str, list[int], int]) -> int:
    kubeconfig, kind, indexes, threads = args
    endpoint = Endpoint.from_kubeconfig(kubeconfig)
    failures = [0]

    def run(part: list[int]) -> None:
        conn = Connection(endpoint)
        for i in part:
            if kind == "configmaps":
                ns, body = f"scale-c{i % NAMESPACES}", configmap(i)
            else:
                ns, body = f"scale-p{i % NAMESPACES}", pod(i)
            status, data = conn.request("POST", f"/api/v1/namespaces/{ns}/{kind}", body)
            if status not in (201, 409):
                failures[0] += 1
                if failures[0] <= 3:
                    print(f"  create {kind} {i}: {status} {data[:200]!r}", file=sys.stderr)
        conn.close()
    pool = [threading.Thread(target=run, args=(indexes[t::threads],)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return failures[0]


def load(kubeconfig: str, configmaps: int, pods: int, clients: int) -> dict[str, float]:
    conn = Connection(Endpoint.from_kubeconfig(kubeconfig))
    for ns in [f"scale-c{k}" for k in range(NAMESPACES)] + [f"scale-p{k}" for k in range(NAMESPACES)]:
        conn.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        # pods need the namespace's default ServiceAccount (no controller-manager runs here)
        deadline = time.time() + 30
        while conn.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")[0] != 200:
            conn.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
            if time.time() > deadline:
                raise RuntimeError(f"no default ServiceAccount in {ns}")
    conn.close()
    rates = {}
    with multiprocessing.Pool(clients) as workers:
        for kind, n in (("configmaps", configmaps), ("pods", pods)):
            if not n:
                continue
            t0 = time.time()
            slices = [(kubeconfig, kind, list(range(c, n, clients)), 4) for c in range(clients)]
            failed = sum(workers.map(_load_worker, slices))
            seconds = time.time() - t0
            rates[kind] = n / seconds
            print(f"  loaded {n} {kind} in {seconds:.0f}s ({n / seconds:.0f}/s, {failed} failed)", file=sys.stderr)
    return rates


# ------------------------------------------------------------------ lists

CONTINUE = re.compile(rb'"continue":"([^"]*)"')


def timed_list(conn: Connection, path: str, accept: str = "application/json") -> tuple[float, int]:
    """Seconds to read the whole list (following continue tokens) and its size in bytes.

    Only the list's metadata is looked at (a regular expression over its start), so the client's
    time is reading the bytes, not decoding them.
    """
    t0 = time.time()
    size = 0
    token = b""
    while True:
        sep = "&" if "?" in path else "?"
        status, body = conn.request("GET", path + (f"{sep}continue={token.decode()}" if token else ""),
                                    accept=accept)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
        size += len(body)
        found = CONTINUE.search(body, 0, 2000) if accept == "application/json" else None
        token = found.group(1) if found else b""
        if not token:
            return time.time() - t0, size


def lists(kubeconfig: str, repeat: int) -> dict[str, tuple[float, float, int]]:
    """Per case: the first run's seconds, the median's and the answer's size."""
    conn = Connection(Endpoint.from_kubeconfig(kubeconfig))
    cases = {
        "pods, paginated (limit 500, consistent)": ("/api/v1/pods?limit=500", "application/json"),
        "pods, RV=0, JSON": ("/api/v1/pods?resourceVersion=0", "application/json"),
        "pods, RV=0, protobuf": ("/api/v1/pods?resourceVersion=0", PROTOBUF),
        "pods, label group=g7 (1 %), consistent": ("/api/v1/pods?labelSelector=group%3Dg7", "application/json"),
        "pods, label group=g7, RV=0": ("/api/v1/pods?labelSelector=group%3Dg7&resourceVersion=0",
                                       "application/json"),
        "pods, field spec.nodeName=node-7 (1 %), consistent": (
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-7", "application/json"),
        "pods, field spec.nodeName=node-7, RV=0": (
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-7&resourceVersion=0", "application/json"),
        "configmaps, label group=g7 (1 %), consistent": (
            "/api/v1/configmaps?labelSelector=group%3Dg7", "application/json"),
    }
    results = {}
    for name, (path, accept) in cases.items():
        runs = [timed_list(conn, path, accept) for _ in range(repeat)]
        results[name] = (runs[0][0], statistics.median(r[0] for r in runs), runs[-1][1])
        print(f"  {name}: first {runs[0][0]:.3f}s, median {results[name][1]:.3f}s ({runs[-1][1]} bytes)",
              file=sys.stderr)
    conn.close()
    return results


# ------------------------------------------------------------------ watches

PATCHED_T = re.compile(rb'"bench-t":"([0-9.]+)"')


def _watch_reader(kubeconfig: str, path: str, watchers: int, expect: int, seconds: float, ready, results) -> None:
    """Hold ``watchers`` streams, read with one selector and a regular expression over the raw bytes
    (the client's share of the CPUs is what the server loses)."""
    endpoint = Endpoint.from_kubeconfig(kubeconfig)
    selector = selectors.DefaultSelector()
    for _ in range(watchers):
        sock, rest = open_raw_watch(endpoint.host, endpoint.port, endpoint.ctx, path)
        selector.register(sock, selectors.EVENT_READ, [rest, 0])
    ready.set()
    results.put(read_stamped_events(selector, watchers, expect, PATCHED_T, time.time() + 120 + seconds * 3))


def watches(kubeconfig: str, watchers: int, rate: float, seconds: float, pods: int) -> dict[str, float]:
    conn = Connection(Endpoint.from_kubeconfig(kubeconfig))
    status, body = conn.request("GET", f"/api/v1/namespaces/{WATCH_NAMESPACE}/pods?limit=1")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    names = [f"pod-{i:06d}" for i in range(0, pods, NAMESPACES)]  # the pods of WATCH_NAMESPACE
    n = int(rate * seconds)
    path = f"/api/v1/namespaces/{WATCH_NAMESPACE}/pods?watch=1&resourceVersion={rv}"
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    readers = []
    for k in range(2):
        ready = ctx.Event()
        share = watchers // 2 + (watchers % 2 if k == 0 else 0)
        p = ctx.Process(target=_watch_reader, args=(kubeconfig, path, share, n, seconds, ready, results))
        p.start()
        readers.append((p, ready))
    for p, ready in readers:
        if not ready.wait(300):
            raise RuntimeError("watch streams not open after 300s")
    errors = [0]
    start = time.time() + 0.2

    def writer(j: int, threads: int) -> None:
        c = Connection(Endpoint.from_kubeconfig(kubeconfig))
        for i in range(j, n, threads):
            pause = start + i / rate - time.time()
            if pause > 0:
                time.sleep(pause)
            patch = {"metadata": {"annotations": {"bench-t": repr(time.time())}}}
            st, _ = c.request("PATCH", f"/api/v1/namespaces/{WATCH_NAMESPACE}/pods/{names[i % len(names)]}",
                              patch, content_type="application/merge-patch+json")
            if st != 200:
                errors[0] += 1
        c.close()
    threads = [threading.Thread(target=writer, args=(j, 4)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    achieved = n / (time.time() - start)
    delivered = 0
    delays: list[float] = []
    for _ in readers:
        got, ds = results.get(timeout=600)
        delivered += got
        delays.extend(ds)
    for p, _ in readers:
        p.join(30)
    conn.close()
    delays.sort()

    def pct(p: float) -> float:
        return delays[min(len(delays) - 1, int(len(delays) * p))] if delays else float("nan")
    return {"p50": pct(0.5), "p99": pct(0.99), "max": delays[-1] if delays else float("nan"),
            "delivered": delivered, "expected": n * watchers, "rate": achieved, "errors": errors[0]}


# ------------------------------------------------------------------ targets

def rss_mb(pids: list[int]) -> float:
    total = 0
    for root in pids:
        for p in process_tree(root):
            try:
                with open(f"/proc/{p}/status") as f:
                    total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                pass
    return total / 1024


def wait_ready(kubeconfig: str, timeout: float = 900) -> float:
    """Seconds until /readyz answers 200 (polled every 50 ms)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            conn = Connection(Endpoint.from_kubeconfig(kubeconfig), timeout=5)
            status, _ = conn.request("GET", "/readyz")
            conn.close()
            if status == 200:
                return time.time() - t0
        except (OSError, http.client.HTTPException, FileNotFoundError, KeyError, TypeError):
            pass
        time.sleep(0.05)
    raise RuntimeError("not ready")


@dataclass
class Target:
    name: str
    kubeconfig: str
    pids: Callable[[], list[int]]
    store_pids: Callable[[], list[int]] = field(default=lambda: [])
    restart: Optional[Callable[[], float]] = None  # seconds to /readyz
    stop: Callable[[], None] = field(default=lambda: None)


def external_target(spec: str) -> Target:
    opts = dict(part.split("=", 1) for part in spec.split(","))
    pids = [int(p) for p in opts.get("pids", "").split("+") if p]
    kubeconfig = opts["kubeconfig"]
    restart = None
    if opts.get("restart"):
        def restart() -> float:
            t0 = time.time()
            subprocess.run(opts["restart"], shell=True, check=True)
            wait_ready(kubeconfig)
            return time.time() - t0
    return Target(opts.get("name", kubeconfig), kubeconfig, lambda: pids, restart=restart)


def kapiserver_target(workers: int) -> Target:
    from kapiserver.testing.process import ServerProcess
    workdir = tempfile.mkdtemp(prefix="scale-bench-kapi-")
    # no controllers, as kube-apiserver runs without kube-controller-manager here (the garbage
    # collector would delete the pods, whose owners are not stored)
    config = {"log_level": "warn", "workers": workers, "controllers": {"enabled": False},
              "limits": {"max_requests_inflight": 2000, "max_mutating_requests_inflight": 1000}}
    server = ServerProcess(extra_config=config, workdir=workdir).start()
    holder = [server]

    def restart() -> float:
        t0 = time.time()
        holder[0].stop()
        holder[0] = ServerProcess(extra_config=config, workdir=workdir).start()  # returns at READY=1
        wait_ready(server.kubeconfig)
        return time.time() - t0

    def stop() -> None:
        holder[0].stop()
        shutil.rmtree(workdir, ignore_errors=True)
    assert server.proc is not None
    return Target(f"kapiserver (SQLite, workers: {workers})", server.kubeconfig,
                  lambda: [holder[0].proc.pid] if holder[0].proc else [], restart=restart, stop=stop)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(pki: str) -> None:
    """A CA, kube-apiserver's serving certificate, an admin client certificate, the front proxy's and
    the service account key (as the anchor kit makes them)."""
    client_ext = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n" \
                 "extendedKeyUsage=clientAuth"
    for ca in ("ca", "front-proxy-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{pki}/{ca}.key", "-subj",
                 f"/CN=scale-{ca}", "-days", "30", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", f"{pki}/{ca}.crt")
    for name, subject, ext, ca in (
            ("apiserver", "/CN=kube-apiserver",
             "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
             "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost", "ca"),
            ("admin", "/O=system:masters/CN=kubernetes-admin", client_ext, "ca"),
            ("front-proxy-client", "/CN=front-proxy-client", client_ext, "front-proxy-ca")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{pki}/{name}.key", "-subj", subject,
                 "-out", f"{pki}/{name}.csr")
        with open(f"{pki}/{name}.ext", "w") as f:
            f.write(ext + "\n")
        _openssl("x509", "-req", "-in", f"{pki}/{name}.csr", "-CA", f"{pki}/{ca}.crt", "-CAkey", f"{pki}/{ca}.key",
                 "-CAcreateserial", "-days", "30", "-sha256", "-extfile", f"{pki}/{name}.ext",
                 "-out", f"{pki}/{name}.crt")
    _openssl("genrsa", "-out", f"{pki}/sa.key", "2048")
    _openssl("rsa", "-in", f"{pki}/sa.key", "-pubout", "-out", f"{pki}/sa.pub")


def kube_apiserver_target() -> Target:
    workdir = tempfile.mkdtemp(prefix="scale-bench-kas-")
    pki = os.path.join(workdir, "pki")
    os.makedirs(pki)
    make_pki(pki)
    kubeconfig = os.path.join(workdir, "admin.kubeconfig")
    with open(kubeconfig, "w") as f:
        yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "scale",
                        "clusters": [{"name": "scale", "cluster": {"server": f"https://127.0.0.1:{KUBE_API_PORT}",
                                                                   "certificate-authority": f"{pki}/ca.crt"}}],
                        "users": [{"name": "admin", "user": {"client-certificate": f"{pki}/admin.crt",
                                                             "client-key": f"{pki}/admin.key"}}],
                        "contexts": [{"name": "scale", "context": {"cluster": "scale", "user": "admin"}}]}, f)
    etcd_log = open(os.path.join(workdir, "etcd.log"), "wb")
    peer = f"http://127.0.0.1:{ETCD_PORT + 1}"
    etcd = subprocess.Popen([f"{ANCHOR_BIN}/etcd-3.5", "--name", "scale", "--data-dir", f"{workdir}/etcd",
                             "--listen-client-urls", f"http://127.0.0.1:{ETCD_PORT}",
                             "--advertise-client-urls", f"http://127.0.0.1:{ETCD_PORT}",
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", f"scale={peer}", "--quota-backend-bytes", "8589934592"],
                            stdout=etcd_log, stderr=subprocess.STDOUT)
    command = [f"{ANCHOR_BIN}/kube-apiserver", f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
               "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={KUBE_API_PORT}",
               f"--tls-cert-file={pki}/apiserver.crt", f"--tls-private-key-file={pki}/apiserver.key",
               f"--client-ca-file={pki}/ca.crt", "--authorization-mode=Node,RBAC",
               f"--service-account-key-file={pki}/sa.pub", f"--service-account-signing-key-file={pki}/sa.key",
               "--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.0.0.0/24",
               "--allow-privileged=true", f"--requestheader-client-ca-file={pki}/front-proxy-ca.crt",
               "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
               "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
               f"--proxy-client-cert-file={pki}/front-proxy-client.crt",
               f"--proxy-client-key-file={pki}/front-proxy-client.key",
               "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"]
    log = open(os.path.join(workdir, "kube-apiserver.log"), "ab")
    holder = [subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)]
    wait_ready(kubeconfig)

    def restart() -> float:
        t0 = time.time()
        holder[0].send_signal(signal.SIGTERM)
        holder[0].wait(120)
        holder[0] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        wait_ready(kubeconfig)
        return time.time() - t0

    def stop() -> None:
        for proc in (holder[0], etcd):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return Target("kube-apiserver v1.32 (etcd 3.5)", kubeconfig, lambda: [holder[0].pid],
                  store_pids=lambda: [etcd.pid], restart=restart, stop=stop)


# ------------------------------------------------------------------ run

def measure(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    print(f"{target.name}: loading", file=sys.stderr)
    out["load"] = load(target.kubeconfig, args.configmaps, args.pods, args.clients)
    time.sleep(5)
    out["rss"] = rss_mb(target.pids())
    out["store_rss"] = rss_mb(target.store_pids())
    print(f"  RSS {out['rss']:.0f} MB (store {out['store_rss']:.0f} MB)", file=sys.stderr)
    out["lists"] = lists(target.kubeconfig, args.repeat)
    out["rss_after_lists"] = rss_mb(target.pids())
    if args.watches:
        out["watch"] = watches(target.kubeconfig, args.watches, args.rate, args.watch_seconds, args.pods)
        print(f"  watch {out['watch']}", file=sys.stderr)
        out["rss_after_watches"] = rss_mb(target.pids())  # the patched pods, the window's events and frames
    if target.restart is not None:
        out["restart"] = target.restart()
        conn = Connection(Endpoint.from_kubeconfig(target.kubeconfig))
        out["first_list_restarted"] = timed_list(conn, "/api/v1/pods?labelSelector=group%3Dg7")[0]
        conn.close()
        time.sleep(5)
        out["rss_restarted"] = rss_mb(target.pids())
        print(f"  restart to /readyz {out['restart']:.1f}s, RSS then {out['rss_restarted']:.0f} MB",
              file=sys.stderr)
    return out


def table(names: list[str], results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, get: Callable[[dict], Any], fmt: str) -> None:
        values = []
        for r in results:
            try:
                values.append(fmt.format(get(r)))
            except (KeyError, TypeError):
                values.append("–")
        rows.append((label, values))
    row("creates/s, ConfigMaps", lambda r: r["load"]["configmaps"], "{:.0f}")
    row("creates/s, Pods", lambda r: r["load"]["pods"], "{:.0f}")
    row("RSS after load, MB (all server processes)", lambda r: r["rss"], "{:.0f}")
    row("RSS of etcd, MB", lambda r: r["store_rss"] or None, "{:.0f}")
    row("RSS after the lists, MB", lambda r: r["rss_after_lists"], "{:.0f}")
    for name in (results[0]["lists"] if results else {}):
        row(f"LIST {name}, s (first / median)", lambda r, n=name: f"{r['lists'][n][0]:.3f} / {r['lists'][n][1]:.3f}",
            "{}")
    row("watch delivery p50, s", lambda r: r["watch"]["p50"], "{:.3f}")
    row("watch delivery p99, s", lambda r: r["watch"]["p99"], "{:.3f}")
    row("watch delivery max, s", lambda r: r["watch"]["max"], "{:.3f}")
    row("watch events delivered / expected", lambda r: f"{r['watch']['delivered']}/{r['watch']['expected']}", "{}")
    row("watch: patches/s achieved", lambda r: r["watch"]["rate"], "{:.0f}")
    row("RSS after the watches, MB", lambda r: r["rss_after_watches"], "{:.0f}")
    row("restart to /readyz, s", lambda r: r["restart"], "{:.1f}")
    row("then the first LIST of pods (label group=g7, consistent), s", lambda r: r["first_list_restarted"], "{:.3f}")
    row("RSS after restart, MB", lambda r: r["rss_restarted"], "{:.0f}")
    print(f"\n{args.configmaps} ConfigMaps of 1 KB, {args.pods} Pods; {args.watches} pod watches, "
          f"{args.rate:.0f} patches/s for {args.watch_seconds:.0f}s; lists: first and median of {args.repeat}\n")
    print("| | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, values in rows:
        print(f"| {label} | " + " | ".join(values) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configmaps", type=int, default=100_000)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--watches", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--watch-seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4, help="load client processes (4 connections each)")
    parser.add_argument("--start", action="append", default=[],
                        help="kapiserver[:WORKERS] or kube-apiserver (started here, stopped at the end)")
    parser.add_argument("--target", action="append", default=[],
                        help="name=N,kubeconfig=K[,pids=P+P][,restart=CMD]: a running server")
    args = parser.parse_args()
    names, results = [], []
    for spec in args.start + args.target:
        if spec in args.start:
            kind, _, workers = spec.partition(":")
            target = kube_apiserver_target() if kind == "kube-apiserver" else kapiserver_target(int(workers or 2))
        else:
            target = external_target(spec)
        try:
            results.append(measure(target, args))
            names.append(target.name)
        finally:
            target.stop()
    table(names, results, args)


if __name__ == "__main__":
    main()

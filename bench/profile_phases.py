#!/usr/bin/env python3
"""Where the server's time goes, phase by phase: kbench's phases under py-spy.

Starts one server (``--backend sqlite|etcd``), runs the phases of
``../shared/bench/kbench.py`` against it (create, get, merge-patch update,
lists of all ConfigMaps with ``resourceVersion=0`` and consistent, delete;
ConfigMaps of 200 B, ``--n`` of them, ``--clients`` keep-alive HTTPS
connections) while ``py-spy record`` samples the server process, and sorts
every sample into the stage of the request it was in: the innermost frame of
the stack that belongs to a stage decides (see ``STAGES``); samples of
waiting threads are left out. Prints, per phase, ops/s and the share of the
server's busy samples (all its threads) in each stage.

It also measures the floor: a minimal Twisted TLS resource (``--floor``)
that answers every GET with the same 400-byte ConfigMap, driven by the same
clients, so kapiserver's GET rate can be read against what Twisted's TLS and
HTTP parsing alone allow on this machine.

    pip install py-spy   # not a project dependency: a profiler for this script only
    python bench/profile_phases.py --backend sqlite --n 2000 --clients 4 --floor

Needs root or ptrace permission for py-spy. Clients are threads of this
process and share the CPUs with the server: the shares are of the server's
own samples, which the clients do not change much; the rates are a lower bound.
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, print_table, run_parallel, server_config,  # noqa: E402
                     start_etcd, start_server)

# (stage, substrings of a frame's file path or function); the innermost frame matching any decides
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("TLS", ("OpenSSL/", "twisted/protocols/tls.py", "twisted/internet/_sslverify.py")),
    ("watch fan-out", ("kapiserver/storage/cacher", "kapiserver/registry/watch", "kapiserver/endpoints/watch",
                       "kapiserver/storage/sqlite_watch", "kapiserver/storage/etcd/watch")),
    ("storage", ("kapiserver/storage/", "sqlite3", "treq/", "twisted/web/client.py", "twisted/web/_newclient.py")),
    ("encoding", ("kapiserver/endpoints/negotiation", "kapiserver/endpoints/response", "kapiserver/machinery/codec",
                  "kapiserver/machinery/protobuf", "kapiserver/endpoints/table", "kapiserver/endpoints/list_writer")),
    ("validation", ("kapiserver/machinery/validation", "/validation.py", "kapiserver/apis/", "kapiserver/registry/resource_type.py:")),
    ("decoding", ("kapiserver/machinery/schema_decoder", "kapiserver/endpoints/request_decoder",
                  "kapiserver/machinery/yamljson", "kapiserver/machinery/mergepatch", "kapiserver/machinery/strategicpatch")),
    ("managedFields", ("kapiserver/machinery/managedfields",)),
    ("admission", ("kapiserver/admission/",)),
    ("authentication", ("kapiserver/auth/authenticator", "kapiserver/endpoints/filters/authentication",
                        "kapiserver/auth/x509", "kapiserver/auth/token")),
    ("authorization", ("kapiserver/auth/rbac", "kapiserver/endpoints/filters/authorization", "kapiserver/auth/authorizer")),
    ("audit, metrics, flow control", ("kapiserver/audit/", "kapiserver/endpoints/filters/", "kapiserver/machinery/metrics",
                                      "kapiserver/endpoints/metrics", "kapiserver/flowcontrol/")),
    ("store and handlers", ("kapiserver/registry/", "kapiserver/endpoints/")),
    ("routing", ("kapiserver/server/", "kapiserver/aggregator/", "kapiserver/apiextensions/server",
                 "twisted/web/resource.py")),
    ("HTTP parsing and writing", ("twisted/web/http.py", "twisted/web/server.py", "twisted/web/_http2.py", "h2/",
                                  "hpack/", "hyperframe/")),
    ("Deferreds", ("twisted/internet/defer.py",)),
    ("reactor and I/O", ("twisted/internet/", "twisted/python/")),
]
# leaves of a thread that waits (py-spy's own idle detection misses these): not work, not counted
IDLE_LEAVES = ("Condition.wait (threading.py", "EPollReactor.doPoll (twisted/internet/epollreactor.py",
               "Queue.get (queue.py", "_wait_for_tstate_lock")


def stage_of(stack: list[str]) -> str:
    """The stage of one sampled stack (frames outermost first)."""
    for frame in reversed(stack):
        for stage, needles in STAGES:
            if any(n in frame for n in needles):
                return stage
    return "other"


def read_raw(path: str) -> collections.Counter:
    """py-spy's raw output (``frame;frame;... count`` per line) summed by stage."""
    shares: collections.Counter = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if stack and not frames[-1].startswith(IDLE_LEAVES):
                shares[stage_of(frames)] += int(count)
    return shares


class Sampler:
    """``py-spy record`` of one process for as long as the ``with`` block runs."""

    def __init__(self, pid: int, out: str, rate: int) -> None:
        self.cmd = [shutil.which("py-spy") or "py-spy", "record", "--pid", str(pid), "--format", "raw",
                    "--rate", str(rate), "--nonblocking", "-o", out]
        self.out = out
        self.proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> "Sampler":
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached before the phase starts
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)


def phases(namespace: str, n: int) -> dict[str, tuple[int, Callable[[Client, int], int]]]:
    path = f"/api/v1/namespaces/{namespace}/configmaps"

    def create(c: Client, i: int) -> int:
        return c.request("POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": f"cm-{i}", "labels": {"b": str(i % 10)}},
                                        "data": {"k": "x" * 200}})[0]

    def update(c: Client, i: int) -> int:
        return c.request("PATCH", f"{path}/cm-{i}", {"data": {"k": "y" * 200}},
                         content_type="application/merge-patch+json")[0]

    return {
        "create": (n, create),
        "get": (n, lambda c, i: c.request("GET", f"{path}/cm-{i}")[0]),
        "update": (n, update),
        "list0": (40, lambda c, i: c.request("GET", f"{path}?resourceVersion=0")[0]),
        "list": (40, lambda c, i: c.request("GET", path)[0]),
        "delete": (n, lambda c, i: c.request("DELETE", f"{path}/cm-{i}")[0]),
    }


def profile_server(server: ServerProcess, n: int, clients: int, rate: int, workdir: str) -> list[list]:
    ns = f"prof-{int(time.time())}"
    Client(server).json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    rows = []
    for name, (count, op) in phases(ns, n).items():
        out = os.path.join(workdir, f"{name}.raw")
        with Sampler(server.proc.pid, out, rate):
            result = run_parallel(server, clients, count, op)
        shares = read_raw(out)
        if os.environ.get("PROFILE_KEEP"):
            shutil.copy(out, os.environ["PROFILE_KEEP"] + f"-{name}.raw")
        total = sum(shares.values()) or 1
        print(f"{name}: {result.rate:.0f} ops/s, {total} samples", file=sys.stderr)
        rows.append([name, f"{result.rate:.0f}", f"{result.pct(0.5):.2f}", result.errors]
                    + [f"{100 * shares[s] / total:.0f}%" for s in stage_names()])
    return rows


def stage_names() -> list[str]:
    return [s for s, _ in STAGES] + ["other"]


FLOOR_SERVER = r'''
import sys
from twisted.internet import reactor, ssl
from twisted.web import resource, server
certs = sys.argv[1]
BODY = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"ns","uid":"x",' \
       b'"resourceVersion":"1","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"k":"' + b"x" * 200 + b'"}}'
class Fixed(resource.Resource):
    isLeaf = True
    def render_GET(self, request):
        request.setHeader(b"content-type", b"application/json")
        return BODY
ca = ssl.Certificate.loadPEM(open(f"{certs}/ca.crt", "rb").read())
key = ssl.PrivateCertificate.loadPEM(open(f"{certs}/apiserver.key", "rb").read()
                                     + open(f"{certs}/apiserver.crt", "rb").read())
ctx = key.options(ca)  # requires a client certificate signed by the CA, as kapiserver does
port = reactor.listenSSL(0, server.Site(Fixed()), ctx, interface="127.0.0.1")
print(port.getHost().port, flush=True)
reactor.run()
'''


def floor_rate(server: ServerProcess, n: int, clients: int) -> float:
    """GET/s of the minimal Twisted TLS resource with kapiserver's certificates, same clients."""
    certs = os.path.join(server.workdir, "certs")
    proc = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER, certs], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        url = server.server_url
        server.server_url = f"https://127.0.0.1:{port}"  # the same client set-up, another port
        try:
            result = run_parallel(server, clients, n, lambda c, i: c.request("GET", "/cm")[0])
            if result.errors:
                raise RuntimeError(f"the floor server answered {result.errors} of {n} GETs with errors")
            return result.rate
        finally:
            server.server_url = url
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("sqlite", "etcd"), default="sqlite")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    ap.add_argument("--floor", action="store_true", help="also measure the minimal Twisted TLS resource")
    args = ap.parse_args()
    if not shutil.which("py-spy"):
        sys.exit("py-spy is not on PATH: pip install py-spy")
    workdir = tempfile.mkdtemp(prefix="kapi-profile-")
    etcd = start_etcd() if args.backend == "etcd" else None
    server = start_server(args.backend, etcd, config=server_config(args.backend, etcd))
    try:
        rows = profile_server(server, args.n, args.clients, args.rate, workdir)
        print_table(["phase", "ops/s", "p50 ms", "errors"] + stage_names(), rows,
                    title=f"Share of the server's samples by stage ({args.backend}, {args.clients} clients, "
                          f"{args.n} ConfigMaps)")
        if args.floor:
            get_rate = float(rows[1][1])
            floor = floor_rate(server, args.n, args.clients)
            print_table(["server", "GET/s", "of the floor"],
                        [["minimal Twisted TLS resource", f"{floor:.0f}", "1.00"],
                         ["kapiserver GET of one ConfigMap", f"{get_rate:.0f}", f"{get_rate / floor:.2f}"]],
                        title="The floor: Twisted's TLS and HTTP alone")
    finally:
        server.stop()
        if etcd is not None:
            etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

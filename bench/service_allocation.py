"""Service creates with cluster IP and node port allocation, on one server and on two sharing etcd.

``python3 bench/service_allocation.py [--count 200] [--existing 2000] [--concurrency 16]``

Every create allocates from the ``RangeAllocation`` records in storage (one
compare-and-swap write of the bitmap, batched with whatever else the server
is allocating at that moment).  Rows:

* one server on SQLite and on etcd: ``--count`` NodePort Services created
  at ``--concurrency``, first in an empty cluster, then with ``--existing``
  Services already stored (the cost of a create must not grow with it);
* two servers on one etcd (127.0.0.1 and 127.0.0.2), the clients split
  between them: the records are shared, so the servers' writes conflict and
  are retried.

"range writes" is how often etcd's ``/ranges/serviceips`` key was written
(its ``version`` delta) during the phase: below the number of creates when
concurrent allocations shared a write.  The range is a /16 so that
``--existing`` fits.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import threading
import shutil
import sys
import tempfile
import urllib.request
import uuid
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, EtcdServer, ServerProcess, ensure_namespace, machine, print_table,  # noqa: E402
                     run_parallel, server_config, start_etcd)

RANGE = "10.0.0.0/16"


def etcd_version(etcd: EtcdServer, key: str) -> int:
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    req = urllib.request.Request(f"{etcd.endpoint}/v3/kv/range", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        kvs = json.load(resp).get("kvs") or []
    return int(kvs[0].get("version", 0)) if kvs else 0


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"port": 80}]}}


def create_phase(servers: list[ServerProcess], namespace: str, count: int, concurrency: int, prefix: str,
                 etcd: Optional[EtcdServer], key: str) -> list:
    """Create ``count`` Services spread over ``servers``; returns [creates/s, p50, p99, range writes]."""
    before = etcd_version(etcd, key) if etcd else 0
    path = f"/api/v1/namespaces/{namespace}/services"
    share = count // len(servers)
    threads, out = [], [None] * len(servers)

    def run(k: int) -> None:
        out[k] = run_parallel(servers[k], max(1, concurrency // len(servers)), share,
                              lambda c, i: c.request("POST", path, service(f"{prefix}-{k}-{i}"))[0])
    for k in range(len(servers)):
        threads.append(threading.Thread(target=run, args=(k,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = [r for r in out if r is not None]
    seconds = max(r.seconds for r in results)
    latencies = sorted(x for r in results for x in r.latencies)
    errors = sum(r.errors for r in results)
    if errors:
        raise RuntimeError(f"{errors} creates failed")
    writes = etcd_version(etcd, key) - before if etcd else "-"
    p = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000  # noqa: E731
    return [share * len(servers) / seconds, p(0.5), p(0.99), writes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--existing", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    rows = []
    etcd = start_etcd()
    try:
        for backend in ("sqlite", "etcd"):
            prefix = f"/bench-{uuid.uuid4().hex[:8]}"
            config = server_config(backend, etcd, service_cluster_ip_range=RANGE)
            if backend == "etcd":
                config["storage"]["etcd"]["prefix"] = prefix
            server = ServerProcess(extra_config=config).start()
            try:
                client = Client(server)
                ensure_namespace(client, "bench")
                key = f"{prefix}/ranges/serviceips"
                db = etcd if backend == "etcd" else None
                print(f"{backend}: {args.count} creates into an empty cluster", file=sys.stderr)
                rows.append([f"1 server, {backend}", 0, *create_phase([server], "bench", args.count,
                                                                       args.concurrency, "a", db, key)])
                print(f"{backend}: {args.existing} more Services", file=sys.stderr)
                create_phase([server], "bench", args.existing, 32, "fill", None, key)
                rows.append([f"1 server, {backend}", args.existing + args.count,
                             *create_phase([server], "bench", args.count, args.concurrency, "b", db, key)])
            finally:
                server.cleanup()
        print("2 servers on etcd", file=sys.stderr)
        prefix = f"/bench-{uuid.uuid4().hex[:8]}"
        servers: list[ServerProcess] = []
        try:
            from kapiserver.testing.etcd import free_port
            port = free_port()
            for address in ("127.0.0.1", "127.0.0.2"):
                workdir = tempfile.mkdtemp(prefix="kapi-bench-")
                if servers:  # the second server gets a copy of the first one's certificates
                    shutil.copytree(os.path.join(servers[0].workdir, "certs"), os.path.join(workdir, "certs"))
                config = server_config("etcd", etcd, service_cluster_ip_range=RANGE, secure_port=port,
                                       bind_address=address, tls={"extra_sans": ["127.0.0.2"]})
                config["storage"]["etcd"]["prefix"] = prefix
                servers.append(ServerProcess(extra_config=config, workdir=workdir).start())
            ensure_namespace(Client(servers[0]), "bench")
            rows.append(["2 servers, etcd", 0, *create_phase(servers, "bench", args.count, args.concurrency, "a",
                                                              etcd, f"{prefix}/ranges/serviceips")])
        finally:
            for s in servers:
                s.cleanup()
    finally:
        etcd.cleanup()
    print_table(["setup", "Services stored", "creates/s", "p50 ms", "p99 ms", "range writes"], rows,
                f"{args.count} NodePort Service creates at concurrency {args.concurrency} ({machine()})")


if __name__ == "__main__":
    main()

"""API throughput and latency of a kapiserver process, on SQLite and on etcd.

``python3 bench/api_throughput.py [--backend sqlite|etcd|both] [--quick] [--tmpfs]``

Prints two tables:

1. the official ``kubernetes`` Python client, one request at a time:
   creates/s, gets/s and lists/s of 1,000 ConfigMaps;
2. raw HTTPS over keep-alive connections (one per client thread, admin
   client certificate) at 1, 16 and 64 concurrent clients: create, get,
   update (PUT), delete of N ConfigMaps, and lists of a namespace holding
   1,000 and 10,000 ConfigMaps, unpaginated and with ``limit=500`` (following
   every continue token), consistent (no resourceVersion) and
   ``resourceVersion=0`` (served from the watch cache): ops/s and p50/p99
   latency in ms.

``--quick`` runs a subset (300 objects, 1 and 16 clients, lists of 1,000).
``--tmpfs`` puts SQLite's and etcd's data in /dev/shm (fsync is free there);
by default both are on disk.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, Result, ServerProcess, configmap, create_many, ensure_namespace, machine,  # noqa: E402
                     print_table, run_parallel, scratch_dir, server_config, start_etcd)


def python_client_row(server: ServerProcess, backend: str, n: int, lists: int) -> list:
    """Sequential creates, gets and lists of ``n`` ConfigMaps through the official client."""
    from kubernetes import client
    api = client.CoreV1Api(server.python_client())
    ns = "pyclient"
    api.create_namespace({"metadata": {"name": ns}})
    t0 = time.perf_counter()
    for i in range(n):
        api.create_namespaced_config_map(ns, {"metadata": {"name": f"py-{i:05d}"}, "data": {"key": "v" * 200}})
    creates = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(n):
        api.read_namespaced_config_map(f"py-{i:05d}", ns)
    gets = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(lists):
        assert len(api.list_namespaced_config_map(ns).items) >= n  # + kube-root-ca.crt
    list_rate = lists / (time.perf_counter() - t0)
    return [backend, creates, gets, list_rate]


def crud_results(server: ServerProcess, concurrency: int, n: int) -> dict[str, Result]:
    """create, get, update, delete of ``n`` ConfigMaps at ``concurrency`` clients."""
    ns = f"crud-{concurrency}"
    ensure_namespace(Client(server), ns)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    name = lambda i: f"cm-{i:06d}"  # noqa: E731
    out = {"create": run_parallel(server, concurrency, n,
                                  lambda c, i: c.request("POST", path, configmap(name(i)))[0])}
    out["get"] = run_parallel(server, concurrency, n, lambda c, i: c.request("GET", f"{path}/{name(i)}")[0])
    out["update"] = run_parallel(server, concurrency, n, lambda c, i: c.request(
        "PUT", f"{path}/{name(i)}", configmap(name(i), key=f"updated-{i}"))[0])
    out["delete"] = run_parallel(server, concurrency, n, lambda c, i: c.request("DELETE", f"{path}/{name(i)}")[0])
    return out


def full_list(client: Client, path: str, expect: int, limit: int, rv: str) -> int:
    """One whole list (every page when ``limit``); returns the HTTP status of the last page."""
    seen, token = 0, ""
    while True:
        query = [f"limit={limit}"] if limit else []
        if rv:
            query.append(f"resourceVersion={rv}")
        if token:
            query.append(f"continue={token}")
        status, body = client.request("GET", path + ("?" + "&".join(query) if query else ""))
        if status != 200:
            return status
        page = json.loads(body)
        seen += len(page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    if seen < expect:  # the namespace also holds kube-root-ca.crt
        raise RuntimeError(f"list {path} limit={limit} rv={rv!r}: {seen} items, expected {expect}")
    return 200


LIST_VARIANTS = [("consistent", 0, ""), ("consistent, limit=500", 500, ""),
                 ("rv=0", 0, "0"), ("rv=0, limit=500", 500, "0")]


def list_results(server: ServerProcess, sizes: list[int], concurrencies: list[int]) -> dict[str, dict[int, Result]]:
    out: dict[str, dict[int, Result]] = {}
    for size in sizes:
        ns = f"list-{size}"
        ensure_namespace(Client(server), ns)
        filled = create_many(server, ns, size, concurrency=32)
        if filled.errors:
            raise RuntimeError(f"{filled.errors} errors while storing {size} ConfigMaps")
        path = f"/api/v1/namespaces/{ns}/configmaps"
        for label, limit, rv in LIST_VARIANTS:
            for c in concurrencies:
                count = max(20, 2 * c) if size <= 1000 else max(5, c)
                out.setdefault(f"list {size:,}, {label}", {})[c] = run_parallel(
                    server, c, count, lambda cl, i: full_list(cl, path, size, limit, rv))
    return out


def run_backend(backend: str, args: argparse.Namespace) -> tuple[list, dict]:
    etcd = start_etcd(args.tmpfs) if backend == "etcd" else None
    server = ServerProcess(server_config(backend, etcd), workdir=scratch_dir(args.tmpfs)).start()
    try:
        print(f"{backend}: official client...", file=sys.stderr)
        py_row = python_client_row(server, backend, args.n_client, 10)
        results: dict[str, dict[int, Result]] = {}
        for c in args.concurrency:
            print(f"{backend}: CRUD at {c} clients...", file=sys.stderr)
            for op, result in crud_results(server, c, args.n).items():
                results.setdefault(op, {})[c] = result
        print(f"{backend}: lists...", file=sys.stderr)
        results.update(list_results(server, args.list_sizes, args.concurrency))
        return py_row, results
    finally:
        server.cleanup()
        if etcd is not None:
            etcd.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "etcd", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="a fast subset")
    parser.add_argument("--tmpfs", action="store_true", help="keep the data of both backends in /dev/shm")
    args = parser.parse_args()
    args.n, args.n_client = (300, 300) if args.quick else (1000, 1000)
    args.concurrency = [1, 16] if args.quick else [1, 16, 64]
    args.list_sizes = [1000] if args.quick else [1000, 10_000]
    backends = ["sqlite", "etcd"] if args.backend == "both" else [args.backend]

    py_rows, merged = [], {}
    for backend in backends:
        py_row, results = run_backend(backend, args)
        py_rows.append(py_row)
        merged[backend] = results
    where = "tmpfs" if args.tmpfs else "disk"
    print_table(["backend", "creates/s", "gets/s", f"lists/s ({args.n_client:,} objects)"], py_rows,
                title=f"Official kubernetes Python client, sequential, {args.n_client:,} ConfigMaps "
                      f"({machine()}, data on {where})")
    headers = ["operation", "clients"]
    for b in backends:
        headers += [f"{b} ops/s", f"{b} p50 ms", f"{b} p99 ms"]
    rows = []
    for op in merged[backends[0]]:
        for c in args.concurrency:
            row = [op, c]
            for b in backends:
                r = merged[b][op][c]
                row += [r.rate, r.pct(0.5), r.pct(0.99)]
                if r.errors:
                    row[-1] = f"{row[-1]:.1f} ({r.errors} errors)"
            rows.append(row)
    print_table(headers, rows, title=f"Keep-alive HTTPS, {args.n:,} ConfigMaps per CRUD phase; a list op is a "
                                     f"whole list (all pages) ({machine()}, data on {where})")


if __name__ == "__main__":
    main()

"""Consistent GETs on etcd: from the watch cache after a progress request, or from etcd.

``python3 bench/etcd_consistent_reads.py [--etcd URL --etcd-pid PID] [--workers 2] [--rounds 2]``

Starts kapiserver on etcd twice per round, with
``storage.etcd.consistent_reads_from_cache`` true and false (the order
alternates from round to round: the second server of a pair tends to gain a
few per cent), creates 100 ConfigMaps, and has ``--concurrency`` keep-alive
clients GET them (no ``resourceVersion``: a consistent read) for ``--gets``
requests.  Prints GETs/s and the CPU per GET of the server (all its
processes) and of etcd.

Progress requests are used only with an etcd that answers them in order
(3.4.31+, 3.5.13+): point ``--etcd`` at one (the anchor's etcd 3.5, with its
``--etcd-pid`` for etcd's CPU) or set ``KAPISERVER_TEST_ETCD`` to such a
binary for the throw-away etcd started otherwise.  With an older etcd both
servers read etcd, and the script says so.
"""
from __future__ import annotations

import argparse
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, cpu_seconds, create_many, ensure_namespace, machine,  # noqa: E402
                     print_table, run_parallel, server_config, start_etcd, tree_cpu_seconds)


def run(url: str, etcd_pid: int, from_cache: bool, args: argparse.Namespace) -> list:
    config = server_config("sqlite", workers=args.workers, log_level="info")  # for the startup line read below
    config["storage"] = {"backend": "etcd3", "etcd": {
        "servers": [url], "prefix": f"/consistent-reads-{uuid.uuid4().hex[:8]}",
        "consistent_reads_from_cache": from_cache}}
    server = ServerProcess(extra_config=config).start()
    try:
        assert server.proc is not None
        client = Client(server)
        ensure_namespace(client, "bench")
        create_many(server, "bench", 100, concurrency=4)
        client.json("GET", "/api/v1/namespaces/bench/configmaps/cm-000000")
        client.close()
        path = "/api/v1/namespaces/bench/configmaps/cm-{:06d}"
        before = tree_cpu_seconds(server.proc.pid), cpu_seconds(etcd_pid) if etcd_pid else 0.0
        result = run_parallel(server, args.concurrency, args.gets,
                              lambda c, i: c.request("GET", path.format(i % 100))[0])
        after = tree_cpu_seconds(server.proc.pid), cpu_seconds(etcd_pid) if etcd_pid else 0.0
        with open(server.log_path) as f:
            served = "watch cache" if "served from the watch cache" in f.read() else "etcd"
        per_get = [round(1e6 * (a - b) / args.gets) for a, b in zip(after, before)]
        return [str(from_cache).lower(), served, round(result.rate), round(result.pct(0.99), 2),
                result.errors, per_get[0], per_get[1] if etcd_pid else "-"]
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--etcd", default="", help="an etcd client URL (default: a throw-away etcd)")
    ap.add_argument("--etcd-pid", type=int, default=0, help="that etcd's process, for its CPU")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--gets", type=int, default=12000)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    etcd = None
    url, etcd_pid = args.etcd, args.etcd_pid
    if not url:
        etcd = start_etcd()
        assert etcd.process is not None
        url, etcd_pid = etcd.endpoint, etcd.process.pid
    print(f"# {machine()}; {args.workers} workers, {args.concurrency} clients, {args.gets} GETs per server\n")
    rows = []
    try:
        for r in range(args.rounds):
            for from_cache in ((True, False) if r % 2 == 0 else (False, True)):
                rows.append([r + 1] + run(url, etcd_pid, from_cache, args))
                print(*rows[-1], flush=True)
    finally:
        if etcd is not None:
            etcd.cleanup()
    print_table(["round", "consistent_reads_from_cache", "consistent reads served by", "GETs/s", "p99 ms",
                 "errors", "server CPU µs/GET", "etcd CPU µs/GET"], rows)


if __name__ == "__main__":
    main()

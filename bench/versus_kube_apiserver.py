"""kapiserver against kube-apiserver, side by side in one run of ``kbench.py`` (issue #14's table).

``python3 bench/versus_kube_apiserver.py [--workers N] [--procs 4] [--n 2000]``

Needs the anchor kit's kube-apiserver and etcd running (``../shared/anchor/start-anchor.sh``):
its kubeconfig (``--anchor-kubeconfig``) and etcd (``--etcd``, the same etcd, under a
key prefix of kapiserver's own).  Runs ``kbench.py`` against kube-apiserver, then
kapiserver on the embedded store, then kapiserver on that etcd, and prints each
phase's ops/s with kapiserver's ratio to kube-apiserver, and each server's
resident memory after the run (all its processes; kube-apiserver's without etcd).
Read the ratios, not the absolute numbers: the clients share the machine.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import REPO, ServerProcess, machine, print_table, rss_mb, server_config, tree_rss_mb  # noqa: E402

ANCHOR = os.path.expanduser("~/.cache/kube-anchor")
KBENCH = os.path.join(os.path.dirname(REPO), "shared", "bench", "kbench.py")
LINE = re.compile(r"^(\w+)\s+n=\s*\d+\s+procs=\s*\d+\s+([\d.]+) ops/s\s+p50\s+([\d.]+) ms\s+p99\s+([\d.]+) ms"
                  r"\s+errors (\d+)")


def kbench(kubeconfig: str, args: argparse.Namespace) -> dict[str, tuple[float, float, int]]:
    """phase -> (ops/s, p99 ms, errors)"""
    out = subprocess.run([sys.executable, args.kbench, kubeconfig, "--procs", str(args.procs), "--n", str(args.n)],
                         capture_output=True, text=True, check=True).stdout
    print(out, flush=True)
    return {m[1]: (float(m[2]), float(m[4]), int(m[5])) for m in map(LINE.match, out.splitlines()) if m}


def anchor_pid() -> int:
    with open(os.path.join(ANCHOR, "run", "kube-apiserver.pid")) as f:
        return int(f.read())


def kapiserver(config: dict, args: argparse.Namespace) -> tuple[dict, float]:
    server = ServerProcess(extra_config=config).start()
    try:
        results = kbench(server.kubeconfig, args)
        assert server.proc is not None
        return results, tree_rss_mb(server.proc.pid)
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=0, help="kapiserver's workers (0 = one per CPU)")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--anchor-kubeconfig", default=os.path.join(ANCHOR, "admin.kubeconfig"))
    ap.add_argument("--etcd", default="http://127.0.0.1:2479", help="the anchor's etcd ('' to skip etcd)")
    ap.add_argument("--kbench", default=KBENCH)
    args = ap.parse_args()
    print(f"# {machine()}; kbench --procs {args.procs} --n {args.n}; kapiserver workers: {args.workers}\n")

    print("## kube-apiserver", flush=True)
    reference = kbench(args.anchor_kubeconfig, args)
    reference_rss = rss_mb(anchor_pid())
    runs = []
    print("## kapiserver, embedded SQLite", flush=True)
    runs.append(("SQLite", *kapiserver(server_config("sqlite", workers=args.workers), args)))
    if args.etcd:
        print("## kapiserver, the same etcd", flush=True)
        config = server_config("sqlite", workers=args.workers)
        config["storage"] = {"backend": "etcd3", "etcd": {"servers": [args.etcd],
                                                          "prefix": f"/kapiserver-bench-{uuid.uuid4().hex[:8]}"}}
        runs.append(("etcd", *kapiserver(config, args)))

    headers = ["phase", "kube-apiserver ops/s"]
    for name, _, _ in runs:
        headers += [f"kapiserver {name} ops/s", "ratio"]
    rows = []
    for phase, (ops, _, _) in reference.items():
        row: list = [phase, ops]
        for _, results, _ in runs:
            mine = results.get(phase, (0.0, 0.0, 0))[0]
            row += [mine, f"{mine / ops:.2f}x" if ops else "-"]
        rows.append(row)
    print_table(headers, rows, "Throughput (one run each, same machine, same clients)")
    print_table(["server", "RSS after the run, MiB"],
                [["kube-apiserver (without etcd)", reference_rss]] + [[f"kapiserver {n}", rss] for n, _, rss in runs])


if __name__ == "__main__":
    main()

"""kapiserver against kube-apiserver, side by side in one run of ``kbench.py`` (issue #14's table).

``python3 bench/versus_kube_apiserver.py [--workers N] [--procs 4] [--n 2000]``

Needs the anchor kit's kube-apiserver and etcd running (``../shared/anchor/start-anchor.sh``):
its kubeconfig (``--anchor-kubeconfig``) and etcd (``--etcd``, the same etcd, under a
key prefix of kapiserver's own).  Runs ``kbench.py`` against kube-apiserver, then
kapiserver on the embedded store, then kapiserver on that etcd, and prints each
phase's ops/s with kapiserver's ratio to kube-apiserver, and each server's
resident memory after the run (all its processes; kube-apiserver's without etcd).
Read the ratios, not the absolute numbers: the clients share the machine.

It also prints the CPU each phase cost per operation, from ``/proc`` at the end
of each phase: the server's (all its processes), etcd's, and the clients' (the
phase's pool of kbench processes, counted once they have exited).  The machine's
CPUs are shared by all three, so a server's throughput follows from the sum.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (REPO, ServerProcess, cpu_seconds, machine, print_table, rss_mb, server_config,  # noqa: E402
                     tree_cpu_seconds, tree_rss_mb)

ANCHOR = os.path.expanduser("~/.cache/kube-anchor")
KBENCH = os.path.join(os.path.dirname(REPO), "shared", "bench", "kbench.py")
LINE = re.compile(r"^(?P<phase>\w+)\s+n=\s*(?P<n>\d+)\s+procs=\s*\d+\s+(?P<ops>[\d.]+) ops/s\s+"
                  r"p50\s+[\d.]+ ms\s+p99\s+(?P<p99>[\d.]+) ms\s+errors (?P<errors>\d+)")


@dataclasses.dataclass
class Phase:
    ops: float  # per second
    p99: float  # ms
    errors: int
    cpu_us: tuple[float, float, float]  # per operation: the server's, etcd's, the clients'


def kbench(kubeconfig: str, args: argparse.Namespace, server_pid: int, etcd_pid: int) -> dict[str, Phase]:
    """Run kbench against a server; its phases by name."""
    proc = subprocess.Popen([sys.executable, args.kbench, kubeconfig, "--procs", str(args.procs), "--n", str(args.n)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None

    def cpu() -> tuple[float, float, float]:
        return (tree_cpu_seconds(server_pid), cpu_seconds(etcd_pid) if etcd_pid else 0.0,
                cpu_seconds(proc.pid, waited_for_children=True))
    phases, before = {}, cpu()
    for line in proc.stdout:
        print(line, end="", flush=True)
        m = LINE.match(line)
        if m:
            after, n = cpu(), int(m["n"])
            server, etcd, clients = (1e6 * (a - b) / n for a, b in zip(after, before))
            phases[m["phase"]] = Phase(float(m["ops"]), float(m["p99"]), int(m["errors"]), (server, etcd, clients))
            before = after
    if proc.wait():
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return phases


def anchor_pid(name: str) -> int:
    with open(os.path.join(ANCHOR, "run", f"{name}.pid")) as f:
        return int(f.read())


def kapiserver(config: dict, args: argparse.Namespace, etcd_pid: int) -> tuple[dict, float]:
    server = ServerProcess(extra_config=config).start()
    try:
        assert server.proc is not None
        results = kbench(server.kubeconfig, args, server.proc.pid, etcd_pid)
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

    etcd_pid = anchor_pid("etcd") if args.etcd else 0
    print("## kube-apiserver", flush=True)
    reference = kbench(args.anchor_kubeconfig, args, anchor_pid("kube-apiserver"), etcd_pid)
    reference_rss = rss_mb(anchor_pid("kube-apiserver"))
    runs = []
    print("## kapiserver, embedded SQLite", flush=True)
    runs.append(("SQLite", *kapiserver(server_config("sqlite", workers=args.workers), args, etcd_pid)))
    if args.etcd:
        print("## kapiserver, the same etcd", flush=True)
        config = server_config("sqlite", workers=args.workers)
        config["storage"] = {"backend": "etcd3", "etcd": {"servers": [args.etcd],
                                                          "prefix": f"/kapiserver-bench-{uuid.uuid4().hex[:8]}"}}
        runs.append(("etcd", *kapiserver(config, args, etcd_pid)))

    headers = ["phase", "kube-apiserver ops/s"]
    for name, _, _ in runs:
        headers += [f"kapiserver {name} ops/s", "ratio"]
    rows = []
    for phase, theirs in reference.items():
        row: list = [phase, theirs.ops]
        for _, results, _ in runs:
            mine = results[phase].ops if phase in results else 0.0
            row += [mine, f"{mine / theirs.ops:.2f}x" if theirs.ops else "-"]
        rows.append(row)
    print_table(headers, rows, "Throughput (one run each, same machine, same clients)")

    headers = ["phase"]
    for name in ["kube-apiserver"] + [f"kapiserver {n}" for n, _, _ in runs]:
        headers += [f"{name}: server", "etcd", "clients"]
    rows = []
    for phase, theirs in reference.items():
        row = [phase]
        for results in [reference] + [results for _, results, _ in runs]:
            row += [round(us) for us in results[phase].cpu_us] if phase in results else ["-"] * 3
        rows.append(row)
    print_table(headers, rows, "CPU per operation, µs (from /proc at the end of each phase; "
                               "etcd's includes what the other servers on it did meanwhile)")
    print_table(["server", "RSS after the run, MiB"],
                [["kube-apiserver (without etcd)", reference_rss]] + [[f"kapiserver {n}", rss] for n, _, rss in runs])


if __name__ == "__main__":
    main()

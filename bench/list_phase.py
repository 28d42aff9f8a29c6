#!/usr/bin/env python3
"""kbench's list phases client by client, against the same clients listing steadily.

``python3 bench/list_phase.py [--kubeconfig KC] [--rounds 3] [--seconds 5] [--workers N]``

kbench's ``list0`` and ``list`` phases are 40 lists of 2,000 ConfigMaps by a
fresh pool of 4 client processes.  This runs those phases (with kbench's own
client code, ``../shared/bench/kbench.py``) and notes for each client when its
process started, when its TLS connection was up, and when its first and last
answers came, in ms from the phase's start; then the same four clients list
in a loop for ``--seconds``.  The phase's rate against the loop's shows how
much of a phase is fixed costs (the pool, the handshakes), which no server
makes faster.  Against a kapiserver it starts (SQLite, ``--workers``), or any
server given by ``--kubeconfig`` (the anchor's: it must hold no namespace
``list-phase``).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import REPO, ServerProcess, machine, print_table, server_config  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(REPO), "shared", "bench"))
import kbench  # noqa: E402

NAMESPACE = "list-phase"
LISTS = 40
PROCS = 4


def _path(consistent: bool) -> str:
    return f"/api/v1/namespaces/{NAMESPACE}/configmaps" + ("" if consistent else "?resourceVersion=0")


def _phase_client(args: tuple) -> list[float]:
    """One kbench client of a list phase: its marks in ms from ``t0``."""
    cfg, path, lists, t0 = args
    started = time.perf_counter()
    conn = kbench.conn(cfg)
    conn.connect()
    connected = time.perf_counter()
    answers = []
    for _ in range(lists):
        kbench.req(conn, "GET", path, None, cfg[5])
        answers.append(time.perf_counter())
    return [(t - t0) * 1e3 for t in (started, connected, answers[0], answers[-1])]


def _loop_client(args: tuple) -> int:
    cfg, path, seconds = args
    conn = kbench.conn(cfg)
    count, end = 0, time.time() + seconds
    while time.time() < end:
        kbench.req(conn, "GET", path, None, cfg[5])
        count += 1
    return count


def phase(cfg: tuple, consistent: bool) -> tuple[float, list[list[float]]]:
    """(lists per second, each client's marks) of one kbench-style list phase."""
    t0 = time.perf_counter()
    with multiprocessing.Pool(PROCS) as pool:
        marks = pool.map(_phase_client, [(cfg, _path(consistent), LISTS // PROCS, t0)] * PROCS)
    return LISTS / (time.perf_counter() - t0), marks


def loop(cfg: tuple, consistent: bool, seconds: float) -> float:
    t0 = time.perf_counter()
    with multiprocessing.Pool(PROCS) as pool:
        counts = pool.map(_loop_client, [(cfg, _path(consistent), seconds)] * PROCS)
    return sum(counts) / (time.perf_counter() - t0)


def fill(cfg: tuple, n: int) -> None:
    conn = kbench.conn(cfg)
    status, _, body = kbench.req(conn, "POST", "/api/v1/namespaces", json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}), cfg[5])
    if status >= 300:
        raise SystemExit(f"cannot create namespace {NAMESPACE}: {status} {body[:200]!r}")
    for i in range(n):
        kbench.req(conn, "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "labels": {"b": str(i % 10)}},
             "data": {"k": "x" * 200}}), cfg[5])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default="", help="a running server's (default: start a kapiserver)")
    parser.add_argument("--workers", type=int, default=0, help="the started kapiserver's workers (0: one per CPU)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    server = None if args.kubeconfig else ServerProcess(
        extra_config=server_config("sqlite", workers=args.workers)).start()
    try:
        cfg = kbench.load(args.kubeconfig or server.kubeconfig)  # type: ignore[union-attr]
        fill(cfg, args.n)
        rows = []
        for _ in range(args.rounds):
            for consistent in (False, True):
                rate, marks = phase(cfg, consistent)
                steady = loop(cfg, consistent, args.seconds)
                rows.append(["list" if consistent else "list0", f"{rate:.0f}", f"{steady:.0f}",
                             "  ".join("%.0f/%.0f/%.0f/%.0f" % tuple(m) for m in marks)])
    finally:
        if server is not None:
            server.stop()
    print(f"# {machine()}; {args.n} ConfigMaps; {PROCS} clients")
    print_table(["phase", f"{LISTS}-list phase, lists/s", f"{args.seconds:g} s loop, lists/s",
                 "each client: started / connected / first answer / last answer, ms"], rows)


if __name__ == "__main__":
    main()

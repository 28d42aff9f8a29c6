"""Watch delivery delay through a real server: many HTTPS watch streams, steady writes.

``python3 bench/watch_latency.py [--watchers 500] [--rate 100] [--seconds 10] [--backend sqlite|etcd|both]
[--workers 1] [--server-cpus 0 --client-cpus 1]``

The watchers are real ``?watch=1`` HTTPS streams (admin client certificate),
spread over a few client processes that read them with a selector.  Once every
stream is open, ConfigMaps are created at ``--rate`` per second, each carrying
the wall-clock time just before its request was sent (``data.t``).  A watcher
records ``now - t`` for every event it reads; the table shows p50/p99/max of
those delays over all watchers, and how many of the expected events arrived.
With ``--server-cpus``/``--client-cpus`` the server (``taskset``) and this
benchmark's writers and watchers run on separate CPUs, so client work does not
show up as server latency.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import selectors
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, configmap, ensure_namespace, host_port, machine,  # noqa: E402
                     open_raw_watch, print_table, read_stamped_events, scratch_dir, server_config, ssl_context,
                     start_etcd, tree_rss_mb)

NAMESPACE = "watch-bench"


# An ADDED event of a ConfigMap written by this benchmark, and its write time.
ADDED_T = re.compile(rb'\{"type":"ADDED".*?"t":"([0-9.]+)"')


def watcher_process(server: ServerProcess, path: str, watchers: int, expect: int, seconds: float,
                    ready, results) -> None:
    """A client process holding ``watchers`` streams; puts (delivered, delays) on ``results``.

    The streams are read with one selector and a regular expression over the
    raw bytes (no JSON decoding, no framework): the client's share of the
    two CPUs is what the server loses, so it is kept as small as possible.
    A line is complete once its newline arrived; chunk framing never matches.
    """
    ctx = ssl_context(server)
    selector = selectors.DefaultSelector()
    for _ in range(watchers):
        sock, rest = open_raw_watch(*host_port(server), ctx, path)
        selector.register(sock, selectors.EVENT_READ, [rest, 0])  # [partial line, events counted]
    ready.set()
    results.put(read_stamped_events(selector, watchers, expect, ADDED_T, time.time() + 60 + seconds * 3))


def write_at_rate(server: ServerProcess, rate: float, seconds: float, threads: int = 4) -> tuple[int, float]:
    """Create ``rate * seconds`` ConfigMaps on schedule from a few keep-alive connections;
    returns (errors, the write rate achieved: lower than ``rate`` when the server falls behind)."""
    n = int(rate * seconds)
    start = time.time() + 0.2
    errors = [0]

    def writer(j: int) -> None:
        client = Client(server)
        for i in range(j, n, threads):
            pause = start + i / rate - time.time()
            if pause > 0:
                time.sleep(pause)
            body = configmap(f"w-{i:06d}", t=repr(time.time()))
            status, _ = client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", body)
            if status != 201:
                errors[0] += 1
        client.close()
    pool = [threading.Thread(target=writer, args=(j,)) for j in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors[0], n / (time.time() - start)


def run_backend(backend: str, args: argparse.Namespace) -> list:
    etcd = start_etcd(args.tmpfs) if backend == "etcd" else None
    prefix = ("taskset", "-c", args.server_cpus) if args.server_cpus else ()
    server = ServerProcess(server_config(backend, etcd, workers=args.workers), workdir=scratch_dir(args.tmpfs),
                           command_prefix=prefix).start()
    try:
        client = Client(server)
        ensure_namespace(client, NAMESPACE)
        rv = client.json("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps?limit=1")["metadata"]["resourceVersion"]
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion={rv}"
        n = int(args.rate * args.seconds)
        ctx = multiprocessing.get_context("fork")
        results = ctx.Queue()
        per = [args.watchers // args.processes + (i < args.watchers % args.processes) for i in range(args.processes)]
        readies = [ctx.Event() for _ in per]
        procs = [ctx.Process(target=watcher_process, args=(server, path, k, n, args.seconds, readies[i], results))
                 for i, k in enumerate(per)]
        for p in procs:
            p.start()
        for e in readies:
            if not e.wait(60):
                raise RuntimeError("watchers did not open in 60s")
        rss_before = _rss(server)
        write_errors, achieved = write_at_rate(server, args.rate, args.seconds)
        delivered, delays = 0, []
        for _ in procs:
            got, d = results.get(timeout=120 + args.seconds * 3)
            delivered += got
            delays += d
        for p in procs:
            p.join()
        delays.sort()

        def pct(p: float) -> float:
            return delays[min(len(delays) - 1, int(len(delays) * p))] * 1000 if delays else float("nan")
        return [backend, args.watchers, args.rate, achieved, f"{delivered:,}/{n * args.watchers:,}", pct(0.5), pct(0.99),
                delays[-1] * 1000 if delays else float("nan"), write_errors, rss_before, _rss(server)]
    finally:
        server.cleanup()
        if etcd is not None:
            etcd.cleanup()


def _rss(server: ServerProcess) -> float:
    return tree_rss_mb(server.proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=2, help="client processes holding the streams")
    parser.add_argument("--backend", choices=("sqlite", "etcd", "both"), default="both")
    parser.add_argument("--tmpfs", action="store_true", help="keep the data of both backends in /dev/shm")
    parser.add_argument("--workers", type=int, default=1, help="the server's workers (0 = one per CPU)")
    parser.add_argument("--server-cpus", default="", help="CPUs of the server (taskset list, e.g. 0)")
    parser.add_argument("--client-cpus", default="", help="CPUs of the writers and watchers (e.g. 1)")
    args = parser.parse_args()
    if args.client_cpus:
        os.sched_setaffinity(0, {int(c) for c in args.client_cpus.split(",")})
    rows = [run_backend(b, args) for b in (("sqlite", "etcd") if args.backend == "both" else (args.backend,))]
    print_table(["backend", "watchers", "target writes/s", "achieved writes/s", "delivered", "p50 ms", "p99 ms", "max ms", "write errors",
                 "RSS MiB (open)", "RSS MiB (end)"], rows,
                title=f"Write → watch delivery over HTTPS, {args.seconds:.0f} s of writes ({machine()})")


if __name__ == "__main__":
    main()

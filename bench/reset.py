"""Per-test isolation: how long ``POST /debug/kapiserver/reset`` takes with 1,000 objects stored.

``python3 bench/reset.py [--objects 1000] [--runs 7] [--workers 1] [--tmpfs]``

A server started as the pytest fixture starts it (``ServerProcess(reset=True)``,
``workers: 1``, SQLite on disk), then for each row ``--runs`` rounds of: the
"test" writes (not timed), then one reset over a kept-alive HTTPS connection
(timed: the request as a client sees it, TLS included). The reset is one SQLite
transaction (one fsync) of deletes, updates and creates plus their watch events
through the watch cache. Rows:

* snapshot = bootstrap, the test creates 1,000 objects (ConfigMaps, and 50 each of Secrets,
  ServiceAccounts and Services, in a new Namespace): reset deletes them all;
* 1,000 such objects stored in the snapshot, the test writes nothing: the floor (the diff of
  the store against the snapshot);
* ... the test creates 10 ConfigMaps, updates 5 and deletes 5: a typical test;
* ... the test updates every ConfigMap: reset rewrites them;
* ... the test deletes every ConfigMap: reset re-creates them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Client, ServerProcess, configmap, machine, print_table, scratch_dir  # noqa: E402

NS = "/api/v1/namespaces"


def populate(client: Client, count: int, tag: str) -> list[str]:
    """``count`` objects of several kinds (ConfigMaps most); their paths."""
    client.json("POST", NS, {"metadata": {"name": f"bench-{tag}"}})
    paths = [f"{NS}/bench-{tag}"]
    base = f"{NS}/bench-{tag}"
    kinds: list[tuple[str, Callable[[str], dict]]] = [
        ("secrets", lambda n: {"metadata": {"name": n}, "stringData": {"k": "v" * 100}}),
        ("serviceaccounts", lambda n: {"metadata": {"name": n}}),
        ("services", lambda n: {"metadata": {"name": n}, "spec": {"ports": [{"port": 80}]}}),
    ]
    for plural, make in kinds:
        for i in range(min(50, count // 10)):
            client.json("POST", f"{base}/{plural}", make(f"{plural[:3]}-{i}"))
            paths.append(f"{base}/{plural}/{plural[:3]}-{i}")
    i = 0
    while len(paths) < count:
        client.json("POST", f"{base}/configmaps", configmap(f"cm-{i}"))
        paths.append(f"{base}/configmaps/cm-{i}")
        i += 1
    return paths


def timed_reset(client: Client) -> tuple[float, dict]:
    started = time.perf_counter()
    body = client.json("POST", "/debug/kapiserver/reset")
    return (time.perf_counter() - started) * 1000, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tmpfs", action="store_true", help="the database in /dev/shm (no fsync cost)")
    args = parser.parse_args()

    server = ServerProcess(extra_config={"log_level": "warn", "workers": args.workers,
                                         "service_cluster_ip_range": "10.0.0.0/16"},
                           workdir=scratch_dir(args.tmpfs), reset=True)
    server.start()
    rows = []
    try:
        client = Client(server)
        client.request("GET", "/version")

        def row(name: str, test: Callable[[], None]) -> None:
            times, counts = [], {}
            for run in range(args.runs):
                test()
                ms, counts = timed_reset(client)
                times.append(ms)
            changed = f"{counts['deleted']} / {counts['rewritten']} / {counts['recreated']}"
            rows.append([name, changed, statistics.median(times), min(times), max(times)])
            print(f"{name}: median {statistics.median(times):.1f} ms", file=sys.stderr)

        # the bootstrap snapshot: the test creates every object
        created = [0]

        def create_all() -> None:
            created[0] += 1
            populate(client, args.objects, f"new{created[0]}")
        row(f"test created {args.objects}", create_all)

        print(f"storing {args.objects} objects in the snapshot", file=sys.stderr)
        stored = populate(client, args.objects, "kept")
        server.snapshot()
        row(f"{args.objects} stored, test wrote nothing", lambda: None)
        configmaps = [p for p in stored if "/configmaps/" in p]

        def typical() -> None:
            for i in range(10):
                client.json("POST", f"{NS}/bench-kept/configmaps", configmap(f"test-{i}"))
            for path in configmaps[:5]:
                client.json("PUT", path, {**client.json("GET", path), "data": {"key": "changed"}})
            for path in configmaps[5:10]:
                client.json("DELETE", path)
        row(f"{args.objects} stored, test created 10, updated 5, deleted 5", typical)

        def update_all() -> None:
            for path in configmaps:
                client.json("PUT", path, {**client.json("GET", path), "data": {"key": "changed"}})
        row(f"{args.objects} stored, test updated {len(configmaps)}", update_all)

        def delete_all() -> None:
            for path in configmaps:
                client.json("DELETE", path)
        row(f"{args.objects} stored, test deleted {len(configmaps)}", delete_all)
    finally:
        server.stop()
    print_table(["scenario", "deleted / rewritten / recreated", "median ms", "min ms", "max ms"], rows,
                f"Reset (POST /debug/kapiserver/reset, keep-alive HTTPS), {args.runs} runs each, workers: "
                f"{args.workers}, SQLite {'in /dev/shm' if args.tmpfs else 'on disk'}; {machine()}")


if __name__ == "__main__":
    main()

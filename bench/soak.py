"""Soak: mixed load on one server for a while, watching its memory.

``python3 bench/soak.py [--minutes 10] [--backend sqlite|etcd] [--clients 8] [--watchers 20]``

Client threads pick a random ConfigMap out of a fixed pool of names and a
random verb (create 35%, update 25%, delete 20%, get 10%, list 10%), so the
stored set stays bounded and 404/409 answers are part of the mix (expected,
not errors).  Watchers hold HTTPS watch streams with ``timeoutSeconds=30``
and re-open them from their last resourceVersion.  Every minute one line
shows the server's RSS, requests and events of that minute and any
unexpected answers (5xx, connection errors).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, configmap, ensure_namespace, machine, print_table, rss_mb,  # noqa: E402
                     scratch_dir, server_config, start_etcd)

NAMESPACE = "soak"
POOL = 500
PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
EXPECTED = {200, 201, 404, 409}


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = self.unexpected = self.events = 0

    def take(self) -> tuple[int, int, int]:
        with self.lock:
            out = (self.requests, self.unexpected, self.events)
            self.requests = self.unexpected = self.events = 0
        return out


def client_loop(server: ServerProcess, stop: threading.Event, counters: Counters, seed: int) -> None:
    rnd = random.Random(seed)
    client = Client(server, timeout=30)
    while not stop.is_set():
        name = f"soak-{rnd.randrange(POOL):04d}"
        roll = rnd.random()
        try:
            if roll < 0.35:
                status, _ = client.request("POST", PATH, configmap(name, v=str(rnd.random())))
            elif roll < 0.60:
                status, _ = client.request("PUT", f"{PATH}/{name}", configmap(name, v=str(rnd.random())))
            elif roll < 0.80:
                status, _ = client.request("DELETE", f"{PATH}/{name}")
            elif roll < 0.90:
                status, _ = client.request("GET", f"{PATH}/{name}")
            else:
                status, _ = client.request("GET", PATH + ("?resourceVersion=0" if rnd.random() < 0.5 else "?limit=100"))
        except Exception:
            status = 599
            client.close()
        with counters.lock:
            counters.requests += 1
            if status not in EXPECTED:
                counters.unexpected += 1
    client.close()


def watch_loop(server: ServerProcess, stop: threading.Event, counters: Counters) -> None:
    client = Client(server, timeout=5)
    rv = ""
    while not stop.is_set():
        try:
            if not rv:
                rv = client.json("GET", PATH + "?limit=1")["metadata"]["resourceVersion"]
            conn = http.client.HTTPSConnection(client.host, client.port, context=client.ctx, timeout=5)
            conn.request("GET", f"{PATH}?watch=1&resourceVersion={rv}&timeoutSeconds=30&allowWatchBookmarks=true")
            resp = conn.getresponse()
            if resp.status != 200:
                rv = ""
                resp.read()
                continue
            while not stop.is_set():
                line = resp.readline()
                if not line:
                    break
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410 Gone: re-list
                    rv = ""
                    break
                rv = event["object"]["metadata"].get("resourceVersion", rv)
                with counters.lock:
                    counters.events += 1
            conn.close()
        except Exception:
            with counters.lock:
                counters.unexpected += 1
            rv = ""
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--backend", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between report lines")
    args = parser.parse_args()
    etcd = start_etcd() if args.backend == "etcd" else None
    server = ServerProcess(server_config(args.backend, etcd), workdir=scratch_dir()).start()
    stop = threading.Event()
    counters = Counters()
    try:
        ensure_namespace(Client(server), NAMESPACE)
        pid = server.proc.pid
        rows = [["start", rss_mb(pid), "", "", "", ""]]
        print(f"soak on {args.backend}: {args.clients} clients, {args.watchers} watchers, {args.minutes:g} min",
              file=sys.stderr)
        threads = [threading.Thread(target=client_loop, args=(server, stop, counters, i), daemon=True)
                   for i in range(args.clients)]
        threads += [threading.Thread(target=watch_loop, args=(server, stop, counters), daemon=True)
                    for _ in range(args.watchers)]
        for t in threads:
            t.start()
        t0 = last = time.monotonic()
        end = t0 + args.minutes * 60
        while True:
            now = time.monotonic()
            time.sleep(max(0.0, min(end, last + args.interval) - now))
            now = time.monotonic()
            requests, unexpected, events = counters.take()
            label = f"{(now - t0) / 60:.1f} min"
            rows.append([label, rss_mb(pid), requests / (now - last), events / (now - last), unexpected,
                         server.proc.poll() is None and "up" or "DEAD"])
            print(f"  {label}: RSS {rows[-1][1]:.1f} MiB, {rows[-1][2]:.0f} req/s, {rows[-1][3]:.0f} events/s, "
                  f"{unexpected} unexpected", file=sys.stderr)
            last = now
            if now >= end:
                break
        stop.set()
        for t in threads:
            t.join(10)
        time.sleep(2)
        rows.append(["end (idle 2 s)", rss_mb(pid), "", "", "", ""])
        print_table(["time", "RSS MiB", "requests/s", "watch events/s", "unexpected", "server"], rows,
                    title=f"Soak, {args.backend}, {args.clients} clients + {args.watchers} watchers ({machine()})")
    finally:
        stop.set()
        server.cleanup()
        if etcd is not None:
            etcd.cleanup()


if __name__ == "__main__":
    main()
